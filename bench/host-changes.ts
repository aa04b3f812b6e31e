// Host microbenchmark of the sync loop's incremental path: an Operator over FakeIpvs and
// FakeVipLink at N Services, fed single-endpoint changes through handle(); reports the sync time
// per change and how often the iptables path ran. Run: node dist/bench/host-changes.js [services] [changes]
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { Operator } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import { NODE_NAME, makeBenchSlice, makeCluster, msSince, percentile } from './fixtures.js';

const N = Number(process.argv[2] ?? 10_000);
const K = Number(process.argv[3] ?? 50);
const E = 10;
const c = makeCluster(N, E);
let iptablesCalls = 0;
let done: (() => void) | undefined;
const op = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 }, {
  ipvs: new FakeIpvs(), vips: new FakeVipLink(), iptables: { sync: async () => { iptablesCalls++; }, cleanup: async () => undefined },
  events: { report: async () => undefined }, status: { write: async () => { done?.(); } }, log: () => undefined,
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(), nodeName: NODE_NAME,
});
const keepAlive = setInterval(() => undefined, 60_000);
const next = () => new Promise<void>((r) => { done = r; });
op.handle({ kind: 'node', type: 'upsert', object: c.node });
for (const object of c.services) op.handle({ kind: 'service', type: 'upsert', object });
for (const object of c.slices) op.handle({ kind: 'endpointslice', type: 'upsert', object });
let w = next();
op.start();
await w;
iptablesCalls = 0;
const times: number[] = [];
const ops: number[] = [];
for (let k = 0; k < K; k++) {
  const i = (k * 7919) % N;
  const js = Array.from({ length: E }, (_, j) => j);
  const object = makeBenchSlice(i, `c${k}`, k % 2 ? js.slice(1) : [...js, E], E);
  w = next();
  const t = process.hrtime.bigint();
  op.handle({ kind: 'endpointslice', type: 'upsert', object });
  await w;
  times.push(msSince(t));
  ops.push(op.last!.ops);
}
await op.stop();
clearInterval(keepAlive);
console.log(JSON.stringify({ services: N, changes: K, p50Ms: percentile(times, 50), p99Ms: percentile(times, 99), opsPerChange: [...new Set(ops)], iptablesRuns: iptablesCalls }));
