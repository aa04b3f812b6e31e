// Fixture builders for desired-state and planner tests, kube-proxy style: a default object and a
// mutator. Address ranges (fixed for every test using these):
//   Service VIPs (cluster IPs)   10.200.1.0/24, fd00:200::/64
//   Pods (endpoints)             10.10.0.0/16 (10.10.<node>.<n>), fd00:10::/64
//   Node addresses               192.168.0.0/24, fd00:192::/64 (node-a = .10 / ::10, this node)
//   External and LB IPs          203.0.113.0/24, 2001:db8::/64
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { DesiredTable } from '../../src/desired/types.js';
import { type IpvsTable, formatTable, realServerKey } from '../../src/model/ipvs.js';

export const NODE = 'node-a';

/** A ClusterIP Service 10.200.1.10 with port "http" 80/TCP -> targetPort "web", selector app=<name>. */
export function makeService(namespace: string, name: string, mutate?: (s: V1Service) => void): V1Service {
  const s: V1Service = {
    metadata: { namespace, name, resourceVersion: '1' },
    spec: {
      type: 'ClusterIP', clusterIP: '10.200.1.10', clusterIPs: ['10.200.1.10'], ipFamilies: ['IPv4'],
      selector: { app: name }, ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'web' as unknown as never }],
    },
  };
  mutate?.(s);
  return s;
}

/** One endpoint of a slice: address, node, conditions. */
export interface EP {
  ip: string;
  node?: string;
  zone?: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  pod?: string;
}

/** An EndpointSlice of Service namespace/service with port "http" 8080/TCP. */
export function makeSlice(namespace: string, service: string, sliceName: string, endpoints: EP[], mutate?: (s: V1EndpointSlice) => void): V1EndpointSlice {
  const s: V1EndpointSlice = {
    metadata: { namespace, name: sliceName, labels: { 'kubernetes.io/service-name': service }, resourceVersion: '1' },
    addressType: endpoints[0]?.ip.includes(':') ? 'IPv6' : 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      nodeName: e.node ?? NODE,
      ...(e.zone ? { zone: e.zone } : {}),
      conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
      ...(e.pod ? { targetRef: { kind: 'Pod', name: e.pod, namespace } } : {}),
    })),
  };
  mutate?.(s);
  return s;
}

/** This node: 192.168.0.10 and fd00:192::10 (InternalIP), zone-a. */
export function makeNode(mutate?: (n: V1Node) => void): V1Node {
  const n: V1Node = {
    metadata: { name: NODE, labels: { 'topology.kubernetes.io/zone': 'zone-a' } },
    status: { addresses: [
      { type: 'InternalIP', address: '192.168.0.10' }, { type: 'InternalIP', address: 'fd00:192::10' }, { type: 'Hostname', address: NODE },
    ] },
  };
  mutate?.(n);
  return n;
}

/** A desired table in the IpvsTable shape. */
export function toIpvsTable(t: DesiredTable): IpvsTable {
  return new Map([...t].map(([k, d]) => [k, { vs: d.vs, dests: new Map(d.dests.map((r) => [realServerKey(r), r])) }]));
}

/** A desired table as sorted add-service/add-dest lines. */
export function render(t: DesiredTable): string {
  return formatTable(toIpvsTable(t));
}

/** Seeded PRNG (mulberry32): deterministic randomized tests. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
