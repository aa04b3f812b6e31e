// After its first sync the loop runs a change's code once (src/sync/rehearsal.ts): one Service
// rebuilt from its own objects, one virtual server's real servers read back, that virtual server
// planned and the plan dropped. These tests hold it to "nothing written, nothing changed": the
// kernel holds what the first sync wrote, the next change plans exactly its own op, and a read
// that fails there leaves the sync a success.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import {
  type IpvsOp, type RealServer, type VirtualServer, formatOp, makeRealServer, virtualServerKey,
} from '../../../src/model/ipvs.js';
import type { SyncPlan } from '../../../src/plan/sync.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { rehearsalChange, rehearsalKey } from '../../../src/sync/rehearsal.js';
import { Operator } from '../../../src/sync/operator.js';
import { memoryLog } from '../../../src/util/log.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';
import { waitFor } from '../../support/wait.js';

const config = { ...defaultProxyConfig, interfaceName: 'ipvs-op0' };
const kernel = { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) };

/**
 * FakeIpvs that records each batched real server read, and refuses them (EIO per dump, as the
 * kernel answers) when told; and records the ops it is asked to encode without sending.
 */
class ReadRecordingIpvs extends FakeIpvs {
  readonly reads: string[][] = [];
  readonly encoded: IpvsOp[][] = [];
  refuseReads = false;
  encode(ops: readonly IpvsOp[]): Buffer {
    this.encoded.push([...ops]);
    return Buffer.alloc(0);
  }
  override async listRealServersMany(vss: readonly VirtualServer[]): Promise<Array<RealServer[] | IpvsError>> {
    this.reads.push(vss.map(virtualServerKey));
    if (this.refuseReads) return vss.map(() => new IpvsError('GET_DEST', 5, 'EIO'));
    return super.listRealServersMany(vss);
  }
}

const service = (i: number, version = '1') => makeService('default', `svc${i}`, (s) => {
  s.spec!.clusterIP = `10.200.1.${i + 1}`;
  s.spec!.clusterIPs = [`10.200.1.${i + 1}`];
  s.metadata!.resourceVersion = version;
});
const slice = (i: number, n: number, version = '1') => makeSlice('default', `svc${i}`, `svc${i}-a`,
  Array.from({ length: n }, (_, j) => ({ ip: `10.10.${i}.${j + 1}` })), (s) => { s.metadata!.resourceVersion = version; });

function setup(endpoints = 2, collect?: () => void) {
  const ipvs = new ReadRecordingIpvs();
  const plans: SyncPlan[] = [];
  const log = memoryLog();
  const op = new Operator(config, {
    ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined },
    status: { write: async () => undefined }, log, registry: new PluginRegistry(), nodeName: NODE, kernel,
    onPlan: (p) => plans.push(p), ...(collect ? { collect } : {}),
  });
  op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
  for (let i = 0; i < 4; i++) {
    op.handle({ kind: 'service', type: 'upsert', object: service(i) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(i, endpoints) });
  }
  return { ipvs, plans, log, op };
}

describe('running a change\'s code once after the first sync', () => {
  it('reads one virtual server back, plans nothing it hands on and writes nothing', async () => {
    const { ipvs, plans, log, op } = setup();
    await op.sync();
    // The first sync started from an empty table: the only real server read is the rehearsal's.
    expect(ipvs.reads).toEqual([['TCP 10.200.1.1:80']]);
    expect(plans).toHaveLength(1);
    const written = new FakeIpvs();
    await written.apply(plans[0]!.ops);
    expect(ipvs.dump()).toBe(written.dump());
    expect(op.last).toMatchObject({ ops: 12, full: true });
    expect(op.last!.error).toBeUndefined();
    expect(log.entries.filter((e) => e.message.startsWith('ran a change\'s code once'))).toHaveLength(1);

    // Not again after a later sync.
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(2, 3, '2') });
    await op.sync();
    expect(log.entries.filter((e) => e.message.startsWith('ran a change\'s code once'))).toHaveLength(1);
  });

  it('plans and encodes one change of each kind on that virtual server, and sends none of it', async () => {
    const { ipvs, plans, log, op } = setup(3);
    await op.sync();
    // Its first real server's weight, its last one removed (no connections: at once, grace period
    // or not), one added on the first's next port; in the planner's order.
    expect(ipvs.encoded.map((ops) => ops.map(formatOp))).toEqual([[
      'update-dest TCP 10.200.1.1:80 -> 10.10.0.1:8080 w=2 masq',
      'add-dest TCP 10.200.1.1:80 -> 10.10.0.1:8081 w=1 masq',
      expect.stringMatching(/^delete-dest TCP 10\.200\.1\.1:80 -> 10\.10\.0\.[23]:8080$/),
    ]]);
    const written = new FakeIpvs();
    await written.apply(plans[0]!.ops);
    expect(ipvs.dump()).toBe(written.dump());
    const ran = log.entries.filter((e) => e.message.startsWith('ran a change\'s code once'));
    expect(ran.map((e) => e.fields)).toEqual([{ virtualServer: 'TCP 10.200.1.1:80', ops: 3, ms: expect.any(Number) }]);
    // Nothing of it carried: the drain it planned is not the loop's, and a later sync changes nothing.
    await op.sync({ periodic: true, retry: false });
    expect(plans[1]!.ops).toEqual([]);
  });

  it('the change it rehearses: a weight one more, the last real server gone, one added on the next port', () => {
    const rs = (port: number, weight = 1) => makeRealServer({ address: '10.10.0.1', port, weight });
    const entry = (dests: RealServer[]) => ({ vs: {}, origin: {}, dests }) as never;
    expect(rehearsalChange(entry([rs(80), rs(81), rs(82, 3)])).dests).toEqual([rs(80, 2), rs(81), rs(81)]);
    expect(rehearsalChange(entry([rs(65535, 5)])).dests).toEqual([rs(65535, 6), rs(1, 5)]);
    const none = entry([]);
    expect(rehearsalChange(none)).toBe(none);
  });

  it('leaves the desired state as it was: the next change on the rehearsed Service plans exactly its op', async () => {
    const { plans, op } = setup();
    await op.sync();
    // An update that changes nothing the Service's virtual servers are built from: nothing to do.
    op.handle({ kind: 'service', type: 'upsert', object: service(0, '2') });
    await op.sync();
    expect(plans[1]!.ops).toEqual([]);
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(0, 3, '2') });
    await op.sync();
    expect(plans[2]!.ops.map(formatOp)).toEqual([
      expect.stringMatching(/^add-dest .*10\.200\.1\.1:80 .*10\.10\.0\.3:8080/),
    ]);
  });

  it('a read refused there is logged; the first sync is still a success, the next change syncs', async () => {
    const { ipvs, plans, log, op } = setup();
    ipvs.refuseReads = true;
    await op.sync();
    expect(op.last!.error).toBeUndefined();
    expect(op.ready).toBe(true);
    expect(ipvs.reads).toEqual([['TCP 10.200.1.1:80']]);
    const warned = log.entries.filter((e) => e.level === 'warn' && e.message.includes('change\'s code once'));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.fields).toMatchObject({ virtualServer: 'TCP 10.200.1.1:80', error: expect.stringContaining('EIO') });
    ipvs.refuseReads = false;
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(1, 1, '2') });
    await op.sync();
    expect(plans[1]!.ops.map(formatOp)).toEqual([expect.stringMatching(/^delete-dest .*10\.200\.1\.2:80 .*10\.10\.1\.2:8080/)]);
  });

  it('reads nothing when no virtual server has real servers', async () => {
    const { ipvs, op } = setup(0);
    await op.sync();
    expect(op.last!.error).toBeUndefined();
    expect(ipvs.reads).toEqual([]);
  });

  it('picks a virtual server the copy holds with real servers', () => {
    const copy = (entries: Array<[string, number]>) => new Map(entries.map(([k, n]) => [k, {
      vs: {}, dests: new Map(Array.from({ length: n }, (_, j) => [`rs${j}`, {}])),
    }])) as never;
    const desired = new Map([['a', { dests: [{}] }], ['b', { dests: [{}] }], ['c', { dests: [] }]]) as never;
    expect(rehearsalKey(desired, copy([['a', 0], ['b', 2]]))).toBe('b');
    expect(rehearsalKey(desired, copy([['c', 1]]))).toBeUndefined();
  });
});

describe('one collection at the end of the first sync', () => {
  it('runs once, on the turn after the first sync ended, and not after later syncs', async () => {
    const calls: Array<{ reads: number; reported: boolean }> = [];
    let probe = () => ({ reads: -1, reported: false });
    const { ipvs, log, op } = setup(2, () => calls.push(probe()));
    probe = () => ({ reads: ipvs.reads.length, reported: op.last !== undefined });
    await op.sync();
    // Not within the sync: its frame (the plan, the messages) is still live there.
    expect(calls).toEqual([]);
    await waitFor(() => calls.length === 1, 'the collection');
    // After the rehearsal's read and after the sync was reported.
    expect(calls).toEqual([{ reads: 1, reported: true }]);
    expect(op.last!.error).toBeUndefined();
    const logged = log.entries.filter((e) => e.message === 'emptied the young generation after the first sync');
    expect(logged).toHaveLength(1);
    expect(logged[0]!.fields).toEqual({ ms: expect.any(Number) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(2, 3, '2') });
    await op.sync();
    await op.sync({ periodic: true, retry: false });
    await new Promise((r) => setImmediate(r));
    expect(calls).toHaveLength(1);
  });

  it('a collector that throws is logged; the first sync is still a success', async () => {
    const { log, op } = setup(2, () => { throw new Error('no heap today'); });
    await op.sync();
    expect(op.last!.error).toBeUndefined();
    expect(op.ready).toBe(true);
    await waitFor(() => log.entries.some((e) => e.level === 'warn'), 'the warning');
    expect(log.entries.filter((e) => e.level === 'warn' && e.message.startsWith('emptying the young generation'))
      .map((e) => e.fields)).toEqual([{ error: 'no heap today' }]);
  });
});
