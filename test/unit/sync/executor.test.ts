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
    conntrack: [], holds: [], retry: { now: 0, services: new Map(), drop: [] }, record: { add: [], remove: [] },
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

  it('swaps schedulers first, inside the SYN hold and before the other ops and the iptables step; answers in op order', async () => {
    const order: string[] = [];
    const deps = parts(order);
    await deps.ipvs.addVirtualServer(added);
    const cache = new TableCache();
    await cache.readAll(deps.ipvs);
    order.length = 0;
    const held: string[][] = [];
    deps.iptables.holdSyns = async (members, swap) => {
      held.push(members.map((m) => `${m.address},${m.protocol}:${m.port}`));
      order.push('hold');
      const value = await swap();
      order.push('release');
      return { value };
    };
    const lc = { ...added, scheduler: 'lc' };
    const other = makeVirtualServer({ family: 'IPv4', address: '10.200.1.11', port: 80, scheduler: 'rr' });
    const p = plan({
      ops: [{ kind: 'add-service', vs: other }, { kind: 'update-service', vs: lc }],
      holds: [{ op: 1, member: { family: 'IPv4', address: '10.200.1.10', protocol: 'tcp', port: 80 } }],
      vips: undefined,
    });
    expect(await executeSyncPlan(p, desired, defaultProxyConfig, deps, cache, new Set())).toEqual({ ops: [undefined, undefined] });
    expect(held).toEqual([['10.200.1.10,tcp:80']]);
    expect(order.slice(0, 4)).toEqual(['hold', 'ipvs:start', 'ipvs:end', 'release']);
    expect(order.indexOf('iptables:start')).toBeGreaterThan(order.indexOf('release'));
    expect(cache.view.get('TCP 10.200.1.10:80')?.vs.scheduler).toBe('lc');
    expect(deps.ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 lc\nadd-service TCP 10.200.1.11:80 rr');
  });

  it('a hold that could not be set is reported and the swap applied; a release that failed fails the sync', async () => {
    const deps = parts([]);
    await deps.ipvs.addVirtualServer(added);
    const lc = { ...added, scheduler: 'lc' };
    const p = plan({
      ops: [{ kind: 'update-service', vs: lc }], vips: undefined,
      holds: [{ op: 0, member: { family: 'IPv4', address: '10.200.1.10', protocol: 'tcp', port: 80 } }],
    });
    deps.iptables.holdSyns = async (_m, swap) => ({ value: await swap(), error: new Error('no HOLD set') });
    const r = await executeSyncPlan(p, desired, defaultProxyConfig, deps, new TableCache(), new Set());
    expect({ ops: r.ops, error: String(r.holdError) }).toEqual({ ops: [undefined], error: 'Error: no HOLD set' });
    expect(deps.ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 lc');
    deps.iptables.holdSyns = async (_m, swap) => { await swap(); throw new Error('release refused'); };
    await expect(executeSyncPlan({ ...p, ops: [{ kind: 'update-service', vs: added }] }, desired, defaultProxyConfig,
      deps, new TableCache(), new Set())).rejects.toThrow('release refused');
  });

  it('holds at most 256 swaps at a time', async () => {
    const deps = parts([]);
    const vss = Array.from({ length: 300 }, (_, i) =>
      makeVirtualServer({ family: 'IPv4', address: `10.200.${2 + (i >> 8)}.${i & 255}`, port: 80, scheduler: 'rr' }));
    for (const vs of vss) await deps.ipvs.addVirtualServer(vs);
    const sizes: number[] = [];
    deps.iptables.holdSyns = async (members, swap) => { sizes.push(members.length); return { value: await swap() }; };
    const p = plan({
      ops: vss.map((vs) => ({ kind: 'update-service' as const, vs: { ...vs, scheduler: 'lc' } })), vips: undefined,
      holds: vss.map((vs, op) => ({ op, member: { family: 'IPv4' as const, address: vs.address, protocol: 'tcp' as const, port: 80 } })),
    });
    const r = await executeSyncPlan(p, desired, defaultProxyConfig, deps, new TableCache(), new Set());
    expect({ sizes, answers: r.ops.length, lc: deps.ipvs.dump().split('\n').filter((l) => l.endsWith(' lc')).length })
      .toEqual({ sizes: [256, 44], answers: 300, lc: 300 });
  });
});
