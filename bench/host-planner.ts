// Host-side part of `npm run bench`: the pure core at N Services from scratch, on this machine's CPU
// (no VM): DesiredState built from the objects, then planIpvs against an empty kernel table.
// Prints one JSON object on stdout. Run: node dist/bench/host-planner.js [services] [endpoints]
import { PluginRegistry } from '../plugins/index.js';
import { DesiredState } from '../src/desired/state.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { makeOwnership } from '../src/plan/ownership.js';
import { planIpvs } from '../src/plan/plan.js';
import { NODE_NAME, makeCluster, msSince, percentile } from './fixtures.js';

const N = Number(process.argv[2] ?? 10_000);
const E = Number(process.argv[3] ?? 10);
const registry = new PluginRegistry();
const cluster = makeCluster(N, E);
const kernel = { availableSchedulers: new Set(['rr', 'wrr', 'lc', 'wlc', 'sed', 'nq', 'sh', 'dh', 'mh', 'lblc', 'lblcr', 'fo', 'ovf']) };

function once(): { buildMs: number; planMs: number; ops: number } {
  const state = new DesiredState(defaultProxyConfig, registry, NODE_NAME, kernel);
  const t0 = process.hrtime.bigint();
  state.setNode(cluster.node);
  for (const s of cluster.services) state.setService(s);
  for (const s of cluster.slices) state.setSlice(s);
  state.sync();
  const desired = state.desired();
  const buildMs = msSince(t0);
  const owns = makeOwnership({ assignedAddresses: desired.vips });
  const t1 = process.hrtime.bigint();
  const plan = planIpvs({ desired: desired.table, actual: new Map(), owns, now: 0, draining: new Map(), gracePeriodMs: 900_000 });
  return { buildMs, planMs: msSince(t1), ops: plan.ops.length };
}

// The first round includes JIT warm-up, as an operator's first sync does; report it and the median of 5.
const runs = Array.from({ length: 6 }, once);
const warm = runs.slice(1);
console.log(JSON.stringify({
  services: N, endpointsPerService: E, ops: runs[0]!.ops,
  first: { buildMs: runs[0]!.buildMs, planMs: runs[0]!.planMs },
  median: { buildMs: percentile(warm.map((r) => r.buildMs), 50), planMs: percentile(warm.map((r) => r.planMs), 50) },
}));
