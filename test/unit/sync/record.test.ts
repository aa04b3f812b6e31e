// The ownership record: what goes in and out of it (plan/ownership.ts updateRecord), the file
// (sync/record.ts), and the operator using it across a restart. Address ranges: fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { makeVirtualServer } from '../../../src/model/ipvs.js';
import { memoryLog } from '../../../src/util/log.js';
import { Operator } from '../../../src/sync/operator.js';
import { FileOwnershipRecord, MemoryOwnershipRecord, type OwnershipRecord } from '../../../src/sync/record.js';
import { updateRecord } from '../../../src/plan/ownership.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const vs = (address: string, port: number) => makeVirtualServer({ family: 'IPv4', address, port, scheduler: 'rr' });

describe('updateRecord', () => {
  it('adds desired virtual servers the kernel has, drops deleted ones, and after a full read the vanished', () => {
    const r0 = new Set(['TCP 192.168.0.10:30080', 'TCP 10.200.1.99:80']);
    const r1 = updateRecord(r0, {
      full: false, applied: [{ kind: 'delete-service', vs: vs('10.200.1.99', 80) }],
      desired: ['TCP 10.200.1.10:80', 'TCP 10.200.1.11:80'], present: new Set(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080']),
    });
    expect([...r1].sort()).toEqual(['TCP 10.200.1.10:80', 'TCP 192.168.0.10:30080']);
    const r2 = updateRecord(r1, { full: true, applied: [], desired: [], present: new Set(['TCP 10.200.1.10:80']) });
    expect([...r2]).toEqual(['TCP 10.200.1.10:80']);
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
