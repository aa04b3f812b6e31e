// Fuzz of the desired-state layer (issue 12): realistic Services, EndpointSlices and Nodes, mutated
// with a seeded PRNG either type-preserving (a port becomes 0 / 70000 / 1.5, an address another
// family's) or to arbitrary types (as a YAML file can: `clusterIP: 10`, `ports: [null]`, a list
// where a map belongs). Every case must build without an exception (none escaping, and no
// BuildFailed containment either), put nothing in the table that the IPVS clients' validation
// refuses, and leave an untouched Service beside it fully programmed. Address ranges: fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState } from '../../../src/desired/state.js';
import { type Desired } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { KERNEL_61_SCHEDULERS } from '../../../src/ipvs/fake.js';
import { realServerProblems, virtualServerProblems } from '../../../src/ipvs/validate.js';
import { familyOf, parseIp } from '../../../src/model/addr.js';
import { NODE, makeNode, makeService, makeSlice, prng } from '../../support/fixtures.js';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
type Rand = () => number;

const CASES = Number(process.env.FUZZ_CASES ?? 10_000);
const registry = new PluginRegistry();
const config = { ...defaultProxyConfig };
const kernel = { availableSchedulers: KERNEL_61_SCHEDULERS, kernelVersion: '6.1.0' };

/** Realistic Services covering every path of buildServiceEntry, each with its slices. */
function fixtures(): Array<{ svc: V1Service; slices: V1EndpointSlice[] }> {
  const eps = (name: string, v6 = false) => makeSlice('ns1', name, `${name}-a`, v6
    ? [{ ip: 'fd00:10::1:1' }, { ip: 'fd00:10::2:1', node: 'node-b', zone: 'zone-b' }]
    : [{ ip: '10.10.1.1', pod: 'p1' }, { ip: '10.10.2.1', node: 'node-b', ready: false, serving: true, terminating: true }, { ip: '10.10.1.2' }]);
  return [
    { svc: makeService('ns1', 'plain'), slices: [eps('plain')] },
    { svc: makeService('ns1', 'np', (s) => {
      s.spec!.type = 'NodePort'; s.spec!.externalTrafficPolicy = 'Local'; s.spec!.ports![0]!.nodePort = 30080;
      s.spec!.ports!.push({ name: 'dns', port: 53, protocol: 'UDP', nodePort: 30053 }, { name: 'sctp', port: 99, protocol: 'SCTP', nodePort: 30099 });
    }), slices: [eps('np'), makeSlice('ns1', 'np', 'np-b', [{ ip: '10.10.1.5' }], (x) => { x.ports = [{ name: 'dns', port: 5353, protocol: 'UDP' }]; })] },
    { svc: makeService('ns1', 'lb', (s) => {
      s.spec!.type = 'LoadBalancer'; s.spec!.ports![0]!.nodePort = 30081; s.spec!.externalIPs = ['203.0.113.9'];
      s.spec!.loadBalancerSourceRanges = ['192.168.0.0/24', '198.51.100.0/24'];
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.5' }, { ip: '203.0.113.6', ipMode: 'Proxy' }] } };
    }), slices: [eps('lb')] },
    { svc: makeService('ns1', 'dual', (s) => {
      s.spec!.clusterIPs = ['10.200.1.30', 'fd00:200::30']; s.spec!.clusterIP = '10.200.1.30'; s.spec!.ipFamilies = ['IPv4', 'IPv6'];
      s.spec!.internalTrafficPolicy = 'Local';
    }), slices: [eps('dual'), eps('dual', true)].map((x, i) => { x.metadata!.name = `dual-${i}`; return x; }) },
    { svc: makeService('ns1', 'sticky', (s) => {
      s.spec!.sessionAffinity = 'ClientIP'; s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 600 } };
      s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'mh', 'ipvs-operator.io/scheduler-options': '{"fallback": true, "ipv4Prefix": 24}' };
    }), slices: [eps('sticky')] },
    { svc: makeService('ns1', 'weighted', (s) => {
      s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'wrr' };
    }), slices: [eps('weighted')] },
  ];
}

const healthy = makeService('ns0', 'healthy', (s) => { s.spec!.clusterIP = '10.200.1.99'; s.spec!.clusterIPs = ['10.200.1.99']; });
const healthySlice = makeSlice('ns0', 'healthy', 'healthy-a', [{ ip: '10.10.9.9' }]);

const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const NUMBERS = [0, -1, 1, 1.5, 53, 65535, 65536, 70000, 99999, -5, 86401, 2 ** 31, 2 ** 32, 1e21, NaN, Infinity];
const STRINGS = ['', ' ', 'None', '10.200.1.11', ' 10.200.1.12 ', 'fd00:200::11', '2001:DB8::0:1', '::ffff:10.0.0.1', '10.0.0.300',
  'not-an-ip', '10.0.0.0/8', '192.168.0.0/33', '::/0', 'Local', 'Cluster', 'ClientIP', 'TCP', 'UDP', 'SCTP', 'ICMP', 'IPv4', 'IPv6',
  'NodePort', 'LoadBalancer', 'ExternalName', 'node-a', 'Proxy', 'VIP', 'mh', 'wrr', 'twos', 'nope', '{}', '{"weights":"x"}',
  '{"fallback": 1}', '[', `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`, 'x'.repeat(5000)];

/** A value of any type YAML can produce. */
function anyValue(r: Rand, depth = 0): Json {
  switch (Math.floor(r() * (depth > 2 ? 5 : 8))) {
    case 0: return null;
    case 1: return pick(r, NUMBERS);
    case 2: return pick(r, STRINGS);
    case 3: return r() < 0.5;
    case 4: return undefined;
    case 5: return [];
    case 6: return Array.from({ length: 1 + Math.floor(r() * 3) }, () => anyValue(r, depth + 1));
    default: return Object.fromEntries(Array.from({ length: 1 + Math.floor(r() * 3) }, () => [pick(r, ['ip', 'port', 'name', 'a', 'ready']), anyValue(r, depth + 1)]));
  }
}

/** A value of the same JSON type as `v` (a number stays a number, a list a list, ...). */
function sameType(r: Rand, v: Json): Json {
  if (typeof v === 'number') return pick(r, NUMBERS.filter((n) => Number.isFinite(n)));
  if (typeof v === 'string') return pick(r, STRINGS);
  if (typeof v === 'boolean') return !v;
  if (Array.isArray(v)) {
    const out = [...v];
    if (out.length && r() < 0.5) out.splice(Math.floor(r() * out.length), 1);
    else if (out.length) out.push(structuredClone(out[Math.floor(r() * out.length)]));
    return out;
  }
  return v;
}

/** Every [parent, key] in an object tree. */
function slots(root: Json): Array<[Json, string | number]> {
  const out: Array<[Json, string | number]> = [];
  const stack = [root];
  while (stack.length) {
    const o = stack.pop();
    if (typeof o !== 'object' || o === null) continue;
    for (const k of Object.keys(o)) {
      out.push([o, Array.isArray(o) ? Number(k) : k]);
      stack.push(o[k]);
    }
  }
  return out;
}

/** 1 to 3 mutations at random places; `arbitrary`: any type, else the same type (or a deleted key). */
function mutate<T>(r: Rand, x: T, arbitrary: boolean): T {
  const copy = structuredClone(x) as Json;
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const all = slots(copy);
    if (!all.length) break;
    const [parent, key] = pick(r, all);
    if (arbitrary) parent[key] = anyValue(r);
    else if (r() < 0.1 && !Array.isArray(parent)) delete parent[key];
    else parent[key] = sameType(r, parent[key]);
  }
  return copy as T;
}

/** What the table and sets hold that the IPVS clients or ipset would refuse. */
function refusals(d: Desired): string[] {
  const out: string[] = [];
  for (const [key, v] of d.table) {
    out.push(...virtualServerProblems(v.vs).map((p) => `${key}: ${p}`));
    for (const rs of v.dests) out.push(...realServerProblems(v.vs, rs, true).map((p) => `${key} -> ${rs.address}: ${p}`));
  }
  for (const s of d.sets) {
    if (!Number.isInteger(s.port) || s.port < 1 || s.port > 65535) out.push(`set ${s.set}: port ${s.port}`);
    for (const a of [s.address, s.source]) {
      if (a !== undefined && (!parseIp(a) || familyOf(a) !== s.family)) out.push(`set ${s.set}: address ${a} in ${s.family}`);
    }
  }
  return out;
}

interface Figures { cases: number; throws: number; buildFailed: number; refused: number; healthyLost: number; withProblems: number }

function run(seed: number, arbitrary: boolean): { figures: Figures; examples: string[] } {
  const r = prng(seed);
  const base = fixtures();
  const node = makeNode();
  const figures: Figures = { cases: 0, throws: 0, buildFailed: 0, refused: 0, healthyLost: 0, withProblems: 0 };
  const examples: string[] = [];
  const note = (m: string) => { if (examples.length < 5) examples.push(m); };
  // One long-lived DesiredState (what the operator runs; buildDesired is a fresh one): each case
  // replaces the previous case's objects, so every incremental path (set, replace, delete, node
  // change) meets mutated input. The healthy Service stays throughout.
  const state = new DesiredState(config, registry, NODE, kernel);
  state.setNode(node);
  state.setService(healthy);
  state.setSlice(healthySlice);
  let previous: { svc: Json; slices: Json[] } | undefined;
  for (let i = 0; i < CASES; i++) {
    const f = base[i % base.length]!;
    const what = r();
    const svc: Json = what < 0.5 ? mutate(r, f.svc, arbitrary) : f.svc;
    const slices: Json[] = what >= 0.5 && what < 0.85 ? f.slices.map((s) => (r() < 0.7 ? mutate(r, s, arbitrary) : s)) : f.slices;
    const n: V1Node = what >= 0.85 ? mutate(r, node, arbitrary) : node;
    figures.cases++;
    try {
      if (previous) {
        state.deleteService(previous.svc?.metadata?.namespace ?? '', previous.svc?.metadata?.name ?? '');
        for (const s of previous.slices) state.deleteSlice(s);
      }
      const rv = { resourceVersion: `${i + 2}` };
      for (const s of slices) state.setSlice({ ...s, metadata: { ...s?.metadata, ...rv } });
      state.setService({ ...svc, metadata: { ...svc?.metadata, ...rv } });
      state.setNode(n);
      state.sync();
      if (state.sync().recomputed !== 0) throw new Error('the dirty set was not emptied');
    } catch (e) {
      figures.throws++;
      note(`case ${i}: threw ${(e as Error).message}`);
      continue;
    } finally {
      previous = { svc, slices };
    }
    const problems = state.problems();
    const failed = problems.filter((p) => p.reason === 'BuildFailed');
    if (failed.length) {
      figures.buildFailed++;
      note(`case ${i}: ${failed[0]!.message}`);
    }
    const bad = refusals(state.desired());
    if (bad.length) {
      figures.refused++;
      note(`case ${i}: refused ${bad[0]}`);
    }
    if (!state.desiredTable.has('TCP 10.200.1.99:80') || state.desiredTable.get('TCP 10.200.1.99:80')!.dests.length !== 1) figures.healthyLost++;
    if (problems.some((p) => p.service.startsWith('ns1/'))) figures.withProblems++;
  }
  return { figures, examples };
}

describe('desired-state fuzz: 0 throws, 0 entries the IPVS clients refuse', () => {
  it.each<[string, number, boolean]>([
    ['type-preserving, seed 20261123', 20261123, false],
    ['arbitrary types, seed 4242', 4242, true],
  ])('%s', (name, seed, arbitrary) => {
    const t0 = Date.now();
    const { figures, examples } = run(seed, arbitrary);
    console.log(`desired fuzz (${name}): ${JSON.stringify(figures)} in ${Date.now() - t0} ms${examples.length ? `\n  ${examples.join('\n  ')}` : ''}`);
    expect(examples).toEqual([]);
    expect(figures).toEqual(expect.objectContaining({ cases: CASES, throws: 0, buildFailed: 0, refused: 0, healthyLost: 0 }));
    // The mutations are not no-ops: a good share of cases is reported as a problem of the Service.
    expect(figures.withProblems).toBeGreaterThan(CASES / 20);
  });
});
