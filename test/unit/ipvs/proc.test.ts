// src/ipvs/proc.ts: the kernel's listing of its table (/proc/net/ip_vs), as FakeIpvs writes it
// and as parseProcListing reads it, checked against the contract the kernel run checks too
// (test/support/ipvs-listing-contract.ts), a listing captured from Debian's 6.1 kernel, and
// listings the parser must not trust.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import {
  type ListedServer, type ListingReader, ListingParser, parseProcListing, textListing,
} from '../../../src/ipvs/proc.js';
import { openProcListing } from '../../../src/ipvs/proc-read.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatRealServer } from '../../../src/model/ipvs.js';
import { TableCache } from '../../../src/sync/table-cache.js';
import {
  LISTING_BLOCKS, LISTING_PARSED, LISTING_SEED, listingCase, tableText,
} from '../../support/ipvs-listing-contract.js';

const HEADER = [
  'IP Virtual Server version 1.2.1 (size=4096)',
  'Prot LocalAddress:Port Scheduler Flags',
  '  -> RemoteAddress:Port Forward Weight ActiveConn InActConn',
];

/** `cat /proc/net/ip_vs` in the lab VM (6.1.0-56-amd64) after a table set up with ipvsadm. */
const CAPTURED = `${HEADER.join('\n')}
TCP  [2001:0db8:0000:0000:0000:0000:0000:0001]:0050 lc persistent 15000 80000000
  -> [2001:0db8:0001:0000:0000:0000:0000:0005]:0050      Masq    1      0          0         
TCP  0A000003:01BB wlc  persistent 75000 FFFFFF00
SCTP  0A000004:0009 rr  
TCP  0A000001:0050 rr  
  -> 0A010003:0050      Tunnel  1      0          0         
  -> 0A010002:0050      Route   0      0          0         
  -> 0A010001:1F90      Masq    3      0          0         
UDP  0A000002:0035 sh ops  
FWM  00000011 rr 
FWM  00000011 rr 
  -> 0A010009:0000      Route   1      0          0         
`;

function parsedText(text: string): string[] {
  return [...parseProcListing(text)].map(([key, rss]) => `${key}: ${rss.map((rs) => formatRealServer(rs)).join(' | ')}`);
}

describe('the listing on FakeIpvs', () => {
  it('writes the table as the kernel lists it, and a read through it holds what dumping every virtual server holds', async () => {
    const fake = new FakeIpvs();
    const r = await listingCase(fake, async () => fake.listingText());
    expect(r.seedErrors).toEqual([]);
    expect(r.header).toEqual(HEADER);
    expect(r.blocks).toEqual(LISTING_BLOCKS);
    expect(r.parsed).toEqual(LISTING_PARSED);
    expect(r.throughListing).toEqual(r.dumped);
    // The two marks and `a` (thresholds and a tunnel wanted) are dumped; the other four come from the listing.
    expect(r.lastFullRead).toEqual({ listed: 4, dumped: 3, listing: true });
  });

  it('is not read without a desired table, nor where the client offers none', async () => {
    const fake = new FakeIpvs();
    await fake.apply(LISTING_SEED);
    let listings = 0;
    const counted = Object.assign(Object.create(fake) as FakeIpvs, { listing: async () => { listings++; return fake.listing(); } });
    const cache = new TableCache();
    await cache.readAll(counted);
    expect([listings, cache.lastFullRead]).toEqual([0, { listed: 0, dumped: 7, listing: false }]);
    const none = Object.assign(Object.create(fake) as FakeIpvs, { listing: async () => undefined });
    const desired = new Map([...fake.view()].map(([k, v]) => [k, { vs: v.vs, dests: [...v.dests.values()] }]));
    await cache.readAll(none, undefined, desired as never);
    expect(cache.lastFullRead).toEqual({ listed: 0, dumped: 7, listing: false });
    expect(tableText(cache.view)).toHaveLength(7);
  });
});

describe('parseProcListing', () => {
  it('reads a listing captured from the kernel: addresses, ports, weights and methods; marks left out', () => {
    expect(parsedText(CAPTURED)).toEqual([
      'TCP [2001:db8::1]:80: [2001:db8:1::5]:80 w=1 masq',
      'TCP 10.0.0.3:443: ',
      'SCTP 10.0.0.4:9: ',
      'TCP 10.0.0.1:80: 10.1.0.3:80 w=1 tunnel tun=ipip | 10.1.0.2:80 w=0 route | 10.1.0.1:8080 w=3 masq',
      'UDP 10.0.0.2:53: ',
    ]);
    expect(parsedText(HEADER.join('\n'))).toEqual([]);
    expect(parsedText('')).toEqual([]);
  });

  it('leaves out only the virtual server a line it cannot read belongs to', () => {
    const text = `${HEADER.join('\n')}
TCP  0A000001:0050 rr  
  -> 0A010001:1F90      Masq    3      0          0         
  -> 0A010002:1F90      Sideways 1     0          0         
TCP  0A000002:0050 rr  
  -> 0A010003:1F90      Masq    1      0          0
  -> 0A01000:1F90      Masq    1      0          0         
ESP  0A000003:0050 rr  
  -> 0A010004:1F90      Masq    1      0          0         
TCP  0A000005:0050 rr  
  -> 0A010005:1F90      Masq    2      0          0         
TCP  0A000005:0050 rr  
UDP  0A000006:0035 rr  
  -> 0A010006:0035      Masq    12345678901234567890 0 0
TCP  0A000007:0050 rr  
  -> 0A010007:0050      Local   7      -1         0         
\u0000\u00ff garbage
  -> [fd00::zz]:0050      Masq    1      0          0         
`;
    // 10.0.0.1: an unknown method; 10.0.0.2: a short address; 10.0.0.5 listed twice; 10.0.0.6: a weight
    // past 2^53; the last line (an address it cannot read) comes after garbage, under no virtual server.
    expect(parsedText(text)).toEqual(['TCP 10.0.0.7:80: 10.1.0.7:80 w=7 local']);
    // The connection counters as listed (the drain decides on them); persistent ones are not listed.
    expect(parseProcListing(text).get('TCP 10.0.0.7:80')![0]).toMatchObject({ activeConns: -1, inactiveConns: 0, persistentConns: undefined });
  });

  it('reads each forwarding method by its whole name, not by its first letter', () => {
    const record = (method: string) => `TCP  0A000001:0050 rr  \n  -> 0A010001:1F90      ${method}  1      0          0\n`;
    const methods = ['Masq', 'Local', 'Tunnel', 'Route', 'Bypass'].map((m) => parseProcListing(record(m)).get('TCP 10.0.0.1:80')?.[0]?.forward);
    expect(methods).toEqual(['masq', 'local', 'tunnel', 'route', 'bypass']);
    for (const wrong of ['Mas', 'Masqs', 'M', 'Tun', 'Routes', 'masq', 'Xasq']) {
      expect(parseProcListing(record(wrong)).has('TCP 10.0.0.1:80')).toBe(false);
    }
  });

  it('gives each virtual server once its record is complete, in pieces of any size alike', () => {
    const whole: ListedServer[] = [];
    const p = new ListingParser();
    whole.push(...p.push(CAPTURED), ...p.end());
    expect(whole.map((v) => `${v.key} ${v.rss?.length}`)).toEqual([
      'TCP [2001:db8::1]:80 1', 'TCP 10.0.0.3:443 0', 'SCTP 10.0.0.4:9 0', 'TCP 10.0.0.1:80 3', 'UDP 10.0.0.2:53 0',
    ]);
    for (const size of [1, 2, 3, 7, 64, CAPTURED.length]) {
      const q = new ListingParser();
      const got: ListedServer[] = [];
      for (let i = 0; i < CAPTURED.length; i += size) got.push(...q.push(CAPTURED.slice(i, i + size)));
      got.push(...q.end());
      expect(got).toEqual(whole);
    }
    // No newline at the end: the last line still counts.
    expect(parseProcListing(CAPTURED.trimEnd())).toEqual(parseProcListing(CAPTURED));
    // A record with a line it cannot read comes out without real servers.
    const r = new ListingParser();
    expect([...r.push('TCP  0A000001:0050 rr  \n  -> 0A010001:1F90      Masq    x      0          0\n'), ...r.end()])
      .toEqual([{ key: 'TCP 10.0.0.1:80', rss: undefined }]);
  });
});

/** Every virtual server a reader gives, to the end. */
async function drain(reader: ListingReader): Promise<ListedServer[]> {
  const out: ListedServer[] = [];
  for (let got = await reader.next(); got; got = await reader.next()) out.push(...got);
  return out;
}

describe('openProcListing and textListing', () => {
  it('read a file in turn, past their reads, as the whole text parses; undefined where there is none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proc-listing-'));
    try {
      // 20 000 virtual servers of one real server each: about 1.8 MB.
      const lines = [...CAPTURED.split('\n').slice(0, 3)];
      for (let i = 0; i < 20_000; i++) {
        lines.push(`TCP  0A${(i >> 8).toString(16).toUpperCase().padStart(2, '0')}${(i & 255).toString(16).toUpperCase().padStart(2, '0')}01:0050 rr  `);
        lines.push(`  -> 0B000001:${(i % 65535 + 1).toString(16).toUpperCase().padStart(4, '0')}      Masq    1      0          0         `);
      }
      const text = `${lines.join('\n')}\n`;
      expect(text.length).toBeGreaterThan(1 << 20);
      writeFileSync(join(dir, 'ip_vs'), text, 'latin1');
      const whole = [...parseProcListing(text)].map(([key, rss]) => ({ key, rss }));
      const read = await drain((await openProcListing(join(dir, 'ip_vs')))!);
      expect(read).toEqual(whole);
      expect(await drain(textListing(text))).toEqual(whole);
      expect(read).toHaveLength(20_000);
      expect(read[12345]).toEqual({ key: 'TCP 10.48.57.1:80', rss: [expect.objectContaining({ address: '11.0.0.1', port: 12346, weight: 1 })] });
      // Closed early: nothing more.
      const early = (await openProcListing(join(dir, 'ip_vs')))!;
      expect((await early.next())!.length).toBeGreaterThan(0);
      await early.close();
      expect(await early.next()).toBeUndefined();
      expect(await openProcListing(join(dir, 'missing'))).toBeUndefined();
      const notAFile = (await openProcListing(dir))!; // a directory opens, and its read fails
      expect(await notAFile.next()).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
