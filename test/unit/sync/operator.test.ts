// The sync loop against FakeIpvs and FakeVipLink (kernel semantics in memory). The real kernel
// scenarios are in test/kernel/operator.test.ts; these pin the loop's own logic.
// Address ranges: see test/support/fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { IptablesRestore } from '../../../src/iptables/restore.js';
import { FakeHost } from '../../support/iptables-fake.js';
import type { Runner } from '../../../src/iptables/exec.js';
import { memoryLog } from '../../../src/util/log.js';
import { Operator, type OperatorDeps } from '../../../src/sync/operator.js';
import { ClusterWeights } from '../../../src/balance/cluster-view.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { MemoryOwnershipRecord } from '../../../src/sync/record.js';
import type { EventSink, NodeStatus, StatusSink } from '../../../src/source/types.js';
import type { Problem } from '../../../src/desired/types.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';
import { waitFor } from '../../support/wait.js';

const config: ProxyConfig = { ...defaultProxyConfig, interfaceName: 'ipvs-op0' };

/** A clock the test moves by hand; timers never fire on their own (the test calls sync). */
function manualClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, setTimeout: (_fn: () => void, _ms: number): unknown => ({}), clearTimeout: () => undefined, advance: (ms: number) => { t += ms; } };
}

function setup(ipvs = new FakeIpvs(), vips = new FakeVipLink(), clock = manualClock(), extra: Partial<OperatorDeps> = {}) {
  const posted: Problem[][] = [];
  const statuses: NodeStatus[] = [];
  const events: EventSink = { report: async (p) => { posted.push([...p]); } };
  const status: StatusSink = { write: async (s) => { statuses.push(s); } };
  const log = memoryLog();
  const op = new Operator(config, {
    ipvs, vips, iptables: new NoIptables(), events, status, log, registry: new PluginRegistry(), nodeName: NODE, clock,
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr', 'lc', 'sed', 'sh', 'mh']) },
    ...extra,
  });
  return { op, ipvs, vips, posted, statuses, log, clock };
}

const web = (mutate?: Parameters<typeof makeService>[2]) => makeService('default', 'web', mutate);
const slice = (ips: string[], rv = '1') => makeSlice('default', 'web', 'web-1', ips.map((ip) => ({ ip })), (s) => { s.metadata!.resourceVersion = rv; });

describe('Operator.sync', () => {
  it('programs a Service, binds its VIP, and a restart plans nothing', async () => {
    const { op, ipvs, vips, log } = setup();
    op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    await op.sync();
    expect(ipvs.dump()).toBe([
      'add-service TCP 10.200.1.10:80 rr',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080 w=1 masq',
    ].join('\n'));
    expect(await vips.list('ipvs-op0')).toEqual(['10.200.1.10']);
    // The plan, logged at debug level in the form of the fake's dump and --dry-run (real servers
    // in this node's add order, balance/order.ts).
    expect(log.entries.filter((l) => l.message === 'sync plan').map((l) => l.fields)).toEqual([{ ops: 3, changes: [
      'add-service TCP 10.200.1.10:80 rr',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080 w=1 masq',
      'add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq',
      'add-vip ipvs-op0 10.200.1.10',
      'sync-iptables 3 set entries',
    ] }]);

    const fullRead = (l: typeof log) => l.entries.filter((e) => e.message === 'read the whole IPVS table').map((e) => e.fields);
    expect(fullRead(log)).toEqual([{ virtualServers: 0, realServers: 0, realServersFrom: 'none: no virtual server', listed: 0, dumped: 0 }]);

    // A new operator on the same kernel: it reads the table and changes nothing.
    const again = setup(ipvs, vips);
    again.op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    again.op.handle({ kind: 'service', type: 'upsert', object: web() });
    again.op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    const before = ipvs.applied.length;
    await again.op.sync();
    expect(ipvs.applied.length).toBe(before);
    expect(again.op.last).toMatchObject({ ops: 0, failed: 0, full: true });
    // Its plan: no IPVS op, no VIP; the iptables path is applied once per process.
    expect(again.log.entries.filter((l) => l.message === 'sync plan').map((l) => l.fields)).toEqual([{ ops: 0, changes: ['sync-iptables 3 set entries'] }]);
    expect(fullRead(again.log)).toEqual([{ virtualServers: 1, realServers: 2, realServersFrom: '/proc/net/ip_vs and GET_DEST dumps', listed: 1, dumped: 0 }]);
  });

  it('one endpoint change is one op, planned incrementally', async () => {
    const { op, ipvs } = setup();
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    const before = ipvs.applied.length;
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.5'], '2') });
    await op.sync();
    expect(ipvs.applied.slice(before)).toEqual(['add-dest TCP 10.200.1.10:80 -> 10.10.1.5:8080 w=1 masq']);
    expect(op.last).toMatchObject({ ops: 1, full: false });
  });

  it('drains a real server by the kernel\'s counters now, not by those of the table read at start', async () => {
    // A restarted operator reads the table while no traffic runs (counters 0); connections come;
    // then the endpoint goes: it must drain (weight 0), not delete the real server and its flows.
    const ipvs = new FakeIpvs();
    const first = setup(ipvs);
    first.op.handle({ kind: 'service', type: 'upsert', object: web() });
    first.op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    await first.op.sync();
    const { op } = setup(ipvs);
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    await op.sync();
    expect(op.last).toMatchObject({ ops: 0, full: true });
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80 });
    expect(ipvs.setConnections(vs, { address: '10.10.1.3', port: 8080 }, 0, 5)).toBe(true);
    const before = ipvs.applied.length;
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.4'], '2') });
    await op.sync();
    expect(ipvs.applied.slice(before)).toEqual(['update-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=0 masq']);
    // Its connections gone, the next sync deletes it.
    ipvs.setConnections(vs, { address: '10.10.1.3', port: 8080 }, 0, 0);
    await op.sync();
    expect(ipvs.applied.slice(before + 1)).toEqual(['delete-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080']);
  });

  it('never touches a foreign virtual server, across many syncs', async () => {
    const ipvs = new FakeIpvs();
    const foreign = makeVirtualServer({ family: 'IPv4', address: '10.99.0.1', port: 443, scheduler: 'wrr' });
    await ipvs.addVirtualServer(foreign);
    await ipvs.addRealServer(foreign, makeRealServer({ address: '10.99.1.1', port: 443 }));
    const { op } = setup(ipvs);
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    for (let i = 0; i < 20; i++) await op.sync({ periodic: i % 2 === 0, retry: false });
    expect(ipvs.dump()).toContain('add-service TCP 10.99.0.1:443 wrr\nadd-dest TCP 10.99.0.1:443 -> 10.99.1.1:443 w=1 masq');
  });

  it('a deleted Service loses its virtual server and its VIP', async () => {
    const { op, ipvs, vips } = setup();
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    await op.sync();
    op.handle({ kind: 'service', type: 'delete', object: web() });
    await op.sync();
    expect(ipvs.dump()).toBe('');
    expect(await vips.list('ipvs-op0')).toEqual([]);
  });

  it('a bad annotation: default scheduler in the kernel and a problem reported', async () => {
    const { op, ipvs, posted } = setup();
    op.handle({ kind: 'service', type: 'upsert', object: web((s) => { s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'nosuch' }; }) });
    await op.sync();
    expect(ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 rr');
    expect(posted.at(-1)).toEqual([expect.objectContaining({ service: 'default/web', reason: 'UnknownScheduler' })]);
  });

  it('a refused op is its Service\'s problem: the sync succeeds, the virtual server is re-read and retried after a backoff', async () => {
    const ipvs = new CountingIpvs();
    const { op, posted, clock } = setup(ipvs);
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'other', (s) => { s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11']; }) });
    await op.sync();
    // Someone deletes our service behind our back; the next incremental sync adds a dest to it.
    await ipvs.deleteVirtualServer(makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80 }));
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    expect(op.last).toMatchObject({ ops: 1, failed: 1, full: false });
    expect(op.last!.error).toBeUndefined();
    expect(op.problems()).toEqual([expect.objectContaining({ service: 'default/web', reason: 'IPVSOpRefused' })]);
    expect(posted.at(-1)).toEqual([expect.objectContaining({ service: 'default/web', reason: 'IPVSOpRefused' })]);
    // Another Service keeps syncing meanwhile; the refused one is not retried before its backoff.
    const before = ipvs.applied.length;
    op.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', 'other', 'other-1', [{ ip: '10.10.1.7' }]) });
    await op.sync();
    expect(ipvs.applied.slice(before)).toEqual(['add-dest TCP 10.200.1.11:80 -> 10.10.1.7:8080 w=1 masq']);
    // Once the backoff ended, an incremental sync re-reads that virtual server (looked up by its
    // key, not a dump of them all) and repairs it.
    clock.advance(1000);
    ipvs.serviceDumps = 0;
    await op.sync();
    expect([ipvs.serviceDumps, ipvs.serviceGets]).toEqual([0, 1]);
    expect(op.last).toMatchObject({ failed: 0, full: false });
    expect(ipvs.dump()).toContain('add-service TCP 10.200.1.10:80 rr\nadd-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq');
    expect(op.problems()).toEqual([]);
  });

  it('writes the node status after each sync', async () => {
    const { op, statuses } = setup();
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    await op.sync();
    expect(statuses.at(-1)).toMatchObject({ kernelIPVSVersion: '1.2.1', virtualServers: 1, lastError: '', problems: 0, consecutiveFailedSyncs: 0, healthy: true, healthReason: '' });
  });
});

/** FakeIpvs that counts the dumps a sync makes. */
class CountingIpvs extends FakeIpvs {
  serviceDumps = 0;
  destDumps = 0;
  serviceGets = 0;
  /** Called on each real-server dump and each dump of the virtual servers (e.g. to move a test clock: their cost). */
  constructor(private readonly onDestDump: () => void = () => undefined, private readonly onServiceDump: () => void = () => undefined) {
    super();
  }
  override async listVirtualServers() {
    this.serviceDumps++;
    this.onServiceDump();
    return super.listVirtualServers();
  }
  override async getVirtualServers(vss: Parameters<FakeIpvs['getVirtualServers']>[0]) {
    this.serviceGets += vss.length;
    return super.getVirtualServers(vss);
  }
  override async listRealServers(vs: Parameters<FakeIpvs['listRealServers']>[0]) {
    this.destDumps++;
    this.onDestDump();
    return super.listRealServers(vs);
  }
  override async listRealServersMany(vss: Parameters<FakeIpvs['listRealServersMany']>[0]) {
    const out = [];
    for (const vs of vss) out.push(...(await super.listRealServersMany([vs]).then((r) => { this.destDumps++; this.onDestDump(); return r; })));
    return out;
  }
}

/** An Operator with the iptables path on `host` (FakeHost), after its first sync of web -> 10.10.1.3. */
async function syncedWithIptables(
  host: FakeHost, ipvs: FakeIpvs, log: ReturnType<typeof memoryLog>, run: Runner = host.run, vips = new FakeVipLink(),
): Promise<Operator> {
  const op = new Operator(config, {
    ipvs, vips, iptables: new IptablesRestore({ run }),
    events: { report: async () => undefined }, status: { write: async () => undefined }, log,
    registry: new PluginRegistry(), nodeName: NODE, clock: manualClock(),
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
  });
  op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
  op.handle({ kind: 'service', type: 'upsert', object: web() });
  op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
  await op.sync();
  return op;
}

describe('the periodic drift check', () => {
  const services = 30;
  const svc = (i: number) => makeService('default', `s${i}`, (s) => { s.spec!.clusterIP = `10.200.2.${i}`; s.spec!.clusterIPs = [`10.200.2.${i}`]; });
  const sl = (i: number) => makeSlice('default', `s${i}`, `s${i}-1`, [{ ip: '10.10.1.3' }, { ip: '10.10.1.4' }]);
  /** An Operator over `ipvs` on `clock`, after its first sync of the 30 Services. */
  async function synced(ipvs: CountingIpvs, clock: ReturnType<typeof manualClock>): Promise<Operator> {
    const { op } = setup(ipvs, undefined, clock);
    for (let i = 1; i <= services; i++) {
      op.handle({ kind: 'service', type: 'upsert', object: svc(i) });
      op.handle({ kind: 'endpointslice', type: 'upsert', object: sl(i) });
    }
    await op.sync();
    return op;
  }

  it('reads one dump of the virtual servers, then real servers in turn for a tenth of syncPeriod, and repairs drift', async () => {
    // Each real-server dump costs 1 s on the test's clock; syncPeriod is 30 s: a budget of 3 s,
    // so 3 virtual servers' real servers per check (the check stops once the budget is spent).
    const clock = manualClock();
    const ipvs = new CountingIpvs(() => clock.advance(1000));
    const { op } = setup(ipvs, undefined, clock);
    expect(config.syncPeriod).toBe(30);
    for (let i = 1; i <= services; i++) {
      op.handle({ kind: 'service', type: 'upsert', object: svc(i) });
      op.handle({ kind: 'endpointslice', type: 'upsert', object: sl(i) });
    }
    await op.sync();
    // Drift behind the operator's back: a changed scheduler (seen in the one dump) and a real
    // server deleted (seen when its virtual server's turn comes).
    await ipvs.updateVirtualServer(makeVirtualServer({ family: 'IPv4', address: '10.200.2.7', port: 80, scheduler: 'wrr' }));
    await ipvs.deleteRealServer(makeVirtualServer({ family: 'IPv4', address: '10.200.2.20', port: 80 }), makeRealServer({ address: '10.10.1.4', port: 8080 }));
    ipvs.serviceDumps = 0;
    ipvs.destDumps = 0;
    await op.sync({ periodic: true, retry: false });
    expect(op.last).toMatchObject({ full: false });
    expect(ipvs.serviceDumps).toBe(1);
    // The changed one (1 s), then 2 in turn: the check's 3 s (a tenth of the 30 s period) are spent.
    expect(ipvs.destDumps).toBe(3);
    expect(ipvs.dump()).toContain('add-service TCP 10.200.2.7:80 rr');
    for (let p = 1; p < 10; p++) await op.sync({ periodic: true, retry: false });
    expect(ipvs.dump()).toContain('add-dest TCP 10.200.2.20:80 -> 10.10.1.4:8080 w=1 masq');
    // Nothing changed any more: 3 in turn per check; 2 + 9 x 3 cover all 30 (with the changed one).
    expect(ipvs.destDumps).toBe(3 + 9 * 3);
  });

  it('starts no read in turn that would end past the budget', async () => {
    // Each real-server dump costs 1.2 s: after two (2.4 s) a third would end at 3.6 s, past the
    // 3 s budget, so the check stops at two.
    const clock = manualClock();
    const ipvs = new CountingIpvs(() => clock.advance(1200));
    const op = await synced(ipvs, clock);
    for (let p = 0; p < 3; p++) {
      ipvs.destDumps = 0;
      const t = clock.now();
      await op.sync({ periodic: true, retry: false });
      expect(ipvs.destDumps).toBe(2);
      expect(clock.now() - t).toBe(2400);
    }
  });
  it('keeps the whole check to the budget: what the last periodic sync spent after its read comes off the real servers\' share', async () => {
    const clock = manualClock();
    const ipvs = new CountingIpvs(() => clock.advance(1000));
    const iptables = { sync: async () => undefined, cleanup: async () => undefined, drift: async () => undefined };
    // What the sync spends after its read: 1 s (here the after-sync step; the iptables check runs beside the read).
    const afterSync = async () => { clock.advance(1000); return []; };
    const op = new Operator(config, {
      ipvs, vips: new FakeVipLink(), iptables, afterSync, events: { report: async () => undefined }, status: { write: async () => undefined },
      log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, clock,
      kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
    });
    for (let i = 1; i <= services; i++) {
      op.handle({ kind: 'service', type: 'upsert', object: svc(i) });
      op.handle({ kind: 'endpointslice', type: 'upsert', object: sl(i) });
    }
    await op.sync();
    const dumps: number[] = [];
    for (let p = 0; p < 2; p++) {
      ipvs.destDumps = 0;
      const t = clock.now();
      await op.sync({ periodic: true, retry: false });
      dumps.push(ipvs.destDumps);
      expect(clock.now() - t).toBeLessThanOrEqual(p === 0 ? 4000 : 3000);
    }
    // First check: 3 s of real servers, then the 1 s after the read (not known yet); from then on
    // 2 s of real servers + 1 s after: 3 s, a tenth of the 30 s period.
    expect(dumps).toEqual([3, 2]);
  });

  it('looks the virtual servers up in turn once their dump is past half the budget, and still repairs drift', async () => {
    // The dump of the 30 virtual servers costs 2 s on the test's clock, more than half of the 3 s
    // budget. The first check dumps them (the first sync's dump found none: no cost per virtual
    // server known); from then on the checks look each up with its real servers (1 s each), 3 per
    // check, and never dump them all.
    const clock = manualClock();
    const ipvs = new CountingIpvs(() => clock.advance(1000), () => clock.advance(2000));
    const op = await synced(ipvs, clock);
    ipvs.serviceDumps = 0;
    await op.sync({ periodic: true, retry: false });
    expect([ipvs.serviceDumps, ipvs.serviceGets]).toEqual([1, 0]);
    // Drift: a changed scheduler, a virtual server deleted with its real servers (last in the
    // copy's order, so each check before its turn reads 3), a real server deleted.
    await ipvs.updateVirtualServer(makeVirtualServer({ family: 'IPv4', address: '10.200.2.7', port: 80, scheduler: 'wrr' }));
    await ipvs.deleteVirtualServer(makeVirtualServer({ family: 'IPv4', address: '10.200.2.9', port: 80 }));
    await ipvs.deleteRealServer(makeVirtualServer({ family: 'IPv4', address: '10.200.2.20', port: 80 }), makeRealServer({ address: '10.10.1.4', port: 8080 }));
    const drifted = ipvs.dump();
    ipvs.serviceDumps = 0;
    ipvs.destDumps = 0;
    ipvs.serviceGets = 0;
    const t = clock.now();
    await op.sync({ periodic: true, retry: false });
    expect(clock.now() - t).toBeLessThanOrEqual(3000);
    expect([ipvs.serviceDumps, ipvs.serviceGets, ipvs.destDumps]).toEqual([0, 3, 3]);
    expect(op.last).toMatchObject({ full: false });
    for (let p = 1; p < 10; p++) {
      const t = clock.now();
      await op.sync({ periodic: true, retry: false });
      expect(clock.now() - t).toBeLessThanOrEqual(3000);
    }
    // 10 checks of 3 looked up at least (the missing one has no real servers to dump: cheaper).
    expect(ipvs.serviceDumps).toBe(0);
    expect(ipvs.serviceGets).toBeGreaterThanOrEqual(30);
    expect(drifted).toContain('add-service TCP 10.200.2.7:80 wrr');
    expect(drifted).not.toContain('add-service TCP 10.200.2.9:80');
    const repaired = ipvs.dump();
    expect(repaired).toContain('add-service TCP 10.200.2.7:80 rr');
    expect(repaired).toContain('add-dest TCP 10.200.2.9:80 -> 10.10.1.3:8080 w=1 masq');
    expect(repaired).toContain('add-dest TCP 10.200.2.20:80 -> 10.10.1.4:8080 w=1 masq');
    // Ten checks covered the 30: the table is whole again, and the next check starts over.
    for (let i = 1; i <= services; i++) expect(repaired).toContain(`add-dest TCP 10.200.2.${i}:80 -> 10.10.1.4:8080`);
  });

  it('dumps the virtual servers again once the table is small enough for the budget', async () => {
    const clock = manualClock();
    const ipvs = new CountingIpvs(() => clock.advance(1000), () => clock.advance(2000));
    const op = await synced(ipvs, clock);
    await op.sync({ periodic: true, retry: false });
    await op.sync({ periodic: true, retry: false });
    // The first sync's (none listed) and the first check's (2 s for 30: past half the budget).
    expect([ipvs.serviceDumps, ipvs.serviceGets]).toEqual([2, 3]);
    // 20 Services go: 10 left, an estimated dump of 10 x 2000/30 ms, under half the budget.
    for (let i = 11; i <= services; i++) op.handle({ kind: 'service', type: 'delete', object: svc(i) });
    await op.sync();
    ipvs.serviceDumps = 0;
    ipvs.serviceGets = 0;
    await op.sync({ periodic: true, retry: false });
    expect([ipvs.serviceDumps, ipvs.serviceGets]).toEqual([1, 0]);
  });

  it('reads in turn in batches of about 20 ms each, so a change waits for at most one of them', async () => {
    // 5 ms per real-server dump: after the first batch (one), batches of 4 (20 ms).
    const clock = manualClock();
    const batches: number[] = [];
    class Batches extends CountingIpvs {
      override async listRealServersMany(vss: Parameters<FakeIpvs['listRealServersMany']>[0]) {
        batches.push(vss.length);
        return super.listRealServersMany(vss);
      }
    }
    const ipvs = new Batches(() => clock.advance(5));
    const op = await synced(ipvs, clock);
    batches.length = 0;
    ipvs.destDumps = 0;
    await op.sync({ periodic: true, retry: false });
    // All 30 fit in the 3 s budget: 1 + 7 x 4 + 1.
    expect(batches).toEqual([1, 4, 4, 4, 4, 4, 4, 4, 1]);
    expect(ipvs.destDumps).toBe(services);
  });

  it('stops reading in turn as soon as a change waits, and the next check goes on where it stopped', async () => {
    const clock = manualClock();
    let afterDumps: { n: number; fire: () => void } | undefined;
    const ipvs = new CountingIpvs(() => {
      clock.advance(1000);
      if (afterDumps && --afterDumps.n === 0) { afterDumps.fire(); afterDumps = undefined; }
    });
    const op = await synced(ipvs, clock);
    ipvs.serviceDumps = 0;
    ipvs.destDumps = 0;
    // An endpoint change arrives while the first real-server dump of the check runs: the check
    // reads no further (it would read 3 in the 3 s budget), and the change is planned next sync.
    afterDumps = { n: 1, fire: () => op.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', 's5', 's5-1', [{ ip: '10.10.1.3' }], (x) => { x.metadata!.resourceVersion = '2'; }) }) };
    await op.sync({ periodic: true, retry: false });
    expect([ipvs.serviceDumps, ipvs.destDumps]).toEqual([1, 1]);
    await op.sync();
    expect(op.last).toMatchObject({ ops: 1, full: false });
    // Undisturbed, the next check reads its 3 from the virtual server after the last one read.
    ipvs.destDumps = 0;
    await op.sync({ periodic: true, retry: false });
    expect(ipvs.destDumps).toBe(3);
  });
});

describe('the kernel\'s listing opened ahead of a full read', () => {
  class Counted extends FakeIpvs {
    calls: string[] = [];
    override async listing() {
      this.calls.push('listing');
      const inner = (await super.listing())!;
      return { next: () => inner.next(), close: async () => { this.calls.push('close'); await inner.close(); } };
    }
    override async listVirtualServers() { this.calls.push('dump'); return super.listVirtualServers(); }
  }

  it('is opened once per full sync, before the dumps, and read by it; a sync that is not full opens none', async () => {
    const ipvs = new Counted();
    const first = setup(ipvs);
    first.op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    first.op.handle({ kind: 'service', type: 'upsert', object: web() });
    first.op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    await first.op.sync();
    const again = setup(ipvs); // a restart over the programmed table
    again.op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    again.op.handle({ kind: 'service', type: 'upsert', object: web() });
    again.op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    ipvs.calls.length = 0;
    await again.op.sync();
    expect(again.op.last).toMatchObject({ full: true, ops: 0 });
    expect([...new Set(ipvs.calls)]).toEqual(['listing', 'dump', 'close']); // closing twice is harmless
    expect(ipvs.calls.filter((c) => c === 'listing')).toHaveLength(1);
    const read = again.log.entries.find((l) => l.message === 'read the whole IPVS table');
    expect(read?.fields).toMatchObject({ listed: 1, dumped: 0 });
    ipvs.calls.length = 0;
    again.op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3'], '2') });
    await again.op.sync();
    expect([again.op.last?.full, ipvs.calls]).toEqual([false, []]);
  });

  it('one opened by a sync that failed before its read is closed by the next full sync', async () => {
    const ipvs = new Counted();
    let loads = 0;
    const record = new MemoryOwnershipRecord();
    const failingOnce = Object.assign(Object.create(record) as MemoryOwnershipRecord, {
      load: async () => { if (++loads === 1) throw new Error('the record is unreadable'); return record.load(); },
    });
    const { op } = setup(ipvs, undefined, undefined, { record: failingOnce });
    op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    await expect(op.sync()).rejects.toThrow('the record is unreadable');
    expect(ipvs.calls).toEqual(['listing']);
    await op.sync({ periodic: false, retry: true });
    await waitFor(() => ipvs.calls.filter((c) => c === 'close').length === 2, 'both listings to be closed');
    expect(ipvs.calls.filter((c) => c === 'listing')).toHaveLength(2);
    expect(op.last).toMatchObject({ full: true, failed: 0 });
  });
});

describe('the VIP link readied for a full sync\'s binds', () => {
  it('is told how many VIPs a full sync wants, before its read; a sync that is not full tells it nothing', async () => {
    const order: string[] = [];
    class Told extends FakeVipLink {
      override prepare(count: number): void { order.push(`prepare ${count}`); }
      override async list(name: string): Promise<string[]> { order.push('list'); return super.list(name); }
    }
    const { op } = setup(undefined, new Told());
    op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'api', (s) => { s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11']; }) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    expect(order[0]).toBe('prepare 2');
    expect(order.filter((o) => o.startsWith('prepare'))).toEqual(['prepare 2']);
    order.length = 0;
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4'], '2') });
    await op.sync();
    expect(op.last?.full).toBe(false);
    expect(order.filter((o) => o.startsWith('prepare'))).toEqual([]);
  });
});

describe('a configuration change during a sync', () => {
  it('makes the next sync full: the request is not cleared by the sync it arrived under', async () => {
    // A kernel that lets the test deliver an event in the middle of a sync, as the source can.
    class SlowRead extends FakeIpvs {
      during: (() => void) | undefined;
      override async listVirtualServers() { this.step(); return super.listVirtualServers(); }
      override async listRealServers(vs: Parameters<FakeIpvs['listRealServers']>[0]) { this.step(); return super.listRealServers(vs); }
      override async apply(ops: Parameters<FakeIpvs['apply']>[0]) { this.step(); return super.apply(ops); }
      private step() { this.during?.(); this.during = undefined; }
    }
    const { op, ipvs, log } = setup(new SlowRead());
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    await op.sync();
    expect(op.last).toMatchObject({ full: false });
    (ipvs as SlowRead).during = () => op.handle({ kind: 'config', type: 'upsert', config: { ...config, defaultScheduler: 'lc' } });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4'], '2') });
    await op.sync();
    expect(log.entries.some((l) => l.message === 'configuration changed; full resync')).toBe(true);
    await op.sync();
    expect(op.last).toMatchObject({ full: true, failed: 0 });
    expect(ipvs.dump().split('\n')[0]).toMatch(/ lc$/);
  });
});

describe('ip_vs loaded again under the operator', () => {
  it('a new kernelGeneration makes the next sync full (the table is empty whatever the cache says), once onKernelReset ran', async () => {
    const ipvs = new FakeIpvs();
    let generation: number | undefined = 31;
    const resets: string[] = [];
    const log = memoryLog();
    const op = new Operator(config, {
      ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined }, status: { write: async () => undefined },
      log, registry: new PluginRegistry(), nodeName: NODE, clock: manualClock(),
      kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
      kernelGeneration: () => generation,
      onKernelReset: async () => { resets.push(ipvs.dump()); },
    });
    op.handle({ kind: 'service', type: 'upsert', object: web() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    await op.sync({ periodic: false, retry: false });
    expect(op.last).toMatchObject({ ops: 0, full: false });
    // Disconnected for a while (undefined), then a new family id and an empty table.
    generation = undefined;
    await op.sync({ periodic: false, retry: false });
    expect(resets).toEqual([]);
    await ipvs.flush();
    generation = 32;
    await op.sync({ periodic: false, retry: false });
    expect(resets).toEqual(['']); // called before the resync, on the empty table
    expect(op.last).toMatchObject({ full: true, ops: 2, failed: 0 });
    expect(ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 rr\nadd-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq');
    expect(log.entries.filter((l) => l.message.startsWith('ip_vs was loaded again'))).toEqual([
      expect.objectContaining({ level: 'warn', fields: expect.objectContaining({ familyBefore: 31, familyNow: 32 }) }),
    ]);
    await op.sync({ periodic: false, retry: false });
    expect(resets).toHaveLength(1);
    expect(op.last).toMatchObject({ ops: 0, full: false });
  });
});

describe('the periodic check of the iptables path', () => {
  it('applies nothing while the chains and sets are in step, and applies them again once they drifted', async () => {
    const host = new FakeHost();
    const log = memoryLog();
    const op = await syncedWithIptables(host, new FakeIpvs(), log);
    const restores = () => host.commands().filter((c) => c.endsWith('-restore') || c === 'ipset').length;
    expect([...host.sets.get('IPVSOP-CLUSTER-IP')!.members]).toEqual(['10.200.1.10,tcp:80']);
    host.calls.length = 0;
    await op.sync({ periodic: true, retry: false });
    // Read-only: one terse set listing and the two saves; no restore of anything.
    expect(host.commands()).toEqual(['ipset', 'iptables-nft-save', 'ip6tables-nft-save']);
    // Someone empties a set: the next check sees it and the path is applied again.
    host.sets.get('IPVSOP-CLUSTER-IP')!.members.clear();
    host.calls.length = 0;
    await op.sync({ periodic: true, retry: false });
    expect(restores()).toBeGreaterThan(1);
    expect(host.calls.some((c) => c.cmd === 'iptables-nft-restore')).toBe(true);
    expect([...host.sets.get('IPVSOP-CLUSTER-IP')!.members]).toEqual(['10.200.1.10,tcp:80']);
    expect(log.entries.some((l) => l.message === 'iptables path drifted; applying it again' && l.fields?.reason === 'set IPVSOP-CLUSTER-IP has 0 members, not 1')).toBe(true);
  });

  it('puts the iptables check off when a change arrives during it, at most 3 periods in a row', async () => {
    const host = new FakeHost();
    // A change arrives while the check lists the sets (before its two saves).
    let during: (() => void) | undefined;
    const run: Runner = async (cmd, args, input, signal) => {
      if (cmd === 'ipset' && args[1] === '-t') { during?.(); during = undefined; }
      return host.run(cmd, args, input, signal);
    };
    const log = memoryLog();
    const op = await syncedWithIptables(host, new FakeIpvs(), log, run);
    // Drift that only a check to its end finds.
    host.sets.get('IPVSOP-CLUSTER-IP')!.members.clear();
    // The check's saves: those right after its terse set listing (a repair saves again later).
    const saves = () => {
      const from = host.calls.findIndex((c) => c.cmd === 'ipset' && c.args[1] === '-t');
      const after = host.calls.slice(from + 1);
      const end = after.findIndex((c) => !c.cmd.endsWith('-save'));
      return from < 0 ? 0 : end < 0 ? after.length : end;
    };
    const checks: number[] = [];
    for (let p = 0; p < 5; p++) {
      host.calls.length = 0;
      during = () => op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', `10.10.1.${10 + p}`], String(10 + p)) });
      await op.sync({ periodic: true, retry: false });
      checks.push(saves());
      expect(host.commands().some((c) => c.endsWith('-restore'))).toBe(p === 3);
      await op.sync(); // the change's own sync
      expect(op.last).toMatchObject({ full: false });
      expect(op.last!.ops).toBeGreaterThan(0);
    }
    // Three periods put off, the fourth checks to its end whatever arrives (and repairs the set),
    // then put off again.
    expect(checks).toEqual([0, 0, 0, 2, 0]);
    expect([...host.sets.get('IPVSOP-CLUSTER-IP')!.members]).toEqual(['10.200.1.10,tcp:80']);
    expect(log.entries.filter((l) => l.message === 'iptables check put off: a change is waiting').map((l) => l.fields?.inARow))
      .toEqual([1, 2, 3, 1]);
  });

  it('checks beside the read of IPVS; a change once the check is over does not put it off', async () => {
    const host = new FakeHost();
    let checked: (() => void) | undefined;
    const run: Runner = async (cmd, args, input, signal) => {
      const r = await host.run(cmd, args, input, signal);
      if (cmd === 'ip6tables-nft-save') checked?.();
      return r;
    };
    let onDump: (() => Promise<void>) | undefined;
    class GatedDump extends FakeIpvs {
      override async listVirtualServers() { await onDump?.(); return super.listVirtualServers(); }
    }
    const op = await syncedWithIptables(host, new GatedDump(), memoryLog(), run);
    const checkDone = new Promise<void>((r) => { checked = r; });
    host.sets.get('IPVSOP-CLUSTER-IP')!.members.clear();
    host.calls.length = 0;
    // The dump of the virtual servers waits for the check's last save: it can end only if the
    // check runs beside the read (a check after the read would leave it waiting: 'sequential').
    let overlap: 'beside' | 'sequential' | undefined;
    onDump = async () => {
      onDump = undefined;
      overlap = await Promise.race([
        // Once the check's last save has ended and its comparison (same turn) has run.
        checkDone.then(() => new Promise<void>((r) => setImmediate(r))).then(() => 'beside' as const),
        new Promise<'sequential'>((r) => setTimeout(() => r('sequential'), 2000)),
      ]);
      op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.9'], '9') });
    };
    await op.sync({ periodic: true, retry: false });
    expect(overlap).toBe('beside');
    // The check had its answer before the change came: the drifted set is repaired in this sync.
    expect(host.commands().some((c) => c.endsWith('-restore'))).toBe(true);
    expect([...host.sets.get('IPVSOP-CLUSTER-IP')!.members]).toEqual(['10.200.1.10,tcp:80']);
  });

  it('puts the comparison of the VIP link off when a change waits, at most 3 periods in a row', async () => {
    const host = new FakeHost();
    let onDump: (() => void) | undefined;
    class GatedDump extends FakeIpvs {
      override async listVirtualServers() { onDump?.(); onDump = undefined; return super.listVirtualServers(); }
    }
    const vips = new FakeVipLink();
    const op = await syncedWithIptables(host, new GatedDump(), memoryLog(), host.run, vips);
    // Someone removes the VIP: only a comparison of the link finds it.
    const link = vips.links.get('ipvs-op0')!;
    link.delete('10.200.1.10');
    const bound: boolean[] = [];
    for (let p = 0; p < 5; p++) {
      // A change arrives while the periodic sync reads IPVS (after it listed the link).
      onDump = () => op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', `10.10.1.${10 + p}`], String(10 + p)) });
      await op.sync({ periodic: true, retry: false });
      bound.push(link.has('10.200.1.10'));
      link.delete('10.200.1.10');
      await op.sync(); // the change's own sync: no comparison of the link
      expect(op.last!.ops).toBeGreaterThan(0);
      expect(link.has('10.200.1.10')).toBe(false);
    }
    // Three periods put off, the fourth compares whatever waits (and binds the VIP), then off again.
    expect(bound).toEqual([false, false, false, true, false]);
    // With no change waiting, every periodic sync compares.
    await op.sync({ periodic: true, retry: false });
    expect(link.has('10.200.1.10')).toBe(true);
  });
});

describe('slow start through the sync loop', () => {
  it('a new endpoint ramps by update-dest, each step asked for with the deadline timer', async () => {
    const base = manualClock();
    const timers: number[] = [];
    const clock = { ...base, setTimeout: (_fn: () => void, ms: number) => { timers.push(ms); return {}; } };
    const { op, ipvs } = setup(undefined, undefined, clock);
    const ramped = web((s) => { s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/slow-start': '10s' }; });
    op.handle({ kind: 'service', type: 'upsert', object: ramped });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4']) });
    await op.sync();
    // Established at first sight: full weight (the plugin's 1 x RAMP_RESOLUTION).
    expect(ipvs.dump()).toContain('10.10.1.3:8080 w=100 masq');
    expect(ipvs.dump()).toContain('10.10.1.4:8080 w=100 masq');
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4', '10.10.1.5'], '2') });
    timers.length = 0;
    await op.sync();
    expect(ipvs.dump()).toContain('10.10.1.5:8080 w=1 masq');
    expect(timers).toEqual([1000]);
    const weights: number[] = [];
    for (let i = 0; i < 10; i++) {
      base.advance(1000);
      const before = ipvs.applied.length;
      await op.sync();
      const ops = ipvs.applied.slice(before);
      expect(ops).toEqual([expect.stringMatching(/^update-dest TCP 10\.200\.1\.10:80 -> 10\.10\.1\.5:8080 w=\d+ masq$/)]);
      weights.push(Number(/w=(\d+)/.exec(ops[0]!)![1]));
    }
    expect(weights).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
    // The ramp is over: a later sync changes nothing.
    base.advance(5000);
    const before = ipvs.applied.length;
    await op.sync();
    expect(ipvs.applied.length).toBe(before);
  });
});

describe('cluster weights through the sync loop', () => {
  const balanced = (scheduler: string, balance = 'cluster', rv = '1') => web((s) => {
    s.metadata!.annotations = { 'ipvs-operator.io/scheduler': scheduler, 'ipvs-operator.io/balance': balance };
    s.metadata!.resourceVersion = rv;
  });
  const weightsNow = (ipvs: FakeIpvs) => [...ipvs.dump().matchAll(/-> (10\.10\.1\.\d+):8080 w=(\d+)/g)].map((m) => `${m[1]} ${m[2]}`);

  it('applies published weights by update-dest, falls back to local weights when the view goes stale, and says so', async () => {
    const clock = manualClock();
    const cluster = new ClusterWeights(30_000);
    const { op, ipvs, posted } = setup(undefined, undefined, clock, { clusterWeights: cluster });
    op.handle({ kind: 'service', type: 'upsert', object: balanced('wrr') });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3', '10.10.1.4', '10.10.1.5']) });
    await op.sync();
    expect(weightsNow(ipvs)).toEqual(['10.10.1.3 1', '10.10.1.4 1', '10.10.1.5 1']);
    const [viewKey] = [...cluster.optedIn().values()];
    expect(viewKey).toMatch(/^default\/web\//);

    cluster.setAlive(true, clock.now());
    cluster.publish('default/web', new Map([[viewKey!, new Map([['10.10.1.3:8080', 20], ['10.10.1.4:8080', 20], ['10.10.1.5:8080', 2]])]]));
    let before = ipvs.applied.length;
    await op.sync();
    expect(ipvs.applied.slice(before).map((o) => o.replace(/ masq$/, '')).sort()).toEqual([
      'update-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=20', 'update-dest TCP 10.200.1.10:80 -> 10.10.1.4:8080 w=20', 'update-dest TCP 10.200.1.10:80 -> 10.10.1.5:8080 w=2']);
    // Unchanged weights: nothing to do.
    before = ipvs.applied.length;
    await op.sync();
    expect(ipvs.applied.length).toBe(before);

    // The view dies: local weights at once, the problem once it has been missing for 30 s.
    cluster.setAlive(false, clock.now());
    await op.sync();
    expect(weightsNow(ipvs)).toEqual(['10.10.1.3 1', '10.10.1.4 1', '10.10.1.5 1']);
    expect(posted.at(-1)!.map((p) => p.reason)).not.toContain('ClusterViewStale');
    clock.advance(30_000);
    await op.sync();
    expect(posted.at(-1)).toEqual(expect.arrayContaining([expect.objectContaining({ service: 'default/web', reason: 'ClusterViewStale' })]));
  });

  it('a scheduler that ignores weights, or a bad value, is a problem and keeps local balancing', async () => {
    const cluster = new ClusterWeights();
    const { op, posted } = setup(undefined, undefined, undefined, { clusterWeights: cluster });
    op.handle({ kind: 'service', type: 'upsert', object: balanced('rr') });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.3']) });
    await op.sync();
    expect(posted.at(-1)!.map((p) => p.reason)).toContain('ClusterBalanceInapplicable');
    expect(cluster.optedIn().size).toBe(0);
    op.handle({ kind: 'service', type: 'upsert', object: balanced('wrr', 'global', '2') });
    await op.sync();
    expect(posted.at(-1)).toEqual(expect.arrayContaining([expect.objectContaining({ reason: 'InvalidBalance', message: expect.stringContaining('"global" is not one of local, cluster') })]));
    expect(cluster.optedIn().size).toBe(0);
  });
});
