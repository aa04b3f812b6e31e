// The sync's copy of the table (TableCache, full-read.ts) and the dry run's read the kernel without
// its traffic counters (ReadOptions.stats false, COPY_READ): they use none, and a real server
// decoded with them holds three times the heap (docs/performance.md). The client here answers as
// the kernel client does: with counters on every entry unless asked for none; every read is noted.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import type { IpvsClient, ReadOptions } from '../../../src/ipvs/types.js';
import type { IpvsError } from '../../../src/ipvs/errors.js';
import {
  type IpvsOp, type IpvsStats, type RealServer, type VirtualServer, makeRealServer, makeVirtualServer, virtualServerKey,
} from '../../../src/model/ipvs.js';
import { TableCache } from '../../../src/sync/table-cache.js';
import { DryRunIpvs } from '../../../src/sync/dry-run.js';

const STATS: IpvsStats = {
  conns: 7n, inPkts: 1n, outPkts: 1n, inBytes: 60n, outBytes: 60n, cps: 0n, inPps: 0n, outPps: 0n, inBps: 0n, outBps: 0n,
};

/**
 * FakeIpvs (which keeps no counters) whose reads carry them as the kernel's do, unless `opts.stats`
 * is false; each read's options noted.
 */
function countingKernel(fake: FakeIpvs): { ipvs: IpvsClient; reads: Array<{ call: string; stats: boolean | undefined }> } {
  const reads: Array<{ call: string; stats: boolean | undefined }> = [];
  const add = <T extends object>(x: T, opts?: ReadOptions): T => (opts?.stats === false ? x : { ...x, stats: STATS });
  const ipvs = Object.assign(Object.create(fake) as FakeIpvs, {
    listVirtualServers: async (opts?: ReadOptions) => {
      reads.push({ call: 'listVirtualServers', stats: opts?.stats });
      return (await fake.listVirtualServers()).map((vs) => add(vs, opts));
    },
    listRealServers: async (vs: VirtualServer, opts?: ReadOptions) => {
      reads.push({ call: 'listRealServers', stats: opts?.stats });
      return (await fake.listRealServers(vs)).map((rs) => add(rs, opts));
    },
    listRealServersMany: async (vss: readonly VirtualServer[], opts?: ReadOptions) => {
      reads.push({ call: 'listRealServersMany', stats: opts?.stats });
      return (await fake.listRealServersMany(vss)).map((l) => (Array.isArray(l) ? l.map((rs) => add(rs, opts)) : l));
    },
    getVirtualServers: async (vss: readonly VirtualServer[], opts?: ReadOptions) => {
      reads.push({ call: 'getVirtualServers', stats: opts?.stats });
      return (await fake.getVirtualServers(vss)).map((r) => ('family' in r ? add(r, opts) : r as IpvsError));
    },
    listing: async () => undefined,
  });
  return { ipvs, reads };
}

function table(n: number): { fake: FakeIpvs; vss: VirtualServer[] } {
  const fake = new FakeIpvs();
  const ops: IpvsOp[] = [];
  const vss: VirtualServer[] = [];
  for (let i = 0; i < n; i++) {
    const vs = makeVirtualServer({ family: 'IPv4', address: `10.200.0.${i + 1}`, port: 80 });
    vss.push(vs);
    ops.push({ kind: 'add-service', vs });
    for (const j of [1, 2]) ops.push({ kind: 'add-dest', vs, rs: makeRealServer({ address: `10.10.${i}.${j}`, port: 8080 }) });
  }
  void fake.apply(ops);
  return { fake, vss };
}

function entries(cache: TableCache): Array<VirtualServer | RealServer> {
  return [...cache.view.values()].flatMap((e) => [e.vs, ...e.dests.values()]);
}

describe('the copy of the table reads no traffic counters', () => {
  it('a full read, a drift check in both modes, a re-read and a retry\'s lookups: every read asks for none', async () => {
    const { fake, vss } = table(6);
    const { ipvs, reads } = countingKernel(fake);
    const cache = new TableCache();
    await cache.readAll(ipvs, () => 0);
    expect(entries(cache)).toHaveLength(18);
    let now = 0;
    expect((await cache.verify(ipvs, 3000, () => (now += 1))).mode).toBe('whole');
    // Past the dump's share of its budget (a dump cost 1/6 ms per virtual server): lookups in turn.
    expect((await cache.verify(ipvs, 0.001, () => (now += 1000))).mode).toBe('in-turn');
    await cache.readSome(ipvs, [virtualServerKey(vss[0]!)]);
    await cache.refresh(ipvs, new Set([virtualServerKey(vss[1]!)]));
    expect(new Set(reads.map((r) => r.call))).toEqual(
      new Set(['listVirtualServers', 'listRealServersMany', 'getVirtualServers']));
    expect(reads.filter((r) => r.stats !== false)).toEqual([]);
    expect(entries(cache).filter((x) => x.stats !== undefined)).toEqual([]);
    expect(entries(cache)).toHaveLength(18);
  });

  it('a read not told otherwise still carries them (the metrics, the cluster view)', async () => {
    const { fake, vss } = table(1);
    const { ipvs, reads } = countingKernel(fake);
    expect((await ipvs.listRealServers(vss[0]!))[0]!.stats).toEqual(STATS);
    expect(reads).toEqual([{ call: 'listRealServers', stats: undefined }]);
  });

  it('the dry run\'s copy of the node\'s table is read without them', async () => {
    const { fake, vss } = table(2);
    const { ipvs, reads } = countingKernel(fake);
    const dry = new DryRunIpvs(ipvs, () => undefined);
    const rss = await dry.listRealServers(vss[1]!);
    expect(rss).toHaveLength(2);
    expect(rss.filter((rs) => rs.stats !== undefined)).toEqual([]);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.filter((r) => r.stats !== false)).toEqual([]);
  });
});
