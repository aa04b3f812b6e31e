// Benchmark of the pure core: 10 000 Services x 10 endpoints (ClusterIP), built and planned from
// scratch against an empty FakeIpvs, then single-endpoint changes planned incrementally.
// Run: npm run build && node dist/bench/plan.js [services] [endpoints]
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../plugins/index.js';
import { DesiredState } from '../src/desired/state.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { formatOp } from '../src/model/ipvs.js';
import { makeOwnership } from '../src/plan/ownership.js';
import { type DrainState, planIpvs, planVirtualServers } from '../src/plan/plan.js';

const N = Number(process.argv[2] ?? 10_000);
const E = Number(process.argv[3] ?? 10);
const NODE = 'node-a';

function ip(base: number, i: number): string {
  return `${base}.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

function service(i: number): V1Service {
  return {
    metadata: { namespace: 'bench', name: `svc${i}`, resourceVersion: '1' },
    spec: { type: 'ClusterIP', clusterIP: ip(10, i), clusterIPs: [ip(10, i)], selector: { app: `svc${i}` },
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  };
}

function slice(i: number, rv: string, mutate?: (s: V1EndpointSlice) => void): V1EndpointSlice {
  const s: V1EndpointSlice = {
    metadata: { namespace: 'bench', name: `svc${i}-x`, labels: { 'kubernetes.io/service-name': `svc${i}` }, resourceVersion: rv },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: E }, (_, j) => ({
      addresses: [ip(11, i * E + j)], nodeName: `node-${j % 5}`, conditions: { ready: true, serving: true, terminating: false },
    })),
  };
  mutate?.(s);
  return s;
}

function ms(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const registry = new PluginRegistry();
const services = Array.from({ length: N }, (_, i) => service(i));
const slices = Array.from({ length: N }, (_, i) => slice(i, '1'));

// Warm-up on a small cluster so JIT compilation is not what we measure.
{
  const w = new DesiredState(defaultProxyConfig, registry, NODE);
  for (let i = 0; i < 200; i++) { w.setService(services[i]!); w.setSlice(slices[i]!); }
  w.sync();
  planIpvs({ desired: w.desiredTable, actual: new Map(), owns: () => true, now: 0, draining: new Map(), gracePeriodMs: 1 });
}

const state = new DesiredState(defaultProxyConfig, registry, NODE);
let t = process.hrtime.bigint();
for (const s of services) state.setService(s);
for (const s of slices) state.setSlice(s);
const full = state.sync();
const buildMs = ms(t);

const fake = new FakeIpvs();
const owns = makeOwnership({ assignedAddresses: state.desired().vips });
let draining: DrainState = new Map();
t = process.hrtime.bigint();
const plan = planIpvs({ desired: state.desiredTable, actual: fake.view(), owns, now: 0, draining, gracePeriodMs: 900_000 });
const planMs = ms(t);
t = process.hrtime.bigint();
const results = await fake.apply(plan.ops);
const applyMs = ms(t);
const failures = results.filter((r) => r !== undefined).length;
draining = plan.draining;

t = process.hrtime.bigint();
const replan = planIpvs({ desired: state.desiredTable, actual: fake.view(), owns, now: 1, draining, gracePeriodMs: 900_000 });
const replanMs = ms(t);

/** One slice update for Service `i`: synced and planned incrementally (timed), then applied to the fake. */
async function change(i: number, rv: string, mutate: (s: V1EndpointSlice) => void) {
  const t0 = process.hrtime.bigint();
  state.setSlice(slice(i, rv, mutate));
  const r = state.sync();
  const keys = new Set([...r.changed, ...draining.keys()]);
  const p = planVirtualServers(keys, { desired: state.desiredTable, actual: fake.view(), owns, now: 2, draining, gracePeriodMs: 900_000 });
  const took = ms(t0);
  draining = p.draining;
  const failed = (await fake.apply(p.ops)).filter((e) => e !== undefined).length;
  return { servicesRecomputed: r.recomputed, changedVirtualServers: r.changed.size, ops: p.ops.map(formatOp), applyFailures: failed, ms: +took.toFixed(3) };
}

const i = 4242 % N;
const notReady = await change(i, '2', (s) => { s.endpoints![3]!.conditions = { ready: false, serving: false, terminating: false }; });
const added = await change(i, '3', (s) => {
  s.endpoints![3]!.conditions = { ready: false, serving: false, terminating: false };
  s.endpoints!.push({ addresses: ['12.0.0.1'], nodeName: NODE, conditions: { ready: true } });
});
const finalCheck = planIpvs({ desired: state.desiredTable, actual: fake.view(), owns, now: 3, draining, gracePeriodMs: 900_000 }).ops.length;

const out = {
  services: N,
  endpointsPerService: E,
  fromScratch: {
    buildDesiredMs: +buildMs.toFixed(1),
    servicesRecomputed: full.recomputed,
    planIpvsMs: +planMs.toFixed(1),
    ops: plan.ops.length,
    applyToFakeMs: +applyMs.toFixed(1),
    applyFailures: failures,
    replanNoChangeMs: +replanMs.toFixed(1),
    replanOps: replan.ops.length,
  },
  oneEndpointNotReady: notReady,
  oneEndpointAdded: added,
  fullReplanOpsAfterwards: finalCheck,
};
console.log(JSON.stringify(out, null, 2));
