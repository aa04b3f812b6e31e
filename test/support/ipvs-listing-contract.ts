// The listing's contract: what /proc/net/ip_vs shows of a table, line for line (Debian 6.1's
// ip_vs_info_seq_show), what parseProcListing takes from it, and what a full read through the
// listing (TableCache.readAll with a desired table) holds: the same as one that dumps every virtual
// server, where the listing shows the real servers in full. Run against FakeIpvs in the unit run
// (test/unit/ipvs/proc.test.ts) and NetlinkIpvs on the kernel (test/kernel/ipvs-read.test.ts).
// Addresses: VIPs 10.200.6.0/24 and fd00:206::/64, pods 10.10.6.0/24 and fd00:16::/64.
import type { IpvsClient } from '../../src/ipvs/types.js';
import { parseProcListing } from '../../src/ipvs/proc.js';
import {
  type IpvsOp, type IpvsTable, type RealServer, SCHED_SH_FALLBACK, SCHED_SH_PORT, SvcFlag, type VirtualServer,
  formatRealServer, makeRealServer, makeVirtualServer, virtualServerKey,
} from '../../src/model/ipvs.js';
import type { DesiredTable } from '../../src/model/desired.js';
import { TableCache } from '../../src/sync/table-cache.js';

const a = makeVirtualServer({ family: 'IPv4', address: '10.200.6.1', port: 80 });
const b = makeVirtualServer({
  family: 'IPv4', protocol: 'UDP', address: '10.200.6.2', port: 53, scheduler: 'sh',
  flags: SCHED_SH_FALLBACK | SCHED_SH_PORT | SvcFlag.ONEPACKET,
});
const c = makeVirtualServer({
  family: 'IPv4', address: '10.200.6.3', port: 443, scheduler: 'wlc', flags: SvcFlag.PERSISTENT, timeout: 300,
  netmask: 0xffffff00,
});
const d = makeVirtualServer({
  family: 'IPv6', address: 'fd00:206::1', port: 80, scheduler: 'lc', flags: SvcFlag.PERSISTENT, timeout: 60, netmask: 128,
});
const e = makeVirtualServer({ family: 'IPv4', protocol: 'SCTP', address: '10.200.6.4', port: 9 });
const f = makeVirtualServer({ family: 'IPv4', fwmark: 17 });
const g = makeVirtualServer({ family: 'IPv6', fwmark: 17 });
const thresholds = makeRealServer({ address: '10.10.6.4', port: 8080, upperThreshold: 10, lowerThreshold: 2 });

/** `a` with masq, route, tunnel and thresholds; `c` and `d` with one each; `f` (a mark) with one. */
export const LISTING_SEED: readonly IpvsOp[] = [
  { kind: 'add-service', vs: a },
  { kind: 'add-dest', vs: a, rs: makeRealServer({ address: '10.10.6.1', port: 8080, weight: 3 }) },
  { kind: 'add-dest', vs: a, rs: makeRealServer({ address: '10.10.6.2', port: 80, weight: 0, forward: 'route' }) },
  { kind: 'add-dest', vs: a, rs: makeRealServer({ address: '10.10.6.3', port: 80, forward: 'tunnel' }) },
  { kind: 'add-dest', vs: a, rs: thresholds },
  { kind: 'add-service', vs: b },
  { kind: 'add-service', vs: c },
  { kind: 'add-dest', vs: c, rs: makeRealServer({ address: '10.10.6.5', port: 443, weight: 65535 }) },
  { kind: 'add-service', vs: d },
  { kind: 'add-dest', vs: d, rs: makeRealServer({ address: 'fd00:16::5', port: 80 }) },
  { kind: 'add-service', vs: e },
  { kind: 'add-service', vs: f },
  { kind: 'add-dest', vs: f, rs: makeRealServer({ address: '10.10.6.9', port: 0, forward: 'route' }) },
  { kind: 'add-service', vs: g },
];

/** The listing's blocks (a virtual server's line and its real servers' lines, in the kernel's order), sorted. */
export const LISTING_BLOCKS: readonly string[] = [
  'FWM  00000011 rr ',
  'FWM  00000011 rr \n  -> 0A0A0609:0000      Route   1      0          0         ',
  'SCTP  0AC80604:0009 rr  ',
  'TCP  0AC80601:0050 rr  \n'
    + '  -> 0A0A0604:1F90      Masq    1      0          0         \n'
    + '  -> 0A0A0603:0050      Tunnel  1      0          0         \n'
    + '  -> 0A0A0602:0050      Route   0      0          0         \n'
    + '  -> 0A0A0601:1F90      Masq    3      0          0         ',
  'TCP  0AC80603:01BB wlc  persistent 75000 FFFFFF00\n  -> 0A0A0605:01BB      Masq    65535  0          0         ',
  'TCP  [fd00:0206:0000:0000:0000:0000:0000:0001]:0050 lc persistent 15000 80000000\n'
    + '  -> [fd00:0016:0000:0000:0000:0000:0000:0005]:0050      Masq    1      0          0         ',
  'UDP  0AC80602:0035 sh ops  ',
];

/** What parseProcListing takes from it: address-keyed virtual servers only, as answerText writes them. */
export const LISTING_PARSED: readonly string[] = [
  'SCTP 10.200.6.4:9: ',
  'TCP 10.200.6.1:80: 10.10.6.1:8080 w=3 masq | 10.10.6.2:80 w=0 route | 10.10.6.3:80 w=1 tunnel tun=ipip'
    + ' | 10.10.6.4:8080 w=1 masq',
  'TCP 10.200.6.3:443: 10.10.6.5:443 w=65535 masq',
  'TCP [fd00:206::1]:80: [fd00:16::5]:80 w=1 masq',
  'UDP 10.200.6.2:53: ',
];

/** Real servers as text, sorted, counters dropped. */
function rssText(rss: Iterable<RealServer>): string {
  return [...rss].map((rs) => formatRealServer(rs)).sort().join(' | ');
}

/** A table as text: each virtual server's key and real servers, sorted. */
export function tableText(table: IpvsTable): string[] {
  return [...table].map(([key, { dests }]) => `${key}: ${rssText(dests.values())}`).sort();
}

/**
 * Seeds `client` (empty) with LISTING_SEED; then its listing (`text`: the kernel's or the fake's) as
 * sorted blocks, what parseProcListing takes from it, and two full reads: one through the client's
 * listing with every seeded virtual server desired as seeded, one dumping every virtual server's
 * real servers.
 */
export async function listingCase(client: IpvsClient, listingText: () => Promise<string>): Promise<{
  seedErrors: string[]; header: string[]; blocks: string[]; parsed: string[];
  throughListing: string[]; dumped: string[]; lastFullRead: TableCache['lastFullRead'];
}> {
  const seedErrors = (await client.apply(LISTING_SEED)).filter((r) => r !== undefined).map(String);
  const text = await listingText();
  const lines = text.split('\n');
  const header = lines.slice(0, 3);
  const blocks: string[] = [];
  for (const line of lines.slice(3)) {
    if (line.startsWith('  -> ')) blocks[blocks.length - 1] += `\n${line}`;
    else if (line !== '') blocks.push(line);
  }
  const parsed = [...parseProcListing(text)].map(([key, rss]) => `${key}: ${rssText(rss)}`).sort();
  const desired = seededTable();
  const viaListing = new TableCache();
  await viaListing.readAll(client, undefined, desired);
  const viaDumps = new TableCache();
  await viaDumps.readAll(client);
  return {
    seedErrors, header, blocks: blocks.sort(), parsed, throughListing: tableText(viaListing.view),
    dumped: tableText(viaDumps.view), lastFullRead: viaListing.lastFullRead,
  };
}

/** LISTING_SEED as a desired table (origin left out: the read does not look at it). */
function seededTable(): DesiredTable {
  const table = new Map<string, { vs: VirtualServer; dests: RealServer[] }>();
  for (const op of LISTING_SEED) {
    const key = virtualServerKey(op.vs);
    if (op.kind === 'add-service') table.set(key, { vs: op.vs, dests: [] });
    else if (op.kind === 'add-dest') table.get(key)!.dests.push(op.rs);
  }
  return table as unknown as DesiredTable;
}
