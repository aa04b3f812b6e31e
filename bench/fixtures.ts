// The cluster the scale benchmark programs: N Services x E endpoints, as the informers (or a YAML
// directory) would hand them over. Shared by the host-side and the in-VM parts of `npm run bench`.
//
// Addresses: cluster IPs 10.96.0.0/12 (one per Service), pod IPs 10.128.0.0/9, the node
// 192.168.100.1. Every 5th Service is NodePort (one more virtual server on the node address),
// every 10th uses `wrr` with a byPod weight list (the target of the weight changes); the rest use
// the default scheduler. One EndpointSlice per Service.
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { percentile as nearestRank } from '../lab/compare/stats.js';
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { DesiredState } from '../src/desired/state.js';
import type { IpvsOp } from '../src/model/ipvs.js';
import type { SourceEvent } from '../src/source/types.js';
import { planIpvs } from '../src/plan/plan.js';

export const NODE_NAME = 'lab-node';
export const NODE_IP = '192.168.100.1';
export const NAMESPACE = 'bench';

function quad(base: [number, number], n: number): string {
  return `${base[0]}.${base[1] + ((n >> 16) & 255)}.${(n >> 8) & 255}.${n & 255}`;
}

/** Cluster IP of Service i. */
export function clusterIp(i: number): string {
  return quad([10, 96], i + 1);
}

/** Pod IP of endpoint j of Service i (E endpoints per Service; extra endpoints use j >= E). */
export function podIp(i: number, j: number, e: number): string {
  return quad([10, 128], i * (e + 8) + j + 1);
}

export function podName(i: number, j: number): string {
  return `svc${i}-pod${j}`;
}

export function isNodePort(i: number): boolean {
  return i % 5 === 4;
}

export function isWeighted(i: number): boolean {
  return i % 10 === 0;
}

/** Service i; `podWeights` adds byPod rules (wrr Services only). */
export function makeBenchService(i: number, rv: string, podWeights: Array<{ name: string; weight: number }> = []): V1Service {
  const np = isNodePort(i);
  const annotations: Record<string, string> = isWeighted(i)
    ? { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': JSON.stringify({ weights: { byPod: podWeights } }) }
    : {};
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { namespace: NAMESPACE, name: `svc${i}`, uid: `uid-svc${i}`, resourceVersion: rv, annotations },
    spec: {
      type: np ? 'NodePort' : 'ClusterIP', clusterIP: clusterIp(i), clusterIPs: [clusterIp(i)], ipFamilies: ['IPv4'],
      selector: { app: `svc${i}` },
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, ...(np ? { nodePort: 30000 + Math.floor(i / 5) } : {}) }],
    },
  };
}

/** The EndpointSlice of Service i with endpoints `js` (indices; 0..E-1 at start). */
export function makeBenchSlice(i: number, rv: string, js: readonly number[], e: number): V1EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { namespace: NAMESPACE, name: `svc${i}-abcde`, resourceVersion: rv, labels: { 'kubernetes.io/service-name': `svc${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: js.map((j) => ({
      addresses: [podIp(i, j, e)], nodeName: `node-${j % 7}`, targetRef: { kind: 'Pod', name: podName(i, j), namespace: NAMESPACE },
      conditions: { ready: true, serving: true, terminating: false },
    })),
  };
}

export function makeBenchNode(): V1Node {
  return {
    apiVersion: 'v1', kind: 'Node',
    metadata: { name: NODE_NAME, resourceVersion: '1', labels: { 'topology.kubernetes.io/zone': 'zone-a' } },
    status: { addresses: [{ type: 'InternalIP', address: NODE_IP }, { type: 'Hostname', address: NODE_NAME }] },
  };
}

/** The whole cluster: Node, Services, slices (endpoints 0..E-1). */
export function makeCluster(n: number, e: number): { node: V1Node; services: V1Service[]; slices: V1EndpointSlice[] } {
  const js = Array.from({ length: e }, (_, j) => j);
  return {
    node: makeBenchNode(),
    services: Array.from({ length: n }, (_, i) => makeBenchService(i, '1')),
    slices: Array.from({ length: n }, (_, i) => makeBenchSlice(i, '1', js, e)),
  };
}

/** Hands the cluster to an operator as a source's first lists would: its Node, Services, then slices. */
export function feedCluster(op: { handle(e: SourceEvent): void }, c: ReturnType<typeof makeCluster>): void {
  op.handle({ kind: 'node', type: 'upsert', object: c.node });
  for (const object of c.services) op.handle({ kind: 'service', type: 'upsert', object });
  for (const object of c.slices) op.handle({ kind: 'endpointslice', type: 'upsert', object });
}

/** The ops that program the bench cluster (N x E) into an empty table, planned as a first sync plans them. */
export function opsFromScratch(n: number, e: number): IpvsOp[] {
  const c = makeCluster(n, e);
  const state = new DesiredState(defaultProxyConfig, new PluginRegistry(), NODE_NAME);
  state.setNode(c.node);
  for (const s of c.services) state.setService(s);
  for (const s of c.slices) state.setSlice(s);
  state.sync();
  const empty = { actual: new Map(), owns: () => true, now: 0, draining: new Map(), gracePeriodMs: 1 };
  return planIpvs({ desired: state.desiredTable, ...empty }).ops;
}

/** p-th percentile (nearest rank) of numbers. */
export function percentile(xs: readonly number[], p: number): number {
  return xs.length ? nearestRank([...xs].sort((a, b) => a - b), p / 100) : NaN;
}

/** A sync's phases (src/sync/outcome.ts), as `build 3 read 20 plan 2 write 10 after 3` (or `sep` between them). */
export function formatPhases(p: object, sep = ' '): string {
  return Object.entries(p).map(([k, ms]) => `${k} ${String(ms)}`).join(sep);
}

/** A progress line on stderr. */
export function progress(msg: string): void {
  process.stderr.write(`bench: ${msg}\n`);
}

/** Milliseconds since `t0` (process.hrtime.bigint()). */
export function msSince(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}
