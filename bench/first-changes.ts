// The first changes after a first sync, each with its phases: what V8 has not compiled, or compiled
// for the first sync's feedback only, costs the first change of each kind (docs/performance.md,
// "The first weight change's build"). An Operator over FakeIpvs at N Services x 10 endpoints, fed
// CHANGES changes in turn (a Service's wrr weights, a slice one endpoint short, one endpoint more).
// Cold code is the process's own, so an A/B runs one process per build: given another build's dist
// directory, the operator is that build's. Figures only, nothing asserted.
// Run: node dist/bench/first-changes.js [services] [changes] [dist directory]
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as registry from '../plugins/index.js';
import * as config from '../src/config/types.js';
import * as fake from '../src/ipvs/fake.js';
import * as operator from '../src/sync/operator.js';
import * as vips from '../src/rtnl/vips.js';
import type { SourceEvent } from '../src/source/types.js';
import { NODE_NAME, feedCluster, makeBenchService, makeBenchSlice, makeCluster, msSince, podName } from './fixtures.js';

const [N = 10_000, K = 12] = process.argv.slice(2, 4).map(Number);
const dir = process.argv[4];
const load = async <T>(file: string, own: T): Promise<T> => dir ? (await import(pathToFileURL(join(dir, file)).href)) as T : own;
const { Operator } = await load('src/sync/operator.js', operator);
const { PluginRegistry } = await load('plugins/index.js', registry);
const { defaultProxyConfig } = await load('src/config/types.js', config);
const { FakeIpvs } = await load('src/ipvs/fake.js', fake);
const { FakeVipLink } = await load('src/rtnl/vips.js', vips);
const E = 10;
const c = makeCluster(N, E);
let done: (() => void) | undefined;
const next = () => new Promise<void>((r) => { done = r; });
const op = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 }, {
  ipvs: new FakeIpvs(), vips: new FakeVipLink(), iptables: { sync: async () => undefined, cleanup: async () => undefined },
  events: { report: async () => undefined }, status: { write: async () => { done?.(); } }, log: () => undefined,
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(), nodeName: NODE_NAME,
});
const keepAlive = setInterval(() => undefined, 60_000);
feedCluster(op, c);
let w = next();
op.start();
await w;
await new Promise((r) => setTimeout(r, 300)); // the first sync's collection (none here) and its tail
const all = Array.from({ length: E }, (_, j) => j);
const changes: Array<{ kind: string; ms: number; phasesMs: unknown }> = [];
for (let k = 0; k < K; k++) {
  const kind = (['weight', 'remove', 'add'] as const)[k % 3]!;
  // Weighted Services are every tenth (fixtures.ts); the others are picked apart from them.
  const i = kind === 'weight' ? 10 * (k + 1) : 10 * k + (k % 3) + 3;
  const e: SourceEvent = kind === 'weight'
    ? { kind: 'service', type: 'upsert', object: makeBenchService(i, `c${k}`, [{ name: podName(i, 0), weight: 5 }]) }
    : { kind: 'endpointslice', type: 'upsert', object: makeBenchSlice(i, `c${k}`, kind === 'remove' ? all.slice(1) : [...all, E], E) };
  w = next();
  const t = process.hrtime.bigint();
  op.handle(e);
  await w;
  changes.push({ kind, ms: msSince(t), phasesMs: op.last!.phasesMs });
}
await op.stop();
clearInterval(keepAlive);
console.log(JSON.stringify({ services: N, build: dir ?? 'this build', changes }));
