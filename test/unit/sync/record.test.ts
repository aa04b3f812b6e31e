// The ownership record: what goes in and out of it (plan/ownership.ts planRecord and
// applyRecordPlan), the file
// (sync/record.ts), and the operator using it across a restart. Address ranges: fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { type IpvsOp, makeVirtualServer } from '../../../src/model/ipvs.js';
import { memoryLog } from '../../../src/util/log.js';
import { Operator } from '../../../src/sync/operator.js';
import { FileOwnershipRecord, MemoryOwnershipRecord, type OwnershipRecord } from '../../../src/sync/record.js';
import { applyRecordPlan, planRecord } from '../../../src/plan/ownership.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const vs = (address: string, port: number) => makeVirtualServer({ family: 'IPv4', address, port, scheduler: 'rr' });

describe('planRecord and applyRecordPlan', () => {
  const keys = (...k: string[]) => new Map(k.map((x) => [x, {}]));
  it('adds desired virtual servers the kernel has, drops deleted ones, and after a full read the vanished', () => {
    const r0 = new Set(['TCP 192.168.0.10:30080', 'TCP 10.200.1.99:80']);
    // Two Services created (the kernel refuses the second), one deleted.
    const ops: IpvsOp[] = [{ kind: 'add-service', vs: vs('10.200.1.10', 80) }, { kind: 'add-service', vs: vs('10.200.1.11', 80) },
      { kind: 'delete-service', vs: vs('10.200.1.99', 80) }];
    const p1 = planRecord({
      full: false, ops, desired: keys('TCP 10.200.1.10:80', 'TCP 10.200.1.11:80'),
      actual: keys('TCP 192.168.0.10:30080', 'TCP 10.200.1.99:80'), recorded: r0,
    });
    expect(p1).toEqual({ add: [{ key: 'TCP 10.200.1.10:80', op: 0 }, { key: 'TCP 10.200.1.11:80', op: 1 }], remove: [{ key: 'TCP 10.200.1.99:80', op: 2 }] });
    const r1 = applyRecordPlan(r0, p1, [undefined, new Error('EINVAL'), undefined]);
    expect([...r1].sort()).toEqual(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080']);
    // A refused delete keeps its key.
    expect(applyRecordPlan(r0, p1, [undefined, undefined, new Error('EBUSY')]).has('TCP 10.200.1.99:80')).toBe(true);
    const p2 = planRecord({ full: true, ops: [], desired: keys(), actual: keys('TCP 10.200.1.10:80'), recorded: r1 });
    expect([...applyRecordPlan(r1, p2, [])]).toEqual(['TCP 10.200.1.10:80']);
  });

  it('an incremental sync that creates and deletes nothing changes nothing; a full one records what is taken over', () => {
    const ops: IpvsOp[] = [{ kind: 'update-service', vs: vs('10.200.1.10', 80) }];
    const input = { ops, desired: keys('TCP 10.200.1.10:80'), actual: keys('TCP 10.200.1.10:80'), recorded: new Set<string>() };
    expect(planRecord({ ...input, full: false })).toEqual({ add: [], remove: [] });
    expect(planRecord({ ...input, full: true })).toEqual({ add: [{ key: 'TCP 10.200.1.10:80' }], remove: [] });
    // After a full read, a recorded key the kernel lacks goes unless the sync creates it again.
    const again = planRecord({ full: true, ops: [{ kind: 'add-service', vs: vs('10.200.1.11', 80) }], desired: keys('TCP 10.200.1.11:80'),
      actual: keys(), recorded: new Set(['TCP 10.200.1.11:80']) });
    expect(again.remove).toEqual([{ key: 'TCP 10.200.1.11:80', op: 0, refused: true }]);
    expect([...applyRecordPlan(new Set(['TCP 10.200.1.11:80']), again, [undefined])]).toEqual(['TCP 10.200.1.11:80']);
    expect([...applyRecordPlan(new Set(['TCP 10.200.1.11:80']), again, [new Error('EINVAL')])]).toEqual([]);
  });
});

describe('FileOwnershipRecord', () => {
  it('is absent until saved, round-trips sorted keys with a header, and goes with remove()', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvsop-record-'));
    try {
      const rec = new FileOwnershipRecord(join(dir, 'state', 'owned-virtual-servers'));
      expect(await rec.load()).toBeUndefined();
      await rec.save(new Set(['TCP 192.168.0.10:30080', 'TCP 10.200.1.10:80', 'UDP [fd00:200::10]:53']));
      expect(readFileSync(rec.path, 'utf8').split('\n').slice(1)).toEqual(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080', 'UDP [fd00:200::10]:53', '']);
      expect(await rec.load()).toEqual(new Set(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080', 'UDP [fd00:200::10]:53']));
      await rec.remove();
      expect(await rec.load()).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const nodePortService = () => makeService('default', 'web', (s) => {
  s.spec!.type = 'NodePort';
  s.spec!.ports![0]!.nodePort = 30080;
});

function operator(ipvs: FakeIpvs, vips: FakeVipLink, record: OwnershipRecord) {
  return new Operator({ ...defaultProxyConfig }, {
    ipvs, vips, iptables: new NoIptables(), events: { report: async () => undefined }, status: { write: async () => undefined },
    log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, record,
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
  });
}

describe('the operator and its record', () => {
  it('records what it creates; a NodePort of a Service deleted while it was down is removed after a restart, a foreign one is not', async () => {
    const ipvs = new FakeIpvs();
    const vips = new FakeVipLink();
    const record = new MemoryOwnershipRecord();
    const first = operator(ipvs, vips, record);
    first.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    first.handle({ kind: 'service', type: 'upsert', object: nodePortService() });
    first.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', 'web', 'web-1', [{ ip: '10.10.1.3' }]) });
    await first.sync();
    expect([...record.keys!].sort()).toEqual(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080']);
    // kube-proxy's IPVS mode beside us: a NodePort virtual server on the same node address.
    await ipvs.addVirtualServer(vs('192.168.0.10', 30081));
    // The operator restarts after the Service was deleted: it knows nothing of it but the record.
    const second = operator(ipvs, vips, record);
    second.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    await second.sync();
    expect(ipvs.dump()).toBe('add-service TCP 192.168.0.10:30081 rr');
    expect(record.keys).toEqual(new Set());
  });

  it('without a record (first start after an upgrade) a NodePort-looking virtual server it does not want is left alone', async () => {
    const ipvs = new FakeIpvs();
    await ipvs.addVirtualServer(vs('192.168.0.10', 30080));
    const op = operator(ipvs, new FakeVipLink(), new MemoryOwnershipRecord());
    op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    await op.sync();
    expect(ipvs.dump()).toBe('add-service TCP 192.168.0.10:30080 rr');
  });
});
