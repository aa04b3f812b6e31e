// executeSyncPlan: what runs at once, what waits for what, and that a failure of one part still
// leaves the cache in step with what the kernel accepted.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import type { IptablesSync } from '../../../src/iptables/sync.js';
import { makeVirtualServer } from '../../../src/model/ipvs.js';
import { executeSyncPlan } from '../../../src/sync/executor.js';
import { TableCache } from '../../../src/sync/table-cache.js';
import { type SyncPlan } from '../../../src/plan/sync.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { RtnlError } from '../../../src/rtnl/errors.js';
import { isExists } from '../../../src/netlink/errors.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import type { Desired } from '../../../src/desired/types.js';

const desired: Desired = { table: new Map(), vips: new Set(), nodePortAddresses: new Set(), sets: [], problems: [] };
const gone = makeVirtualServer({ family: 'IPv4', address: '10.200.1.99', port: 80, scheduler: 'rr' });
const added = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });

function plan(over: Partial<SyncPlan> = {}): SyncPlan {
  return {
    full: false, planned: 2, draining: new Map(),
    ops: [{ kind: 'add-service', vs: added }, { kind: 'delete-service', vs: gone }],
    vips: { link: 'ipvs-op0', ensure: true, add: ['10.200.1.10'], remove: ['10.200.1.99'], version: 1 },
    iptables: { sets: 1, config: defaultProxyConfig, entries: 0 },
    conntrack: [], retry: { now: 0, services: new Map(), drop: [] }, record: { add: [], remove: [] },
    ...over,
  };
}

/** Records the order of calls across the three parts. */
function parts(order: string[], opts: { failAdd?: boolean; failIptables?: boolean } = {}) {
  const ipvs = new FakeIpvs();
  const applyIpvs = ipvs.apply.bind(ipvs);
  ipvs.apply = async (ops) => { order.push('ipvs:start'); const r = await applyIpvs(ops); order.push('ipvs:end'); return r; };
  const vips = new FakeVipLink();
  const addMany = vips.addMany.bind(vips);
  const removeMany = vips.removeMany.bind(vips);
  vips.addMany = async (l, ips) => { order.push(`vip:add ${ips.join(' ')}`); if (opts.failAdd) throw new Error('EPERM'); return addMany(l, ips); };
  vips.removeMany = async (l, ips) => { order.push(`vip:del ${ips.join(' ')}`); return removeMany(l, ips); };
  const iptables: IptablesSync = {
    sync: async () => { order.push('iptables:start'); await new Promise((r) => setTimeout(r, 20)); order.push('iptables:end'); if (opts.failIptables) throw new Error('iptables-restore: exit 4'); },
    cleanup: async () => undefined,
  };
  return { ipvs, vips, iptables };
}

describe('executeSyncPlan', () => {
  it('starts the IPVS batch, the VIP binds and the iptables path at once; unbinds after the batch, without waiting for iptables', async () => {
    const order: string[] = [];
    const deps = parts(order);
    await deps.ipvs.addVirtualServer(gone);
    await deps.vips.ensure('ipvs-op0');
    await deps.vips.add('ipvs-op0', '10.200.1.99');
    order.length = 0;
    const cache = new TableCache();
    await cache.readAll(deps.ipvs);
    const vipsNow = new Set(['10.200.1.99']);
    expect(await executeSyncPlan(plan(), desired, defaultProxyConfig, deps, cache, vipsNow)).toEqual({ ops: [undefined, undefined] });
    // The iptables path starts before the batch ends, and the bind happens while it runs.
    expect(order.indexOf('iptables:start')).toBeLessThan(order.indexOf('ipvs:end'));
    expect(order.indexOf('vip:add 10.200.1.10')).toBeLessThan(order.indexOf('iptables:end'));
    expect(order.indexOf('vip:del 10.200.1.99')).toBeGreaterThan(order.indexOf('ipvs:end'));
    expect(order.indexOf('vip:del 10.200.1.99')).toBeLessThan(order.indexOf('iptables:end'));
    expect([...cache.view.keys()]).toEqual(['TCP 10.200.1.10:80']);
    expect([...vipsNow]).toEqual(['10.200.1.10']);
  });

  it('a failed bind fails the sync, but the ops the kernel accepted are in the cache, nothing is unbound, and iptables is awaited', async () => {
    const order: string[] = [];
    const deps = parts(order, { failAdd: true });
    const cache = new TableCache();
    await expect(executeSyncPlan(plan({ ops: [{ kind: 'add-service', vs: added }] }), desired, defaultProxyConfig, deps, cache, new Set(['10.200.1.99'])))
      .rejects.toThrow('EPERM');
    expect([...cache.view.keys()]).toEqual(['TCP 10.200.1.10:80']);
    expect(order).not.toContain('vip:del 10.200.1.99');
    expect(order).toContain('iptables:end');
  });

  it('binds and unbinds in one batch each; a refused address (EEXIST, EADDRNOTAVAIL) fails the sync, the rest of its batch is applied and recorded', async () => {
    const order: string[] = [];
    const deps = parts(order);
    await deps.vips.ensure('ipvs-op0');
    await deps.vips.addMany('ipvs-op0', ['10.200.1.11', '10.200.1.98']);
    order.length = 0;
    const vipsNow = new Set<string>(['10.200.1.98']);
    const adds = { link: 'ipvs-op0', ensure: false, add: ['10.200.1.10', '10.200.1.11', '10.200.1.12'], remove: [], version: 1 };
    const e = await executeSyncPlan(plan({ ops: [], vips: adds }), desired, defaultProxyConfig, deps, new TableCache(), vipsNow).catch((x: unknown) => x);
    expect(isExists(e)).toBe(true);
    expect(order.filter((o) => o.startsWith('vip:'))).toEqual(['vip:add 10.200.1.10 10.200.1.11 10.200.1.12']);
    expect([...vipsNow].sort()).toEqual(['10.200.1.10', '10.200.1.12', '10.200.1.98']);
    expect((await deps.vips.list('ipvs-op0')).sort()).toEqual(['10.200.1.10', '10.200.1.11', '10.200.1.12', '10.200.1.98']);

    order.length = 0;
    const removes = { link: 'ipvs-op0', ensure: false, add: [], remove: ['10.200.1.98', '10.200.1.97', '10.200.1.12'], version: 2 };
    const e2 = await executeSyncPlan(plan({ ops: [], vips: removes }), desired, defaultProxyConfig, deps, new TableCache(), vipsNow).catch((x: unknown) => x);
    expect(e2).toBeInstanceOf(RtnlError);
    expect((e2 as RtnlError).code).toBe('EADDRNOTAVAIL');
    expect(order.filter((o) => o.startsWith('vip:'))).toEqual(['vip:del 10.200.1.98 10.200.1.97 10.200.1.12']);
    expect([...vipsNow].sort()).toEqual(['10.200.1.10']);
    expect((await deps.vips.list('ipvs-op0')).sort()).toEqual(['10.200.1.10', '10.200.1.11']);
  });

  it('an iptables failure fails the sync after the rest was applied', async () => {
    const order: string[] = [];
    const deps = parts(order, { failIptables: true });
    await deps.vips.ensure('ipvs-op0');
    const cache = new TableCache();
    await expect(executeSyncPlan(plan({ ops: [{ kind: 'add-service', vs: added }], vips: { link: 'ipvs-op0', ensure: true, add: ['10.200.1.10'], remove: [], version: 1 } }),
      desired, defaultProxyConfig, deps, cache, new Set())).rejects.toThrow('exit 4');
    expect(await deps.vips.list('ipvs-op0')).toEqual(['10.200.1.10']);
    expect(deps.ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 rr');
  });
});
