// planSync as a table: each case is an input (desired from API objects, the kernel's table, the
// link's VIPs, what was last applied) and the whole plan in its text form, as kube-proxy's tests
// compare whole restore texts. Address ranges: see fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState } from '../../../src/desired/state.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { type IpvsTable, makeRealServer, makeVirtualServer, realServerKey, virtualServerKey } from '../../../src/model/ipvs.js';
import type { DrainState } from '../../../src/plan/index.js';
import { type SyncInput, formatSyncPlan, planHolds, planSync, planVips } from '../../../src/plan/sync.js';
import { NODE, makeNode, makeService, makeSlice, toIpvsTable } from '../../support/fixtures.js';

const config: ProxyConfig = { ...defaultProxyConfig, gracefulTerminationSeconds: 60 };
const NOW = 1_000_000;

const web = (mutate?: Parameters<typeof makeService>[2]) => makeService('default', 'web', mutate);
const webSlice = (ips: string[], rv = '1') => makeSlice('default', 'web', 'web-1', ips.map((ip) => ({ ip })), (s) => { s.metadata!.resourceVersion = rv; });

/** A DesiredState fed with these objects and synced once. */
function stateOf(objects: { services?: ReturnType<typeof web>[]; slices?: ReturnType<typeof webSlice>[] }, cfg = config) {
  const state = new DesiredState(cfg, new PluginRegistry(), NODE);
  state.setNode(makeNode());
  for (const s of objects.services ?? []) state.setService(s);
  for (const s of objects.slices ?? []) state.setSlice(s);
  const { changed } = state.sync();
  return { state, changed };
}

/** planSync's input for a synced state; every other field can be overridden. */
function input(s: ReturnType<typeof stateOf>, over: Partial<SyncInput> = {}): SyncInput {
  return {
    now: NOW, full: false, changed: s.changed, reread: new Set(), desired: s.state.desired(), versions: { ...s.state.versions },
    config: s.state.currentConfig, actual: new Map(), vipsNow: new Set(), draining: new Map(), applied: {}, ...over,
  };
}

const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
const rs = (ip: string, conns?: number) => makeRealServer({
  address: ip, port: 8080, ...(conns === undefined ? {} : { activeConns: conns, inactiveConns: 0 }),
});
const tableOf = (entries: Array<{ vs: typeof vs; dests: ReturnType<typeof rs>[] }>): IpvsTable =>
  new Map(entries.map((e) => [virtualServerKey(e.vs), { vs: e.vs, dests: new Map(e.dests.map((d) => [realServerKey(d), d])) }]));

describe('planSync', () => {
  it('a new Service: its virtual server, real servers, VIP, then the iptables path', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3', '10.10.1.4'])] });
    expect(formatSyncPlan(planSync(input(s)))).toEqual([
      'add-service TCP 10.200.1.10:80 rr',
      // Node-seeded order (balance/order.ts): this node prefers .3, so .3 is added last and
      // heads the kernel's list.
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080 w=1 masq',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq',
      'add-vip ipvs-op0 10.200.1.10',
      // KUBE-CLUSTER-IP for the VIP, KUBE-LOOP-BACK for each endpoint on this node
      'sync-iptables 3 set entries',
    ]);
  });

  it('a removed Service: its virtual server goes, then its VIP (the VIP of a deleted Service is ours by the link)', () => {
    const s = stateOf({});
    const plan = planSync(input(s, {
      full: true, actual: tableOf([{ vs, dests: [rs('10.10.1.3', 0)] }]), vipsNow: new Set(['10.200.1.10']),
    }));
    expect(formatSyncPlan(plan)).toEqual([
      'delete-service TCP 10.200.1.10:80',
      'del-vip ipvs-op0 10.200.1.10',
      'sync-iptables 0 set entries',
    ]);
  });

  it('a virtual server on an address that is not ours is left alone, even in a full sync', () => {
    const s = stateOf({});
    const foreign = makeVirtualServer({ family: 'IPv4', address: '10.99.0.1', port: 443, scheduler: 'wrr' });
    expect(formatSyncPlan(planSync(input(s, { full: true, actual: tableOf([{ vs: foreign, dests: [] }]), applied: { vips: 0 } }))))
      .toEqual(['sync-iptables 0 set entries']);
  });

  it('a modified Service: a scheduler change is one update-service, its new SYNs held while it runs', () => {
    const before = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3'])] });
    const actual = toIpvsTable(before.state.desired().table);
    const applied = { vips: before.state.versions.vips, iptables: { sets: before.state.versions.sets, config: before.state.currentConfig } };
    before.state.setService(web((x) => {
      x.metadata!.resourceVersion = '2';
      x.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'lc' };
    }));
    const { changed } = before.state.sync();
    expect(formatSyncPlan(planSync(input({ state: before.state, changed }, { actual, vipsNow: new Set(['10.200.1.10']), applied }))))
      .toEqual(['hold-syns 10.200.1.10,tcp:80', 'update-service TCP 10.200.1.10:80 lc']);
  });

  it('an endpoint that goes drains at weight 0 with a deadline, and is deleted when the grace period ends', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3'])] });
    const actual = tableOf([{ vs, dests: [rs('10.10.1.3', 0), rs('10.10.1.4', 2)] }]);
    const applied = { vips: s.state.versions.vips, iptables: { sets: s.state.versions.sets, config: s.state.currentConfig } };
    const first = planSync(input(s, { changed: new Set([virtualServerKey(vs)]), actual, vipsNow: new Set(['10.200.1.10']), applied }));
    expect(formatSyncPlan(first)).toEqual(['update-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080 w=0 masq']);
    expect(first.nextDeadline).toBe(NOW + 60_000);
    // Nothing changed since: the draining key alone is planned again, at the deadline.
    const later = planSync(input(s, {
      now: NOW + 60_000, changed: new Set(), actual, vipsNow: new Set(['10.200.1.10']), applied, draining: first.draining as DrainState,
    }));
    expect(formatSyncPlan(later)).toEqual(['delete-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080']);
    expect(later.planned).toBe(1);
    expect(later.nextDeadline).toBeUndefined();
  });

  it('iptables gating: an incremental sync runs the iptables path only when the set entries or the config changed', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3'])] });
    const actual = toIpvsTable(s.state.desired().table);
    const same = { vips: s.state.versions.vips, iptables: { sets: s.state.versions.sets, config: s.state.currentConfig } };
    const base = { actual, vipsNow: new Set(['10.200.1.10']), changed: new Set<string>() };
    expect(formatSyncPlan(planSync(input(s, { ...base, applied: same })))).toEqual([]);
    expect(planSync(input(s, { ...base, applied: same })).iptables).toBeUndefined();
    expect(formatSyncPlan(planSync(input(s, { ...base, applied: { ...same, iptables: { ...same.iptables, sets: same.iptables.sets - 1 } } }))))
      .toEqual(['sync-iptables 2 set entries']);
    expect(formatSyncPlan(planSync(input(s, { ...base, applied: { ...same, iptables: { ...same.iptables, config: { ...config } } } }))))
      .toEqual(['sync-iptables 2 set entries']);
  });

  it('a config change (new default scheduler) re-plans every Service with it', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3'])] });
    const actual = toIpvsTable(s.state.desired().table);
    s.state.setConfig({ ...config, defaultScheduler: 'sed' });
    const { changed } = s.state.sync();
    expect(formatSyncPlan(planSync(input({ state: s.state, changed }, { full: true, actual, vipsNow: new Set(['10.200.1.10']) }))))
      .toEqual(['hold-syns 10.200.1.10,tcp:80', 'update-service TCP 10.200.1.10:80 sed', 'sync-iptables 2 set entries']);
  });

  it('a restart on a programmed kernel: no IPVS op, no VIP change; the iptables path is re-asserted (idempotent)', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3', '10.10.1.4'])] });
    const plan = planSync(input(s, { full: true, actual: toIpvsTable(s.state.desired().table), vipsNow: new Set(['10.200.1.10']) }));
    expect(plan.ops).toEqual([]);
    expect(plan.vips).toMatchObject({ add: [], remove: [] });
    expect(formatSyncPlan(plan)).toEqual(['sync-iptables 3 set entries']);
  });

  it('a retry due: the key is planned again in an incremental sync without any desired change', () => {
    const s = stateOf({ services: [web()], slices: [webSlice(['10.10.1.3'])] });
    const applied = { vips: s.state.versions.vips, iptables: { sets: s.state.versions.sets, config: s.state.currentConfig } };
    const plan = planSync(input(s, { changed: new Set(), reread: new Set([virtualServerKey(vs)]), vipsNow: new Set(['10.200.1.10']), applied }));
    expect(formatSyncPlan(plan)).toEqual([
      'add-service TCP 10.200.1.10:80 rr',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq',
    ]);
  });

  it('the whole decision: a UDP endpoint removed is a delete, a conntrack filter tied to it, the retry policy and the record delta', () => {
    const dns = makeService('default', 'dns', (x) => {
      x.spec!.ports = [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 as unknown as never }];
    });
    const dnsSlice = (ips: string[], rv: string) => makeSlice('default', 'dns', 'dns-1', ips.map((ip) => ({ ip })), (x) => {
      x.ports = [{ name: 'dns', port: 53, protocol: 'UDP' }];
      x.metadata!.resourceVersion = rv;
    });
    const before = stateOf({ services: [dns], slices: [dnsSlice(['10.10.1.3', '10.10.1.4'], '1')] });
    const actual = toIpvsTable(before.state.desired().table);
    const applied = { vips: before.state.versions.vips, iptables: { sets: before.state.versions.sets, config: before.state.currentConfig } };
    before.state.setSlice(dnsSlice(['10.10.1.3'], '2'));
    const { changed } = before.state.sync();
    const key = 'UDP 10.200.1.10:53';
    const retries = new Map([[key, { attempts: 1, retryAt: NOW, service: 'default/dns', error: 'x' }], ['UDP 10.200.1.99:53', { attempts: 2, retryAt: NOW, service: '', error: 'y' }]]);
    const plan = planSync(input({ state: before.state, changed }, {
      actual, vipsNow: new Set(['10.200.1.10']), applied: { ...applied, iptables: { ...applied.iptables, sets: before.state.versions.sets } },
      recorded: new Set([key]), retries,
    }));
    expect(formatSyncPlan(plan)).toEqual([
      'delete-dest UDP 10.200.1.10:53 -> 10.10.1.4:53',
      'del-conntrack UDP 10.200.1.10:53 keep 10.10.1.3:53',
    ]);
    expect(plan.conntrack.map((f) => f.after)).toEqual([[0]]);
    // A refusal of its op is default/dns's Problem; the retry entry nobody wants and the kernel lacks goes.
    expect(plan.retry).toEqual({ now: NOW, services: new Map([[key, 'default/dns']]), drop: ['UDP 10.200.1.99:53'] });
    // No virtual server created or deleted: the record stays as it is.
    expect(plan.record).toEqual({ add: [], remove: [] });
  });
});

describe('planVips', () => {
  const plan = (want: string[], have: string[]) => {
    const p = planVips(new Set(want), new Set(have), 'ipvs-op0', 7);
    return { add: p.add, remove: p.remove, ensure: p.ensure };
  };
  it('binds what is missing and unbinds what is extra, each sorted', () => {
    expect(plan(['10.0.0.9', '10.0.0.1', '10.0.0.5'], ['10.0.0.5', '10.0.0.8', '10.0.0.2']))
      .toEqual({ add: ['10.0.0.1', '10.0.0.9'], remove: ['10.0.0.2', '10.0.0.8'], ensure: true });
  });
  it('finds extras however the sizes compare', () => {
    // Equal sizes with a difference, a superset on the link, a subset on the link.
    expect(plan(['10.0.0.1', '10.0.0.2'], ['10.0.0.2', '10.0.0.3'])).toMatchObject({ add: ['10.0.0.1'], remove: ['10.0.0.3'] });
    expect(plan(['10.0.0.1'], ['10.0.0.1', 'fd00::1'])).toMatchObject({ add: [], remove: ['fd00::1'] });
    expect(plan(['10.0.0.1', 'fd00::1'], ['10.0.0.1'])).toMatchObject({ add: ['fd00::1'], remove: [] });
  });
  it('plans nothing when the link holds exactly the VIPs, and ensures no link for none', () => {
    expect(plan(['10.0.0.1', '10.0.0.2'], ['10.0.0.2', '10.0.0.1'])).toEqual({ add: [], remove: [], ensure: true });
    expect(plan([], [])).toEqual({ add: [], remove: [], ensure: false });
  });
});

describe('planHolds', () => {
  const table = (...vss: ReturnType<typeof makeVirtualServer>[]): IpvsTable =>
    new Map(vss.map((v) => [virtualServerKey(v), { vs: v, dests: new Map() }]));
  const rr = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
  const udp = makeVirtualServer({ family: 'IPv4', protocol: 'UDP', address: '10.200.1.10', port: 53, scheduler: 'rr' });
  const v6 = makeVirtualServer({ family: 'IPv6', address: 'fd00::10', port: 443, scheduler: 'rr' });
  const fwm = makeVirtualServer({ family: 'IPv4', fwmark: 7, scheduler: 'rr' });
  it('holds a TCP virtual server whose scheduler changes, by op id, in either family', () => {
    const ops = [
      { kind: 'add-dest' as const, vs: rr, rs: rs('10.10.1.3') },
      { kind: 'update-service' as const, vs: { ...rr, scheduler: 'lc' } },
      { kind: 'update-service' as const, vs: { ...v6, scheduler: 'sed' } },
    ];
    expect(planHolds(ops, table(rr, v6))).toEqual([
      { op: 1, member: { family: 'IPv4', address: '10.200.1.10', protocol: 'tcp', port: 80 } },
      { op: 2, member: { family: 'IPv6', address: 'fd00::10', protocol: 'tcp', port: 443 } },
    ]);
  });
  it('holds nothing for an edit that keeps the scheduler, for UDP, for a firewall mark, or for a new one', () => {
    const ops = [
      { kind: 'update-service' as const, vs: { ...rr, flags: 1, timeout: 300, netmask: 0xffffffff } },
      { kind: 'update-service' as const, vs: { ...udp, scheduler: 'lc' } },
      { kind: 'update-service' as const, vs: { ...fwm, scheduler: 'lc' } },
      { kind: 'add-service' as const, vs: { ...v6, scheduler: 'lc' } },
    ];
    expect(planHolds(ops, table(rr, udp, fwm))).toEqual([]);
  });
});
