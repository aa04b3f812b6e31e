// Host microbenchmark of the sync loop's incremental path: an Operator over FakeIpvs and
// FakeVipLink at N Services, fed single-endpoint changes through handle(); reports the sync time
// per change (wall, and the process's CPU: on a shared machine the wall tail is mostly other
// processes), the garbage collections during the changes and how often the iptables path ran.
// Run: node dist/bench/host-changes.js [services] [changes] [opted]: the first `opted` Services use wrr
// and opt into the cluster load view (ClusterWeights on, nothing published).
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { PluginRegistry } from '../plugins/index.js';
import { ClusterWeights } from '../src/balance/cluster-view.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { Operator } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import { NODE_NAME, feedCluster, makeBenchSlice, makeCluster, msSince, percentile } from './fixtures.js';

const N = Number(process.argv[2] ?? 10_000);
const K = Number(process.argv[3] ?? 50);
const OPTED = Number(process.argv[4] ?? 0);
const E = 10;
const c = makeCluster(N, E);
for (const s of c.services.slice(0, OPTED)) {
  s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/balance': 'cluster' };
}
let iptablesCalls = 0;
let done: (() => void) | undefined;
const op = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 }, {
  ipvs: new FakeIpvs(), vips: new FakeVipLink(), iptables: { sync: async () => { iptablesCalls++; }, cleanup: async () => undefined },
  events: { report: async () => undefined }, status: { write: async () => { done?.(); } }, log: () => undefined,
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(), nodeName: NODE_NAME,
  ...(OPTED ? { clusterWeights: new ClusterWeights(30_000, undefined, undefined, NODE_NAME) } : {}),
});
const keepAlive = setInterval(() => undefined, 60_000);
const next = () => new Promise<void>((r) => { done = r; });
feedCluster(op, c);
let w = next();
op.start();
await w;
iptablesCalls = 0;
const gcs = { scavenges: 0, markCompacts: 0, ms: 0 };
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = (e as { detail?: { kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs.scavenges++;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.markCompacts++;
    gcs.ms += e.duration;
  }
});
observer.observe({ entryTypes: ['gc'] });
const times: number[] = [];
const cpu: number[] = [];
const ops: number[] = [];
for (let k = 0; k < K; k++) {
  const i = (k * 7919) % N;
  const js = Array.from({ length: E }, (_, j) => j);
  const object = makeBenchSlice(i, `c${k}`, k % 2 ? js.slice(1) : [...js, E], E);
  w = next();
  const t = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  op.handle({ kind: 'endpointslice', type: 'upsert', object });
  await w;
  times.push(msSince(t));
  const c1 = process.cpuUsage(c0);
  cpu.push((c1.user + c1.system) / 1000);
  ops.push(op.last!.ops);
}
await new Promise((r) => setImmediate(r)); // the observer's last entries
observer.disconnect();
await op.stop();
clearInterval(keepAlive);
console.log(JSON.stringify({
  services: N, changes: K, ...(OPTED ? { clusterBalanced: OPTED } : {}), p50Ms: percentile(times, 50), p99Ms: percentile(times, 99),
  cpuP50Ms: percentile(cpu, 50), cpuP99Ms: percentile(cpu, 99), scavengesPerChange: gcs.scavenges / K,
  markCompacts: gcs.markCompacts, gcMsPerChange: gcs.ms / K, opsPerChange: [...new Set(ops)], iptablesRuns: iptablesCalls,
}));
