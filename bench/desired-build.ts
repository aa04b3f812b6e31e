// Microbenchmark of the desired state's build from scratch, what a first sync and a restart run
// before their first read: the bench cluster (N Services x E endpoints) handed to a new
// DesiredState, with a new plugin registry, then synced, ROUNDS times. Given the dist directories
// of other builds, they run interleaved with this one in the same process (the host's load falls
// on all alike): an A/B. Figures only, nothing asserted.
// Run: node dist/bench/desired-build.js [services] [endpoints] [rounds] [other dist directory ...]
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as registry from '../plugins/index.js';
import * as config from '../src/config/types.js';
import * as state from '../src/desired/state.js';
import { NODE_NAME, makeCluster, msSince, percentile } from './fixtures.js';

const [N = 10_000, E = 10, ROUNDS = 12] = process.argv.slice(2, 5).map(Number);
interface Build { name: string; state: typeof state; registry: typeof registry; config: typeof config }
const builds: Build[] = [{ name: 'this build', state, registry, config }];
const load = async <T>(dir: string, file: string) => (await import(pathToFileURL(join(dir, file)).href)) as T;
for (const dir of process.argv.slice(5)) {
  builds.push({ name: dir, state: await load(dir, 'src/desired/state.js'),
    registry: await load(dir, 'plugins/index.js'), config: await load(dir, 'src/config/types.js') });
}
const c = makeCluster(N, E);

/** One build from scratch: its time, and how many virtual servers it wants. */
function build(b: Build): { ms: number; virtualServers: number } {
  const plugins = new b.registry.PluginRegistry();
  const t = process.hrtime.bigint();
  const s = new b.state.DesiredState(b.config.defaultProxyConfig, plugins, NODE_NAME);
  s.setNode(c.node);
  for (const x of c.services) s.setService(x);
  for (const x of c.slices) s.setSlice(x);
  s.sync();
  return { ms: msSince(t), virtualServers: s.desiredTable.size };
}

const times = builds.map(() => [] as number[]);
const sizes = new Set<number>();
for (let r = 0; r < ROUNDS; r++) {
  // Each round in another order, so that no build always runs right after a collection of another's garbage.
  for (const i of builds.map((_, k) => (k + r) % builds.length)) {
    const got = build(builds[i]!);
    times[i]!.push(got.ms);
    sizes.add(got.virtualServers);
  }
}
console.log(JSON.stringify({
  services: N, endpoints: E, virtualServers: [...sizes], rounds: ROUNDS,
  // The first two rounds of each are left out: cold code.
  builds: builds.map((b, i) => ({
    build: b.name, firstMs: times[i]![0], medianMs: percentile(times[i]!.slice(2), 50), minMs: Math.min(...times[i]!.slice(2)),
  })),
}));
