// Host microbenchmark of the netlink encoding of a full sync: every op of the bench cluster's
// from-scratch plan turned into request bytes, as NetlinkIpvs.apply does (opRequest + encodeRequest).
// Run: node dist/bench/codec.js [services] [endpoints]
import { encodeRequest, opRequest } from '../src/ipvs/requests.js';
import type { VirtualServer } from '../src/model/ipvs.js';
import { msSince, opsFromScratch, percentile } from './fixtures.js';

const N = Number(process.argv[2] ?? 10_000);
const E = Number(process.argv[3] ?? 10);
const ops = opsFromScratch(N, E);
const times: number[] = [];
let bytes = 0;
for (let r = 0; r < 6; r++) {
  const t = process.hrtime.bigint();
  const keys = new Map<VirtualServer, Buffer>();
  bytes = 0;
  ops.forEach((op, i) => { bytes += encodeRequest(0x20, opRequest(op, keys), i + 1, 1234).length; });
  times.push(msSince(t));
}
console.log(JSON.stringify({ ops: ops.length, bytes, firstMs: times[0], medianMs: percentile(times.slice(1), 50), per10kOpsMs: percentile(times.slice(1), 50) * 10_000 / ops.length }));
