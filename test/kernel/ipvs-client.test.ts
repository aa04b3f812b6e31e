// The IPVS client against the real kernel in the lab VM, with ipvsadm as the independent oracle.
// Runs in the guest's root netns (the "node"), which belongs to this test run alone: every test
// starts from an empty table (FLUSH is never used by the operator; here it resets the lab).
// Addresses: VIPs 10.200.0.0/16 and fd00:200::/64, pods 10.10.0.0/16 and fd00:10::/64,
// clients 192.168.100.0/24 (see lab/topology.ts).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { encodeRequest, opRequest } from '../../src/ipvs/requests.js';
import { checkOp } from '../../src/ipvs/validate.js';
import { isExists, isInvalidArgument, isNotFound } from '../../src/netlink/errors.js';
import {
  type IpvsOp, type RealServer, type VirtualServer, SvcFlag, formatRealServer, formatVirtualServer, makeRealServer,
  makeVirtualServer, realServerKey, virtualServerKey,
} from '../../src/model/ipvs.js';
import { addVip, cleanupTopology, createClient, createPod, ensureNode, runLoad } from '../../lab/topology.js';
import { ipvsadm, ipvsadmRestore, ipvsadmStats, ipvsadmTable, reloadIpvs } from '../support/ipvsadm.js';
import { waitFor } from '../support/operator-process.js';
import { betweenAgreeing } from '../support/wait.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh'];

let ipvs: NetlinkIpvs;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  ipvs = await NetlinkIpvs.open();
});
beforeEach(async () => {
  await ipvs.flush();
});
afterAll(async () => {
  await ipvs.flush();
  ipvs.close();
  await cleanupTopology();
});

/** A table as sorted one-line text: services, each followed by its real servers. */
function tableText(entries: Array<{ vs: VirtualServer; dests: RealServer[] }>): string {
  return entries
    .map(({ vs, dests }) => [formatVirtualServer(vs), ...dests.map((d) => `  -> ${formatRealServer(d)}`).sort()].join('\n'))
    .sort()
    .join('\n');
}

async function ourTable(): Promise<Array<{ vs: VirtualServer; dests: RealServer[] }>> {
  const out = [];
  for (const vs of await ipvs.listVirtualServers()) out.push({ vs, dests: await ipvs.listRealServers(vs) });
  return out;
}

function opsFor(entries: Array<{ vs: VirtualServer; dests: RealServer[] }>): IpvsOp[] {
  return entries.flatMap(({ vs, dests }) => [
    { kind: 'add-service', vs } as IpvsOp,
    ...dests.map((rs) => ({ kind: 'add-dest', vs, rs }) as IpvsOp),
  ]);
}

/** What a promise rejected with (undefined when it resolved). */
const rejection = (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

const v4 = (i: number, extra: Partial<VirtualServer> = {}) =>
  makeVirtualServer({ family: 'IPv4', address: `10.200.2.${i}`, port: 80, ...extra });
const rs = (address: string, port: number, extra: Partial<RealServer> = {}) => makeRealServer({ address, port, ...extra });

describe('(a) what our client writes, ipvsadm reads back identically', () => {
  it('every scheduler the kernel has', async () => {
    const table = SCHEDULERS.map((scheduler, i) => ({
      vs: v4(i + 1, { scheduler }),
      dests: [rs(`10.10.2.${i + 1}`, 8080, { weight: i + 1 }), rs(`10.10.3.${i + 1}`, 8080)],
    }));
    const results = await ipvs.apply(opsFor(table));
    expect(results.filter(Boolean)).toEqual([]);
    expect(tableText(ipvsadmTable())).toBe(tableText(table));
    expect(tableText(await ourTable())).toBe(tableText(table));
  });

  it('persistence, netmasks, sh/mh flags, protocols, families, fwmark, forwarding, thresholds, tunnels', async () => {
    const table = [
      { vs: v4(1, { flags: SvcFlag.PERSISTENT, timeout: 10800, netmask: 0xffffff00 }), dests: [rs('10.10.2.1', 80)] },
      { vs: v4(2, { scheduler: 'sh', flags: SvcFlag.SCHED1 | SvcFlag.SCHED2 }), dests: [rs('10.10.2.2', 80, { forward: 'route' })] },
      { vs: v4(3, { scheduler: 'mh', flags: SvcFlag.SCHED1 }), dests: [rs('10.10.2.3', 80, { upperThreshold: 100, lowerThreshold: 10 })] },
      { vs: v4(4, { protocol: 'UDP', port: 53, flags: SvcFlag.ONEPACKET }), dests: [rs('10.10.2.4', 5353)] },
      { vs: v4(5, { protocol: 'SCTP', port: 3868, scheduler: 'lc' }), dests: [rs('10.10.2.5', 3868, { weight: 0 })] },
      { vs: v4(6, { protocol: 'UDP', port: 5060, flags: SvcFlag.PERSISTENT, timeout: 60, peName: 'sip' }), dests: [] },
      {
        vs: makeVirtualServer({ family: 'IPv6', address: 'fd00:200::6', port: 443, scheduler: 'sed', flags: SvcFlag.PERSISTENT, timeout: 300, netmask: 64 }),
        dests: [rs('fd00:10::6', 8443), rs('fd00:10::7', 8443, { forward: 'local', weight: 5 })],
      },
      { vs: makeVirtualServer({ family: 'IPv6', protocol: 'UDP', address: 'fd00:200::7', port: 53 }), dests: [rs('fd00:10::8', 53)] },
      { vs: makeVirtualServer({ family: 'IPv4', fwmark: 0x4001, scheduler: 'wrr' }), dests: [rs('10.10.2.9', 0, { weight: 2147483647 })] },
      { vs: makeVirtualServer({ family: 'IPv6', fwmark: 7 }), dests: [rs('fd00:10::9', 0)] },
      {
        vs: v4(10),
        dests: [
          rs('10.10.2.10', 80, { forward: 'tunnel', tunnelType: 'gue', tunnelPort: 6080, tunnelFlags: 1 }),
          rs('10.10.2.11', 80, { forward: 'tunnel', tunnelType: 'gre' }),
          rs('fd00:10::10', 80, { forward: 'tunnel', tunnelType: 'ipip' }),
        ],
      },
    ];
    const results = await ipvs.apply(opsFor(table));
    expect(results.filter(Boolean)).toEqual([]);
    expect(tableText(ipvsadmTable())).toBe(tableText(table));
  });

  it('update-service and update-dest change what ipvsadm shows, and nothing else', async () => {
    const vs = v4(1);
    const dest = rs('10.10.2.1', 80);
    await ipvs.apply([{ kind: 'add-service', vs }, { kind: 'add-dest', vs, rs: dest }]);
    const vs2 = { ...vs, scheduler: 'sh', flags: SvcFlag.PERSISTENT | SvcFlag.SCHED2, timeout: 30 };
    const dest2 = { ...dest, weight: 7, upperThreshold: 9 };
    expect((await ipvs.apply([{ kind: 'update-service', vs: vs2 }, { kind: 'update-dest', vs: vs2, rs: dest2 }])).filter(Boolean)).toEqual([]);
    expect(tableText(ipvsadmTable())).toBe(tableText([{ vs: vs2, dests: [dest2] }]));
  });
});

describe('(b) what ipvsadm writes, our client dumps identically', () => {
  it('a table loaded with ipvsadm -R', async () => {
    ipvsadmRestore([
      '-A -t 10.200.2.1:80 -s wrr',
      '-a -t 10.200.2.1:80 -r 10.10.2.1:8080 -m -w 3',
      '-a -t 10.200.2.1:80 -r 10.10.2.2:8080 -g -w 1 -x 50 -y 5',
      '-A -u 10.200.2.2:53 -s sh -b sh-fallback,sh-port -p 120 -M 255.255.0.0 -o',
      '-a -u 10.200.2.2:53 -r 10.10.2.3:5353 -m -w 0',
      '-A --sctp-service 10.200.2.3:3868 -s nq',
      '-A -t [fd00:200::3]:80 -s mh -b mh-port -p 60 -M 96',
      '-a -t [fd00:200::3]:80 -r [fd00:10::3]:80 -m -w 2',
      '-A -f 99 -s lblcr',
      '-a -f 99 -r 10.10.2.4:0 -i -w 1 --tun-type gue --tun-port 5555 --tun-nocsum',
      '-A -f 100 -6 -s dh',
      '',
    ].join('\n'));
    const theirs = ipvsadmTable();
    expect(theirs).toHaveLength(6);
    expect(tableText(await ourTable())).toBe(tableText(theirs));
  });
});

describe('(c) real traffic through a virtual server created by our client', () => {
  const vip = '10.200.1.10';
  const vs = makeVirtualServer({ family: 'IPv4', address: vip, port: 80 });
  const pods = ['10.10.1.11', '10.10.1.12', '10.10.1.13'];
  const dests = pods.map((ip) => rs(ip, 80));

  beforeAll(async () => {
    await ensureNode();
    await addVip(vip);
    await Promise.all(pods.map((ip, i) => createPod({ name: `web${i + 1}`, ip })));
    await createClient({ name: 'client1', ip: '192.168.100.10' });
  }, 120_000);

  it('rr spreads 30 sequential requests 10/10/10, wrr 3:2:1 gives 15/10/5', async () => {
    await ipvs.apply([{ kind: 'add-service', vs }, ...dests.map((d) => ({ kind: 'add-dest', vs, rs: d }) as IpvsOp)]);
    const rr = await runLoad({ client: 'client1', url: `http://${vip}/`, count: 30 });
    expect(rr.errors).toBe(0);
    expect(rr.byPod).toEqual({ web1: 10, web2: 10, web3: 10 });
    // Without SNAT every pod saw the client's own address.
    expect(rr.byPeer).toEqual({ '192.168.100.10': 30 });

    const wrr = { ...vs, scheduler: 'wrr' };
    await ipvs.apply([
      { kind: 'update-service', vs: wrr },
      ...dests.map((d, i) => ({ kind: 'update-dest', vs: wrr, rs: { ...d, weight: 3 - i } }) as IpvsOp),
    ]);
    const w = await runLoad({ client: 'client1', url: `http://${vip}/`, count: 30 });
    expect(w.errors).toBe(0);
    expect(w.byPod).toEqual({ web1: 15, web2: 10, web3: 5 });

    // (b, counters) after real traffic, our dump's stats and connection counters equal ipvsadm's.
    // The kernel folds its per-CPU counters into what it reports every 2 s (estimation timer), a
    // timer a busy guest can run late: wait until a fold counted all 60 connections, then compare
    // our read with ipvsadm's reads before and after it when those two agree (no fold between).
    await waitFor('the 60 connections folded in', () => ipvsadmStats().get(virtualServerKey(vs))?.service[0] === 60n, 30_000, 250);
    const folded = await betweenAgreeing(() => ipvsadmStats().get(virtualServerKey(vs))!, () => ipvs.listVirtualServers());
    const theirs = folded.fence;
    const ours = folded.got[0];
    const s = ours!.stats!;
    expect([s.conns, s.inPkts, s.outPkts, s.inBytes, s.outBytes]).toEqual(theirs.service);
    expect(s.conns).toBe(60n);
    for (const d of await ipvs.listRealServers(ours!)) {
      const t = theirs.dests.get(realServerKey(d))!;
      expect([d.stats!.conns, d.stats!.inPkts, d.stats!.outPkts, d.stats!.inBytes, d.stats!.outBytes]).toEqual(t);
    }
    // Connection counters move while reads are made: the kernel's timers end a connection's
    // TIME_WAIT (2 min) or CLOSE (10 s) at any moment, and a CI run saw an inactive count drop
    // between two reads. So each comparison takes its reads between two reads of ours that agree.
    const counts = (l: RealServer[]) => l.map((d) => [realServerKey(d), d.activeConns, d.inactiveConns, d.persistentConns]).sort();
    const settled = async <T>(read: () => Promise<T> | T): Promise<{ mine: RealServer[]; got: T }> => {
      const { fence, got } = await betweenAgreeing(() => ipvs.listRealServers(ours!), read, counts);
      return { mine: fence, got };
    };
    const listed = await settled(() => ipvsadmTable()[0]!.dests);
    expect(listed.mine.map((d) => [realServerKey(d), d.activeConns, d.inactiveConns]).sort())
      .toEqual(listed.got.map((d) => [realServerKey(d), d.activeConns, d.inactiveConns]).sort());
    expect(listed.mine.reduce((n, d) => n + (d.activeConns ?? 0) + (d.inactiveConns ?? 0), 0)).toBeGreaterThan(0);

    // (b, without counters) ReadOptions.stats false, as the sync's copy reads: the same entries and
    // connection counts, no STATS decoded, by each of the four reads.
    const bare = <T extends { stats?: unknown }>(x: T) => { const { stats, ...rest } = x; expect(stats).toBeDefined(); return rest; };
    const none = { stats: false };
    const sorted = (rs: RealServer[]) => [...rs].sort((a, b) => realServerKey(a).localeCompare(realServerKey(b)));
    const reads = await settled(async () => ({
      list: await ipvs.listVirtualServers(none),
      get: await ipvs.getVirtualServers([ours!], none),
      dests: sorted(await ipvs.listRealServers(ours!, none)),
      many: (await ipvs.listRealServersMany([ours!], none)).map((l) => sorted(l as RealServer[])),
    }));
    const want = sorted(reads.mine).map(bare);
    expect(reads.got).toStrictEqual({ list: [bare(ours!)], get: [bare(ours!)], dests: want, many: [want] });
  }, 120_000);
});

describe('(d) errors are typed', () => {
  const vs = v4(1);
  const dest = rs('10.10.2.1', 80);

  it('duplicate add is isExists, for services and destinations', async () => {
    await ipvs.addVirtualServer(vs);
    await ipvs.addRealServer(vs, dest);
    expect(isExists(await rejection(ipvs.addVirtualServer(vs)))).toBe(true);
    expect(isExists(await rejection(ipvs.addRealServer(vs, dest)))).toBe(true);
  });

  it('deleting or updating what is missing is isNotFound', async () => {
    await ipvs.addVirtualServer(vs);
    expect(isNotFound(await rejection(ipvs.deleteRealServer(vs, dest)))).toBe(true);
    expect(isNotFound(await rejection(ipvs.updateRealServer(vs, dest)))).toBe(true);
    expect(isNotFound(await rejection(ipvs.deleteVirtualServer(v4(99))))).toBe(true);
    expect(isNotFound(await rejection(ipvs.addRealServer(v4(99), dest)))).toBe(true);
    await expect(ipvs.listRealServers(v4(99))).resolves.toEqual([]);
  });

  it('an unknown scheduler is refused with an error naming it', async () => {
    const err = await ipvs.addVirtualServer(v4(2, { scheduler: 'nosuch' })).catch((e: unknown) => e);
    expect(isNotFound(err)).toBe(true);
    expect(String((err as Error).message)).toContain('"nosuch"');
    expect(await ipvs.listVirtualServers()).toEqual([]);
  });

  it('bad arguments are refused before the kernel sees them, each with its own message', async () => {
    const bad: IpvsOp[] = [
      { kind: 'add-service', vs: v4(3, { address: 'fd00::1' }) },
      { kind: 'add-service', vs: v4(3, { port: 70000 }) },
      { kind: 'add-service', vs: v4(3, { scheduler: 'a-very-long-scheduler' }) },
      { kind: 'add-service', vs: v4(3, { netmask: 0xff00ff00, flags: SvcFlag.PERSISTENT }) },
      { kind: 'add-dest', vs: v4(3), rs: rs('10.10.2.1', 80, { weight: -1 }) },
      { kind: 'add-dest', vs: v4(3), rs: rs('fd00:10::1', 80) },
      { kind: 'add-service', vs: v4(4) },
    ];
    const results = await ipvs.apply(bad);
    expect(results.slice(0, 6).every(isInvalidArgument)).toBe(true);
    expect(results.map((r) => r?.message ?? 'ok')).toEqual([
      expect.stringContaining('"fd00::1" is not an IPv4 address'),
      expect.stringContaining('port 70000'),
      expect.stringContaining('scheduler "a-very-long-scheduler"'),
      expect.stringContaining('not a contiguous mask'),
      expect.stringContaining('weight -1'),
      expect.stringContaining('needs forwarding "tunnel"'),
      'ok',
    ]);
    // Only the valid op reached the kernel.
    expect((await ipvs.listVirtualServers()).map(virtualServerKey)).toEqual(['TCP 10.200.2.4:80']);
  });
});

describe('(d2) a batch answers for each op, though only the last of a datagram asks for an ACK', () => {
  // CHUNK (128) messages go in one datagram and only its last asks for an ACK: a failure elsewhere
  // is the kernel's only answer to that message. Failures here: a whole datagram of them (its last
  // one too), one in the middle of a datagram of successes, and the batch's very last op.
  it('every failure is reported at its own op, every other op is applied', async () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.3.2', port: 80 });
    const dests = Array.from({ length: 300 }, (_, i) => rs(`10.12.${Math.floor(i / 250)}.${(i % 250) + 1}`, 80));
    const add = (d: RealServer): IpvsOp => ({ kind: 'add-dest', vs, rs: d });
    expect((await ipvs.apply([{ kind: 'add-service', vs }, ...dests.slice(0, 150).map(add)])).filter(Boolean)).toEqual([]);

    const absent = rs('10.12.9.9', 80);
    const ops: IpvsOp[] = [...dests.map(add), { kind: 'add-dest', vs, rs: dests[0]! }];
    ops.splice(200, 0, { kind: 'delete-dest', vs, rs: absent });
    const results = await ipvs.apply(ops);
    const kinds = results.map((r) => (r === undefined ? 'ok' : isExists(r) ? 'EEXIST' : isNotFound(r) ? 'ENOENT' : String(r)));
    const expected = ops.map((_, i) => (i < 150 || i === ops.length - 1 ? 'EEXIST' : i === 200 ? 'ENOENT' : 'ok'));
    expect(kinds).toEqual(expected);
    expect(results[200]?.message).toContain('10.12.9.9');
    const dumped = await ipvs.listRealServers(vs);
    expect(new Set(dumped.map(realServerKey))).toEqual(new Set(dests.map(realServerKey)));
  });
});

describe('(d3) encode: the messages apply would send, and nothing sent', () => {
  // The operator's first sync runs a change's code once (sync/rehearsal.ts), the ops' encoding
  // included, and must leave the kernel as it was.
  it('equals each op\'s request as encodeRequest builds it, skips what checkOp refuses, and the table stays', async () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.3.3', port: 80 });
    const [a, b] = [rs('10.12.0.1', 80), rs('10.12.0.2', 80)];
    expect((await ipvs.apply([{ kind: 'add-service', vs }, { kind: 'add-dest', vs, rs: a }, { kind: 'add-dest', vs, rs: b }]))
      .filter(Boolean)).toEqual([]);
    const before = ipvsadm('-Sn');
    const ops: IpvsOp[] = [
      { kind: 'update-dest', vs, rs: { ...a, weight: 5 } }, { kind: 'add-dest', vs, rs: rs('10.12.0.1', 81) },
      { kind: 'add-dest', vs, rs: rs('not an address', 80) }, { kind: 'delete-dest', vs, rs: b },
      { kind: 'update-service', vs: { ...vs, scheduler: 'wrr' } }, { kind: 'delete-service', vs },
    ];
    const sent = ops.filter((op) => !checkOp(op));
    expect(sent).toHaveLength(5);
    const expected = Buffer.concat(sent.map((op, seq) => encodeRequest(ipvs.familyId!, opRequest(op), seq, 0)));
    expect(ipvs.encode(ops).equals(expected)).toBe(true);
    expect(ipvsadm('-Sn')).toBe(before);
    // The same ops applied do change it: the messages are ones the kernel takes.
    expect((await ipvs.apply(ops.slice(0, 2))).filter(Boolean)).toEqual([]);
    expect(ipvsadm('-Sn')).not.toBe(before);
  });
});

describe('(e) a pipelined batch of 10 000 destination adds', () => {
  it('completes, the dump shows all 10 000, and the time is printed against ipvsadm -R', async () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.3.1', port: 80 });
    const dests = Array.from({ length: 10_000 }, (_, i) => rs(`10.11.${Math.floor(i / 250)}.${(i % 250) + 1}`, 80));
    const ops: IpvsOp[] = [{ kind: 'add-service', vs }, ...dests.map((d) => ({ kind: 'add-dest', vs, rs: d }) as IpvsOp)];

    // Each load starts from ip_vs loaded again: a flush leaves every real server in the kernel's
    // trash, which each later add-dest walks, so the second load would pay for the first.
    reloadIpvs();
    ipvs.close();
    ipvs = await NetlinkIpvs.open();
    const t0 = process.hrtime.bigint();
    const results = await ipvs.apply(ops);
    const oursMs = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(results.filter(Boolean)).toEqual([]);
    const dumped = await ipvs.listRealServers(vs);
    expect(dumped).toHaveLength(10_000);
    expect(new Set(dumped.map(realServerKey))).toEqual(new Set(dests.map(realServerKey)));

    reloadIpvs();
    const script = ['-A -t 10.200.3.1:80 -s rr', ...dests.map((d) => `-a -t 10.200.3.1:80 -r ${d.address}:80 -m -w 1`), ''].join('\n');
    const t1 = process.hrtime.bigint();
    ipvsadmRestore(script);
    const theirsMs = Number(process.hrtime.bigint() - t1) / 1e6;
    expect(ipvsadm('-Ln').split('\n').filter((l) => l.includes('->') && !l.includes('Remote'))).toHaveLength(10_000);
    console.log(`BENCH ipvs pipelined 10000 dest adds: ours ${oursMs.toFixed(0)} ms, ipvsadm -R ${theirsMs.toFixed(0)} ms, ratio ${(oursMs / theirsMs).toFixed(2)}`);
    ipvs.close();
    ipvs = await NetlinkIpvs.open(); // the family id changed with the reload
  }, 300_000);
});
