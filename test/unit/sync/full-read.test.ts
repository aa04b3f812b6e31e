// src/sync/full-read.ts: a full read's real servers from the listing's start and dumps from the end,
// on FakeIpvs (whose listing is written as the kernel's, test/unit/ipvs/proc.test.ts). Whatever
// each side takes, the table equals one read by dumps alone. Addresses: VIPs 10.200.7.0/24 and up,
// pods 10.10.0.0/16.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { type ListingReader, textListing } from '../../../src/ipvs/proc.js';
import type { DesiredTable } from '../../../src/model/desired.js';
import { type IpvsOp, type VirtualServer, makeRealServer, makeVirtualServer, virtualServerKey } from '../../../src/model/ipvs.js';
import { readFullDests } from '../../../src/sync/full-read.js';
import { tableText } from '../../support/ipvs-listing-contract.js';

/** `n` virtual servers of 3 real servers each; every seventh wants thresholds (the listing cannot show them). */
function seeded(n: number): { fake: FakeIpvs; desired: DesiredTable } {
  const fake = new FakeIpvs();
  const ops: IpvsOp[] = [];
  const desired = new Map<string, { vs: VirtualServer; dests: ReturnType<typeof makeRealServer>[] }>();
  for (let i = 0; i < n; i++) {
    const vs = makeVirtualServer({ family: 'IPv4', address: `10.${200 + (i >> 8)}.${i & 255}.7`, port: 80 });
    const dests = [1, 2, 3].map((j) => makeRealServer({
      address: `10.10.${i & 255}.${j}`, port: 8000 + (i >> 8), weight: j, ...(i % 7 === 0 ? { upperThreshold: 10 } : {}),
    }));
    ops.push({ kind: 'add-service', vs }, ...dests.map((rs): IpvsOp => ({ kind: 'add-dest', vs, rs })));
    desired.set(virtualServerKey(vs), { vs, dests });
  }
  void fake.apply(ops);
  return { fake, desired: desired as unknown as DesiredTable };
}

/** The table as dumps alone read it. */
async function byDumps(fake: FakeIpvs): Promise<string[]> {
  const vss = await fake.listVirtualServers();
  const { dests, count } = await readFullDests(fake, vss);
  expect(count).toEqual({ listed: 0, dumped: vss.length, listing: false });
  return tableText(new Map(vss.map((vs, i) => [virtualServerKey(vs), { vs, dests: dests[i]! }])));
}

/** The same client with another listing (`reader` from its text). */
function withListing(fake: FakeIpvs, reader: (text: string) => ListingReader): FakeIpvs {
  return Object.assign(Object.create(fake) as FakeIpvs, { listing: async () => reader(fake.listingText()) });
}

async function read(client: FakeIpvs, desired: DesiredTable) {
  const vss = await client.listVirtualServers();
  const { dests, count } = await readFullDests(client, vss, desired);
  return { count, text: tableText(new Map(vss.map((vs, i) => [virtualServerKey(vs), { vs, dests: dests[i]! }]))) };
}

describe('readFullDests', () => {
  it('takes the listing\'s start and dumps the end until they meet: the same table as dumps alone', async () => {
    const { fake, desired } = seeded(1000);
    const { count, text } = await read(fake, desired);
    expect(text).toEqual(await byDumps(fake));
    expect(count.listed + count.dumped).toBe(1000);
    // Both sides took a part; the 143 with thresholds are dumped whoever met them.
    expect(count.listed).toBeGreaterThan(0);
    expect(count.dumped).toBeGreaterThanOrEqual(143);
    expect(count.dumped).toBeLessThan(1000);
  });

  it('reads a listing in another order, with a key listed twice, or one that fails midway, as dumps alone', async () => {
    const { fake, desired } = seeded(300);
    const dumps = await byDumps(fake);
    const reversed = (text: string): ListingReader => {
      const [head, ...records] = text.split(/\n(?=TCP)/);
      return textListing([head, ...records.reverse()].join('\n').replace(/\n*$/, '\n'));
    };
    // The second virtual server listed twice, early, each time with other weights than the kernel's:
    // trusting either copy would show in the table.
    const twice = (text: string): ListingReader => {
      const [head, ...records] = text.split(/\n(?=TCP)/);
      const other = (w: string) => records[1]!.replace(/Masq {4}\d/g, `Masq    ${w}`);
      records[1] = other('7');
      records.splice(3, 0, other('8'));
      return textListing([head, ...records].join('\n'));
    };
    const failing = (text: string): ListingReader => {
      const inner = textListing(text, 512);
      let reads = 0;
      return { next: async () => (++reads > 3 ? undefined : inner.next()), close: () => inner.close() };
    };
    for (const reader of [reversed, twice, failing]) {
      const { count, text } = await read(withListing(fake, reader), desired);
      expect(text).toEqual(dumps);
      expect(count.listed + count.dumped).toBe(300);
      expect(count.listing).toBe(true);
    }
  });

  it('a listing that never answers: the dumps start after the wait, read everything, and close it', async () => {
    const { fake, desired } = seeded(40);
    let closed = 0;
    const stalled = (): ListingReader => {
      let wake: (v: undefined) => void = () => {};
      return {
        next: () => new Promise((r) => { wake = r; }),
        close: async () => { closed++; wake(undefined); },
      };
    };
    const client = withListing(fake, stalled);
    const vss = await client.listVirtualServers();
    const { dests, count } = await readFullDests(client, vss, desired, 50);
    expect(tableText(new Map(vss.map((vs, i) => [virtualServerKey(vs), { vs, dests: dests[i]! }]))))
      .toEqual(await byDumps(fake));
    expect(count).toEqual({ listed: 0, dumped: 40, listing: true });
    expect(closed).toBeGreaterThan(0);
  });

  it('a listing opened ahead is the one read, then closed; one with nothing to read is closed unread', async () => {
    const { fake, desired } = seeded(300);
    const opened: string[] = [];
    const counting = (text: string): ListingReader => {
      const inner = textListing(text, 4096);
      opened.push('open');
      return { next: () => inner.next(), close: async () => { opened.push('close'); await inner.close(); } };
    };
    // Opened before the table changes: a virtual server added since is dumped, one deleted is not in the dump.
    const ahead = Promise.resolve(counting(fake.listingText()));
    const [gone] = await fake.listVirtualServers();
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.220.0.7', port: 80 });
    const rs = makeRealServer({ address: '10.10.9.9', port: 80 });
    await fake.apply([{ kind: 'delete-service', vs: gone! }, { kind: 'add-service', vs }, { kind: 'add-dest', vs, rs }]);
    const noOther = Object.assign(Object.create(fake) as FakeIpvs, { listing: async () => { throw new Error('opened again'); } });
    const vss = await noOther.listVirtualServers();
    const { dests, count } = await readFullDests(noOther, vss, desired, undefined, ahead);
    expect(tableText(new Map(vss.map((v, i) => [virtualServerKey(v), { vs: v, dests: dests[i]! }]))))
      .toEqual(await byDumps(fake));
    expect(count.listing).toBe(true);
    expect(count.listed).toBeGreaterThan(0);
    expect([...new Set(opened)]).toEqual(['open', 'close']); // closing twice is harmless
    // Nothing to read: the listing opened ahead is closed all the same.
    opened.length = 0;
    const none = await readFullDests(noOther, [], desired, undefined, Promise.resolve(counting('')));
    expect([none.count, opened]).toEqual([{ listed: 0, dumped: 0, listing: false }, ['open', 'close']]);
  });

  it('a small table is read by the listing\'s first read alone, but for what it cannot show', async () => {
    const { fake, desired } = seeded(15); // a listing of 3.2 kB: one read
    const { count, text } = await read(fake, desired);
    expect(text).toEqual(await byDumps(fake));
    expect(count).toEqual({ listed: 12, dumped: 3, listing: true }); // 0, 7 and 14 want thresholds
    // One virtual server: its record completes only at the listing's end, a read after its text.
    const one = seeded(2);
    await one.fake.apply([{ kind: 'delete-service', vs: (await one.fake.listVirtualServers())[0]! }]);
    expect((await read(one.fake, one.desired)).count).toEqual({ listed: 1, dumped: 0, listing: true });
  });
});
