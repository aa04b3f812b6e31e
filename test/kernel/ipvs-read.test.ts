// The batched read of real servers (listRealServersMany, the dump pool) on the real kernel, with
// ipvsadm as the oracle: the shared contract (test/support/ipvs-read-contract.ts, FakeIpvs in the
// unit run), a table of hundreds of virtual servers (one with enough real servers to take several
// datagrams), virtual servers deleted before and during a read, a pool socket that fails, and the
// drift check looking virtual servers up in turn (GET_SERVICE) after ipvsadm changed the table.
// Addresses: VIPs 10.200.5.0/24, 10.200.6.0/24 and fd00:205::/64, pods 10.10.0.0/15, fd00:15::/64.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { IpvsError } from '../../src/ipvs/errors.js';
import { readTable } from '../../src/ipvs/read.js';
import { GenlSocket } from '../../src/ipvs/socket.js';
import { DUMP_SOCKETS } from '../../src/ipvs/dump-pool.js';
import { TableCache } from '../../src/sync/table-cache.js';
import { type RealServer, type VirtualServer, virtualServerKey } from '../../src/model/ipvs.js';
import { ipvsadmRestore, ipvsadmTable } from '../support/ipvsadm.js';
import { GET_EXPECTED, READ_EXPECTED, answerText, readCase } from '../support/ipvs-read-contract.js';
import { LISTING_BLOCKS, LISTING_PARSED, listingCase } from '../support/ipvs-listing-contract.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const sockets: GenlSocket[] = [];
let ipvs: NetlinkIpvs;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  ipvs = await NetlinkIpvs.open({ openSocket: () => { const s = new GenlSocket(); sockets.push(s); return s; } });
});
beforeEach(async () => {
  await ipvs.flush();
});
afterAll(async () => {
  await ipvs.flush();
  ipvs.close();
});

/** 300 virtual servers on 10.200.6.x:80 with i % 7 real servers, and 10.200.5.200:80 with 600. */
function loadTable(): void {
  const lines: string[] = [];
  for (let i = 0; i < 300; i++) {
    lines.push(`-A -t 10.200.6.${i % 250}:${80 + Math.floor(i / 250)} -s rr`);
    for (let j = 0; j < i % 7; j++) lines.push(`-a -t 10.200.6.${i % 250}:${80 + Math.floor(i / 250)} -r 10.10.${i % 250}.${10 * Math.floor(i / 250) + j + 1}:8080 -m -w ${j}`);
  }
  lines.push('-A -t 10.200.5.200:80 -s wrr');
  for (let j = 0; j < 600; j++) lines.push(`-a -t 10.200.5.200:80 -r 10.11.${j >> 8}.${j & 255}:80 -m -w 1`);
  ipvsadmRestore(`${lines.join('\n')}\n`);
}

/** Runs ipvsadm with these arguments (throws on a non-zero exit). */
function ipvsadm_(...args: string[]): void {
  execFileSync('ipvsadm', args);
}

/** A table as one sorted line per virtual server: key, then its real servers (address, weight, method). */
function lines(entries: Array<{ vs: VirtualServer; dests: readonly RealServer[] }>): string[] {
  return entries.map(({ vs, dests }) => `${virtualServerKey(vs)} ${vs.scheduler} -> ` +
    dests.map((d) => `${d.address}:${d.port} w=${d.weight} ${d.forward}`).sort().join(', ')).sort();
}

async function ours(): Promise<string[]> {
  return lines([...(await readTable(ipvs)).values()].map((e) => ({ vs: e.vs, dests: [...e.dests.values()] })));
}

describe('listRealServersMany and getVirtualServers on the kernel', () => {
  it('answers each virtual server as listRealServers and the dump do (the contract FakeIpvs answers too)', async () => {
    const { seedErrors, many, single, gets, getsAsDumped } = await readCase(ipvs);
    expect(seedErrors).toEqual([]);
    expect(many).toEqual(READ_EXPECTED);
    expect(single).toEqual(READ_EXPECTED);
    expect(gets).toEqual(GET_EXPECTED);
    expect(getsAsDumped).toEqual([true, true, true, true, true]);
  });

  it('/proc/net/ip_vs lists the table as FakeIpvs writes it; a full read through it holds what the dumps hold', async () => {
    const r = await listingCase(ipvs, () => readFile('/proc/net/ip_vs', 'latin1'));
    expect(r.seedErrors).toEqual([]);
    expect(r.header).toEqual([
      'IP Virtual Server version 1.2.1 (size=4096)',
      'Prot LocalAddress:Port Scheduler Flags',
      '  -> RemoteAddress:Port Forward Weight ActiveConn InActConn',
    ]);
    expect(r.blocks).toEqual(LISTING_BLOCKS);
    expect(r.parsed).toEqual(LISTING_PARSED);
    expect(r.throughListing).toEqual(r.dumped);
    expect(r.lastFullRead).toEqual({ listed: 4, dumped: 3, listing: true });
  });

  it('reads hundreds of virtual servers, one of 600 real servers, as ipvsadm lists them', async () => {
    loadTable();
    const oracle = lines(ipvsadmTable());
    expect(oracle).toHaveLength(301);
    expect(oracle.find((l) => l.startsWith('TCP 10.200.5.200:80'))!.split(', ')).toHaveLength(600);
    expect(await ours()).toEqual(oracle);
  });

  it('a full read through /proc/net/ip_vs holds hundreds of virtual servers, one of 600 real servers, as ipvsadm lists them', async () => {
    loadTable();
    const listed = ipvsadmTable();
    const desired = new Map(listed.map((e) => [virtualServerKey(e.vs), e]));
    const cache = new TableCache();
    await cache.readAll(ipvs, undefined, desired as never);
    // The listing from the start and dumps from the end, until they meet: both took a part.
    const how = cache.lastFullRead!;
    expect([how.listed + how.dumped, how.listing, how.listed > 0, how.dumped > 0]).toEqual([301, true, true, true]);
    expect(cache.realServers).toBe(listed.reduce((n, e) => n + e.dests.length, 0));
    expect(lines([...cache.view.values()].map((e) => ({ vs: e.vs, dests: [...e.dests.values()] })))).toEqual(lines(listed));
  });

  it('looks up each of hundreds of virtual servers as ipvsadm lists them, ESRCH once ipvsadm deleted one', async () => {
    loadTable();
    const oracle = ipvsadmTable().map((e) => `${virtualServerKey(e.vs)} ${e.vs.scheduler}`).sort();
    expect(oracle).toHaveLength(301);
    // Asked from the keys alone (scheduler and flags not given): the kernel's answer fills them in.
    const asked = ipvsadmTable().map((e) => ({ ...e.vs, scheduler: 'sh', flags: 0 }));
    const got = await ipvs.getVirtualServers(asked);
    expect(got.map((g) => (g instanceof IpvsError ? g.code : `${virtualServerKey(g)} ${g.scheduler}`)).sort()).toEqual(oracle);
    execFileSync('ipvsadm', ['-D', '-t', '10.200.5.200:80']);
    const [gone, kept] = await ipvs.getVirtualServers([
      asked.find((v) => v.address === '10.200.5.200')!, asked.find((v) => v.address === '10.200.6.1')!,
    ]);
    expect(gone).toBeInstanceOf(IpvsError);
    expect((gone as IpvsError).code).toBe('ESRCH');
    expect(kept).toMatchObject({ address: '10.200.6.1', port: 80, scheduler: 'rr' });
  });

  it('the drift check in turn (lookups, not the dump) finds what ipvsadm changed, and the copy lists as ipvsadm does', async () => {
    loadTable();
    const cache = new TableCache();
    // The full read's dump timed on a clock that moves 10 s per reading: 33 ms per virtual server,
    // so a dump of the 301 would be past half of the 10 s budget below and the check looks them up.
    let fake = 0;
    await cache.readAll(ipvs, () => (fake += 10_000));
    ipvsadm_('-E', '-t', '10.200.6.7:80', '-s', 'wlc');
    ipvsadm_('-D', '-t', '10.200.6.9:80');
    ipvsadm_('-d', '-t', '10.200.5.200:80', '-r', '10.11.0.5:80');
    const t0 = performance.now();
    const { mode, inTurn, reread } = await cache.verify(ipvs, 10_000, () => performance.now());
    // Under 10 s of real time (it stops at the budget otherwise): every virtual server read once.
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(mode).toBe('in-turn');
    expect(inTurn).toBe(301);
    for (const key of ['TCP 10.200.6.7:80', 'TCP 10.200.6.9:80', 'TCP 10.200.5.200:80']) expect(reread.has(key)).toBe(true);
    const copy = lines([...cache.view.values()].map((e) => ({ vs: e.vs, dests: [...e.dests.values()] })));
    expect(copy).toEqual(lines(ipvsadmTable()));
    expect(copy).toHaveLength(300);
    expect(copy.find((l) => l.startsWith('TCP 10.200.6.7:80 '))).toMatch(/^TCP 10.200.6.7:80 wlc -> /);
  });

  it('answers an empty list for a virtual server deleted before or while the batch reads', async () => {
    loadTable();
    const vss = await ipvs.listVirtualServers();
    const before = new Map((await ipvs.listRealServersMany(vss)).map((d, i) => [virtualServerKey(vss[i]!), answerText(d)]));
    // Deleted between the virtual server dump and the batch: the kernel's dump cannot tell, so empty.
    execFileSync('ipvsadm', ['-D', '-t', '10.200.5.200:80']);
    // Deleted while the batch reads: each answer is then the old list or empty, never an error.
    const going = vss.filter((v) => v.address.startsWith('10.200.6.')).slice(-20);
    const deleting = Promise.all(going.map((v) => promisify(execFile)('ipvsadm', ['-D', '-t', `${v.address}:${v.port}`])));
    const read = await ipvs.listRealServersMany(vss);
    await deleting;
    const goingKeys = new Set(going.map(virtualServerKey));
    read.forEach((d, i) => {
      const key = virtualServerKey(vss[i]!);
      if (key === 'TCP 10.200.5.200:80') expect(d).toEqual([]);
      else if (goingKeys.has(key)) expect(['', before.get(key)]).toContain(answerText(d));
      else expect(answerText(d)).toBe(before.get(key));
    });
    // The deletions happened: ipvsadm no longer lists them.
    const left = new Set(ipvsadmTable().map((e) => virtualServerKey(e.vs)));
    expect([...goingKeys, 'TCP 10.200.5.200:80'].filter((k) => left.has(k))).toEqual([]);
  });

  it('rejects when a pool socket fails, is unhealthy until the next batch works on new sockets', async () => {
    loadTable();
    const vss = await ipvs.listVirtualServers();
    await ipvs.listRealServersMany(vss);
    const pool = sockets.filter((s) => !s.failed).slice(-DUMP_SOCKETS);
    expect(pool).toHaveLength(DUMP_SOCKETS);
    const opened = sockets.length;
    // Close one pool socket's descriptor behind GenlSocket's back, as a dead socket would be.
    (pool[3] as unknown as { raw: { close(): void } }).raw.close();
    const failed = await ipvs.listRealServersMany(vss).then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(IpvsError);
    expect(ipvs.health()).toMatchObject({ ok: false });
    expect(pool.every((s) => s.failed)).toBe(true);
    expect(await ours()).toEqual(lines(ipvsadmTable()));
    expect(sockets.length).toBe(opened + DUMP_SOCKETS);
    expect(ipvs.health()).toMatchObject({ ok: true });
  });
});
