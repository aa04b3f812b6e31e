// Microbenchmark of the kernel listing's parse (src/ipvs/proc.ts ListingParser), which a restart's
// full read runs on the main thread: the bench cluster's table (N Services x E endpoints) programmed
// into a FakeIpvs, its /proc/net/ip_vs text parsed in 64 KiB pieces, ROUNDS times. Given other
// builds of proc.js (paths), they run interleaved with this one in the same process, so that the
// host's load falls on all alike: an A/B. Figures only, nothing asserted.
// Run: node dist/bench/listing-parse.js [services] [endpoints] [rounds] [other proc.js ...]
import { pathToFileURL } from 'node:url';
import { FakeIpvs } from '../src/ipvs/fake.js';
import * as current from '../src/ipvs/proc.js';
import { msSince, opsFromScratch, percentile } from './fixtures.js';

const [N = 10_000, E = 10, ROUNDS = 20] = process.argv.slice(2, 5).map(Number);
const others = process.argv.slice(5);
type Parsers = Pick<typeof current, 'ListingParser'>;
const builds: Array<{ name: string; m: Parsers }> = [{ name: 'this build', m: current }];
for (const path of others) builds.push({ name: path, m: (await import(pathToFileURL(path).href)) as Parsers });

const fake = new FakeIpvs();
await fake.apply(opsFromScratch(N, E));
const text = fake.listingText();

/** One parse of the whole text in 64 KiB pieces: its time, and how many virtual servers came out. */
function parse(m: Parsers): { ms: number; servers: number } {
  const t = process.hrtime.bigint();
  const p = new m.ListingParser();
  let servers = 0;
  for (let i = 0; i < text.length; i += 65_536) servers += p.push(text.slice(i, i + 65_536)).length;
  servers += p.end().length;
  return { ms: msSince(t), servers };
}

const times = builds.map(() => [] as number[]);
const servers = new Set<number>();
for (let r = 0; r < ROUNDS; r++) {
  // Each round in another order, so that no build always runs right after a collection of another's garbage.
  const order = builds.map((_, i) => (i + r) % builds.length);
  for (const i of order) {
    const got = parse(builds[i]!.m);
    times[i]!.push(got.ms);
    servers.add(got.servers);
  }
}
console.log(JSON.stringify({
  services: N, endpoints: E, bytes: text.length, lines: text.split('\n').length - 1, virtualServers: [...servers], rounds: ROUNDS,
  // The first two rounds of each are left out: cold code.
  builds: builds.map((b, i) => ({
    build: b.name, firstMs: times[i]![0], medianMs: percentile(times[i]!.slice(2), 50), minMs: Math.min(...times[i]!.slice(2)),
  })),
}));
