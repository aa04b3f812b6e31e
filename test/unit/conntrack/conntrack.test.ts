// UDP conntrack cleanup (issue 14): the ctnetlink codec, which entries a sync left stale, the fake's
// kernel semantics, and the operator step. The kernel proof, with real flows and conntrack(8) as the
// oracle, is test/kernel/udp-flows.test.ts.
// Addresses: clients 192.168.100.0/24 and 2001:db8:100::/64, VIPs 10.200.1.0/24 and fd00:200::/64,
// pods 10.10.1.0/24 and fd00:10::/64 (test/support/fixtures.ts for the operator part).
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { cleanStaleFlows } from '../../../src/sync/conntrack-cleanup.js';
import { type Flow, decodeFlow, encodeDelete, encodeDump, encodeFlow, formatFlow, parseFlow } from '../../../src/conntrack/codec.js';
import { ConntrackError } from '../../../src/conntrack/errors.js';
import { FakeConntrack } from '../../../src/conntrack/fake.js';
import type { DesiredTable } from '../../../src/desired/types.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { type IpvsOp, formatOp, makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { decodeMessages } from '../../../src/netlink/framing.js';
import { Errno, isInvalidArgument, isNotFound } from '../../../src/netlink/errors.js';
import { memoryLog } from '../../../src/util/log.js';
import { Metrics } from '../../../src/metrics/metrics.js';
import { Operator } from '../../../src/sync/operator.js';
import { dueConntrack, formatConntrackFilter, planConntrackFilters, selectStaleFlows } from '../../../src/plan/conntrack.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const flow = (line: string): Flow => {
  const f = parseFlow(line);
  if (!f) throw new Error(`bad fixture ${line}`);
  return f;
};
const hex = (b: Buffer) => b.toString('hex').replace(/(..)/g, '$1 ').trim();

describe('ctnetlink codec', () => {
  it('a dump request is nlmsghdr + nfgenmsg for the family, NLM_F_REQUEST|NLM_F_DUMP, no attributes', () => {
    expect(hex(encodeDump('IPv4', 7, 0))).toBe('14 00 00 00 01 01 01 03 07 00 00 00 00 00 00 00 02 00 00 00');
    expect(hex(encodeDump('IPv6', 7, 0)).slice(-11)).toBe('0a 00 00 00');
  });

  it('a dump for one protocol asks the kernel to filter on the original tuple\'s protocol number (CTA_FILTER)', () => {
    expect(hex(encodeDump('IPv4', 7, 0, 17))).toBe([
      '30 00 00 00 01 01 01 03 07 00 00 00 00 00 00 00', // len 48, CT_GET, REQUEST|DUMP, seq 7
      '02 00 00 00', // nfgenmsg: AF_INET
      '10 00 01 80 0c 00 02 80 05 00 01 00 11 00 00 00', // CTA_TUPLE_ORIG > CTA_TUPLE_PROTO > CTA_PROTO_NUM 17
      '0c 00 19 80 08 00 01 00 08 00 00 00', // CTA_FILTER > CTA_FILTER_ORIG_FLAGS = CTA_FILTER_F_CTA_PROTO_NUM (host order)
    ].join(' '));
    expect(() => encodeDump('IPv4', 7, 0, 256)).toThrow(ConntrackError);
  });

  it('a delete names the entry by original tuple, zone and id, nested attributes flagged, ports big-endian', () => {
    const f = flow('udp 192.168.100.61:40002 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40002 id=7 zone=0');
    expect(hex(encodeDelete(f, 1, 0))).toBe([
      '58 00 00 00 02 01 05 00 01 00 00 00 00 00 00 00', // len 88, CT_DELETE of subsys 1, REQUEST|ACK, seq 1
      '02 00 00 00', // nfgenmsg: AF_INET, v0, res_id 0
      '34 00 01 80', // CTA_TUPLE_ORIG | NLA_F_NESTED
      '14 00 01 80 08 00 01 00 c0 a8 64 3d 08 00 02 00 0a c8 01 3d', // CTA_TUPLE_IP: V4_SRC, V4_DST
      '1c 00 02 80 05 00 01 00 11 00 00 00 06 00 02 00 9c 42 00 00 06 00 03 00 00 35 00 00', // PROTO: 17, 40002, 53
      '06 00 12 00 00 00 00 00', // CTA_ZONE 0
      '08 00 0c 00 00 00 00 07', // CTA_ID 7
    ].join(' '));
  });

  it('decodes what the kernel sends for an entry, IPv4 and IPv6, zone and id included', () => {
    for (const line of [
      'udp 192.168.100.61:40002 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40002 id=305419896 zone=0',
      'udp [2001:db8:100::61]:40002 -> [fd00:200::61]:53 reply [fd00:10::61]:53 -> [2001:db8:100::61]:40002 id=9 zone=3',
      'tcp 192.168.100.61:40000 -> 10.200.1.61:80 reply 10.10.1.61:8080 -> 192.168.100.61:40000 id=1 zone=0',
    ]) {
      const [m] = decodeMessages(encodeFlow(flow(line), 5, 0));
      expect(formatFlow(decodeFlow(m!))).toBe(line);
    }
  });

  it('refuses garbage from the kernel with EMALFORMED, never a half-read flow', () => {
    const good = encodeFlow(flow('udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0'), 1, 0);
    const bad = (mutate: (b: Buffer) => Buffer): ConntrackError | undefined => {
      try {
        decodeFlow(decodeMessages(mutate(Buffer.from(good)))[0]!);
        return undefined;
      } catch (e) {
        return e as ConntrackError;
      }
    };
    const cases: Array<[string, (b: Buffer) => Buffer]> = [
      ['another message type', (b) => { b.writeUInt16LE(0x0103, 4); return b; }],
      ['an unknown family', (b) => { b.writeUInt8(7, 16); return b; }],
      ['an attribute running past the end', (b) => { b.writeUInt16LE(200, 20); return b; }],
      ['no tuples', (b) => { const c = b.subarray(0, 20); c.writeUInt32LE(20, 0); return Buffer.from(c); }],
      ['an IPv4 address of 6 bytes', (b) => { b.writeUInt16LE(10, 28); return b; }],
    ];
    for (const [what, mutate] of cases) {
      const e = bad(mutate);
      expect({ what, error: e instanceof ConntrackError, code: e?.code }).toEqual({ what, error: true, code: 'EMALFORMED' });
    }
  });

  it('never builds a delete without a tuple it can name: no ports, a bad address or zone is refused before sending', () => {
    const f = flow('udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0');
    const refused = (g: Flow) => { try { encodeDelete(g, 1, 0); return false; } catch (e) { return isInvalidArgument(e); } };
    expect(refused({ ...f, proto: 1 })).toBe(true); // ICMP: no ports
    expect(refused({ ...f, zone: 70000 })).toBe(true);
    expect(refused({ ...f, orig: { ...f.orig, dst: 'fd00::1' } })).toBe(true); // another family than the flow's
    expect(refused({ ...f, orig: { ...f.orig, sport: 65536 } })).toBe(true);
    expect(refused(f)).toBe(false);
  });
});

const vs53 = makeVirtualServer({ family: 'IPv4', protocol: 'UDP', address: '10.200.1.61', port: 53, scheduler: 'rr' });
const rs = (address: string, port = 53) => makeRealServer({ address, port });
const table = (entries: Array<[typeof vs53, string[]]>): DesiredTable =>
  new Map(entries.map(([vs, ips]) => [`${vs.protocol} ${vs.address}:${vs.port}`, { vs, dests: ips.map((ip) => rs(ip)), origin: { namespace: 'default', name: 'dns', portName: 'dns', kind: 'cluster-ip' as const, plugin: 'rr' } }]));

describe('which conntrack entries a sync left stale', () => {
  it('targets the UDP virtual servers that lose a real server or are deleted, with the real servers they keep, tied to those ops', () => {
    const tcp = makeVirtualServer({ family: 'IPv4', protocol: 'TCP', address: '10.200.1.61', port: 80, scheduler: 'rr' });
    const gone = makeVirtualServer({ family: 'IPv4', protocol: 'UDP', address: '10.200.1.62', port: 53, scheduler: 'rr' });
    const fwm = makeVirtualServer({ family: 'IPv4', protocol: 'UDP', address: '', port: 0, fwmark: 7, scheduler: 'rr' });
    const ops: IpvsOp[] = [
      { kind: 'delete-dest', vs: vs53, rs: rs('10.10.1.61') },
      { kind: 'delete-dest', vs: vs53, rs: rs('10.10.1.63') }, // the same virtual server once
      { kind: 'add-dest', vs: vs53, rs: rs('10.10.1.64') },
      { kind: 'delete-dest', vs: tcp, rs: rs('10.10.1.61', 80) }, // TCP: flows end by themselves
      { kind: 'delete-service', vs: gone },
      { kind: 'delete-dest', vs: fwm, rs: rs('10.10.1.61') }, // no address to match
      { kind: 'update-dest', vs: vs53, rs: rs('10.10.1.62') },
    ];
    const t = planConntrackFilters(ops, table([[vs53, ['10.10.1.62', '10.10.1.64']]]));
    expect(t.map((x) => ({ ...x, keep: [...x.keep] }))).toEqual([
      { family: 'IPv4', address: '10.200.1.61', port: 53, keep: ['10.10.1.62:53', '10.10.1.64:53'], after: [0, 1] },
      { family: 'IPv4', address: '10.200.1.62', port: 53, keep: [], after: [4] },
    ]);
    expect(t.map(formatConntrackFilter)).toEqual(['del-conntrack UDP 10.200.1.61:53 keep 10.10.1.62:53,10.10.1.64:53', 'del-conntrack UDP 10.200.1.62:53 keep -']);
    expect(planConntrackFilters([{ kind: 'add-dest', vs: vs53, rs: rs('10.10.1.64') }], new Map())).toEqual([]);
    // A filter runs when the kernel accepted one of its deletions, not when it refused them all.
    const refused = (...ids: number[]) => ops.map((_, i) => (ids.includes(i) ? new Error('ENOENT') : undefined));
    expect(dueConntrack(t, refused()).map((f) => f.address)).toEqual(['10.200.1.61', '10.200.1.62']);
    expect(dueConntrack(t, refused(0)).map((f) => f.address)).toEqual(['10.200.1.61', '10.200.1.62']);
    expect(dueConntrack(t, refused(0, 1, 4)).map((f) => f.address)).toEqual([]);
    expect(dueConntrack(t, refused(4)).map((f) => f.address)).toEqual(['10.200.1.61']);
  });

  it('picks an entry to a target whose reply source is not a real server it keeps, and nothing else', () => {
    const targets = planConntrackFilters([{ kind: 'delete-dest', vs: vs53, rs: rs('10.10.1.61') }], table([[vs53, ['10.10.1.62']]]));
    const cases: Array<[string, boolean, string]> = [
      ['to the removed pod', true, 'udp 192.168.100.61:40002 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40002 id=1 zone=0'],
      ['masqueraded, to the removed pod', true, 'udp 192.168.100.61:40003 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 10.10.1.1:61000 id=2 zone=0'],
      ['in another zone, to the removed pod', true, 'udp 192.168.100.61:40004 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40004 id=3 zone=2'],
      ['to the kept pod', false, 'udp 192.168.100.61:40005 -> 10.200.1.61:53 reply 10.10.1.62:53 -> 192.168.100.61:40005 id=4 zone=0'],
      ['to the kept pod on another port (the target port changed)', true, 'udp 192.168.100.61:40006 -> 10.200.1.61:53 reply 10.10.1.62:5353 -> 192.168.100.61:40006 id=5 zone=0'],
      ['not NATed (a direct-return flow, a local socket)', false, 'udp 192.168.100.61:40007 -> 10.200.1.61:53 reply 10.200.1.61:53 -> 192.168.100.61:40007 id=6 zone=0'],
      ['to another port of the VIP', false, 'udp 192.168.100.61:40008 -> 10.200.1.61:54 reply 10.10.1.61:54 -> 192.168.100.61:40008 id=7 zone=0'],
      ['TCP to the same address and port', false, 'tcp 192.168.100.61:40009 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40009 id=8 zone=0'],
      ['foreign: another VIP', false, 'udp 192.168.100.61:40010 -> 10.200.1.99:53 reply 10.10.1.61:53 -> 192.168.100.61:40010 id=9 zone=0'],
    ];
    for (const [what, stale, line] of cases) {
      expect({ what, stale: selectStaleFlows(targets, [flow(line)]).length === 1 }).toEqual({ what, stale });
    }
    expect(selectStaleFlows([], cases.map(([, , l]) => flow(l)))).toEqual([]);
  });

  it('matches IPv6 whatever the spelling of the addresses', () => {
    const v6 = makeVirtualServer({ family: 'IPv6', protocol: 'UDP', address: 'fd00:200:0:0::61', port: 53, scheduler: 'rr' });
    const targets = planConntrackFilters([{ kind: 'delete-service', vs: v6 }], new Map());
    const f = flow('udp [2001:db8:100::61]:1 -> [fd00:200::61]:53 reply [fd00:10::61]:53 -> [2001:db8:100::61]:1 id=1 zone=0');
    expect(selectStaleFlows(targets, [f])).toEqual([f]);
    expect(selectStaleFlows(targets, [{ ...f, family: 'IPv4' }])).toEqual([]);
  });
});

describe('FakeConntrack: the kernel answers of ctnetlink', () => {
  it('deletes by tuple and zone; ENOENT for a missing entry or another entry\'s id', async () => {
    const ct = new FakeConntrack();
    ct.seed(`udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=4 zone=0
             udp [2001:db8:100::61]:1 -> [fd00:200::61]:53 reply [fd00:10::61]:53 -> [2001:db8:100::61]:1 id=5 zone=0`);
    expect((await ct.list('IPv4')).map(formatFlow)).toEqual(['udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=4 zone=0']);
    const [v4] = await ct.list('IPv4');
    const [wrongId, wrongZone, ok, again] = await ct.delete([{ ...v4!, id: 99 }, { ...v4!, zone: 1 }, v4!, v4!]);
    expect([isNotFound(wrongId), isNotFound(wrongZone), ok, isNotFound(again)]).toEqual([true, true, undefined, true]);
    expect(wrongId?.errno).toBe(Errno.ENOENT);
    expect(ct.dump()).toBe('udp [2001:db8:100::61]:1 -> [fd00:200::61]:53 reply [fd00:10::61]:53 -> [2001:db8:100::61]:1 id=5 zone=0');
  });
});

describe('cleanStaleFlows', () => {
  const targets = () => planConntrackFilters([{ kind: 'delete-dest', vs: vs53, rs: rs('10.10.1.61') }], table([[vs53, ['10.10.1.62']]]));

  it('deletes the stale entries of the targets\' family and leaves the rest', async () => {
    const ct = new FakeConntrack();
    ct.seed(`udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0
             udp 192.168.100.61:2 -> 10.200.1.61:53 reply 10.10.1.62:53 -> 192.168.100.61:2 id=2 zone=0
             udp 192.168.100.62:3 -> 10.200.1.99:53 reply 10.10.1.61:53 -> 192.168.100.62:3 id=3 zone=0
             tcp 192.168.100.61:4 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:4 id=4 zone=0`);
    const r = await cleanStaleFlows(ct, targets());
    expect(r).toEqual({
      targets: 1, deleted: 1, gone: 0, errors: [], flows: ['udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0'],
      lists: [{ family: 'IPv4', path: 'kernel-filter', messages: 3, bytes: 0, kept: 3 }], // the TCP entry is never listed
    });
    expect(ct.dump().split('\n')).toHaveLength(3);
  });

  it('never throws: a failing list is an error line; an entry gone meanwhile counts as gone', async () => {
    const failing = new FakeConntrack();
    failing.failList = ConntrackError.fromErrno('list IPv4', Errno.EPERM);
    const r = await cleanStaleFlows(failing, targets());
    expect(r).toMatchObject({ deleted: 0, gone: 0, flows: [] });
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(/^IPv4: list IPv4: .*EPERM/);
    const racing = new FakeConntrack();
    racing.seed('udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0');
    const list = racing.list.bind(racing);
    racing.list = async (f) => {
      const flows = await list(f);
      await racing.delete(flows); // the flow timed out between the dump and the delete
      return flows;
    };
    expect(await cleanStaleFlows(racing, targets())).toMatchObject({ deleted: 0, gone: 1, errors: [] });
  });
});

describe('Operator: conntrack cleanup after a sync', () => {
  const dns = (mutate?: Parameters<typeof makeService>[2]) => makeService('default', 'dns', (s) => {
    s.spec!.clusterIP = '10.200.1.61';
    s.spec!.clusterIPs = ['10.200.1.61'];
    s.spec!.ports = [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 as unknown as never }];
    mutate?.(s);
  });
  const slice = (ips: string[], rv: string) => makeSlice('default', 'dns', 'dns-1', ips.map((ip) => ({ ip })), (s) => {
    s.ports = [{ name: 'dns', port: 53, protocol: 'UDP' }];
    s.metadata!.resourceVersion = rv;
  });
  const flows = `udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0
                 udp 192.168.100.61:2 -> 10.200.1.61:53 reply 10.10.1.62:53 -> 192.168.100.61:2 id=2 zone=0
                 udp 192.168.100.99:3 -> 10.200.1.99:53 reply 10.10.9.9:53 -> 192.168.100.99:3 id=3 zone=0`;

  function setup(ct: FakeConntrack, ipvs = new FakeIpvs()) {
    const log = memoryLog();
    const metrics = new Metrics();
    const clock = { now: () => 1_000_000, setTimeout: () => ({}), clearTimeout: () => undefined };
    const op = new Operator({ ...defaultProxyConfig, interfaceName: 'ipvs-op0' }, {
      ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), log, metrics, clock, conntrack: ct,
      events: { report: async () => undefined }, status: { write: async () => undefined },
      registry: new PluginRegistry(), nodeName: NODE,
      kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
    });
    op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
    return { op, log, metrics };
  }

  it('an endpoint removed deletes the entries that lead to it, once; adding one or a TCP change lists nothing', async () => {
    const ct = new FakeConntrack();
    ct.seed(flows);
    let lists = 0;
    const list = ct.list.bind(ct);
    ct.list = (f) => { lists++; return list(f); };
    const { op, log, metrics } = setup(ct);
    op.handle({ kind: 'service', type: 'upsert', object: dns() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.61'], '1') });
    await op.sync();
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.61', '10.10.1.62'], '2') });
    await op.sync();
    expect(lists).toBe(0); // nothing removed yet: no dump at all
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.62'], '3') });
    await op.sync();
    expect(lists).toBe(1);
    expect(ct.deleted).toEqual(['udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0']);
    expect(ct.dump()).not.toContain('10.10.1.61:53');
    expect(log.entries.find((e) => e.message === 'deleted stale UDP conntrack entries')?.fields).toMatchObject({ deleted: 1, alreadyGone: 0, virtualServers: 1 });
    expect(await metrics.registry.getSingleMetricAsString('ipvsop_conntrack_reconciler_deleted_entries_total')).toMatch(/_total 1$/m);
    // The Service deleted: its remaining flow goes too; the foreign VIP's stays.
    op.handle({ kind: 'service', type: 'delete', object: dns() });
    await op.sync();
    expect(ct.dump()).toBe('udp 192.168.100.99:3 -> 10.200.1.99:53 reply 10.10.9.9:53 -> 192.168.100.99:3 id=3 zone=0');
  });

  it('a deletion the kernel refuses deletes no entry: the flows still lead to a real server the kernel has', async () => {
    const ct = new FakeConntrack();
    ct.seed(flows);
    const ipvs = new FakeIpvs();
    const apply = ipvs.apply.bind(ipvs);
    let refuse = true;
    ipvs.apply = async (ops) => {
      const results = await apply(ops.filter((o) => !(refuse && o.kind === 'delete-dest')));
      return ops.map((o) => (refuse && o.kind === 'delete-dest' ? IpvsError.fromErrno(formatOp(o), Errno.EBUSY) : results.shift()));
    };
    const { op } = setup(ct, ipvs);
    op.handle({ kind: 'service', type: 'upsert', object: dns() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.61', '10.10.1.62'], '1') });
    await op.sync();
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.62'], '2') });
    await op.sync();
    expect(op.last).toMatchObject({ ops: 1, failed: 1 });
    expect(ct.deleted).toEqual([]);
    // The retry goes through: now the entry goes.
    refuse = false;
    await op.sync({ periodic: false, retry: true });
    expect(ct.deleted).toEqual(['udp 192.168.100.61:1 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:1 id=1 zone=0']);
  });

  it('a failing conntrack never fails the sync: logged and counted, the IPVS change stands', async () => {
    const ct = new FakeConntrack();
    ct.failList = ConntrackError.fromErrno('list IPv4', Errno.EPERM);
    const { op, log, metrics } = setup(ct);
    op.handle({ kind: 'service', type: 'upsert', object: dns() });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.61', '10.10.1.62'], '1') });
    await op.sync();
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(['10.10.1.62'], '2') });
    await op.sync();
    expect(op.last).toMatchObject({ ops: 1, failed: 0 });
    expect(op.last?.error).toBeUndefined();
    expect(log.entries.some((e) => e.level === 'warn' && e.message.startsWith('conntrack cleanup failed'))).toBe(true);
    expect(await metrics.registry.getSingleMetricAsString('ipvsop_conntrack_cleanup_failures_total')).toMatch(/_total 1$/m);
  });
});
