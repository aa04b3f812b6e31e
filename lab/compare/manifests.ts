// The objects the operator reads from its files source for lab compare: one ClusterIP Service
// whose annotation selects the scheduler, its EndpointSlice (pod names in targetRef, so wrr's
// byPod weights can name them), this node, and the proxy config. pure: no I/O.
import type { Backend } from './types.js';

export const SERVICE_NAMESPACE = 'default';
export const SERVICE_NAME = 'webpod';
export const PORT_NAME = 'http';
export const NODE_NAME = 'lab-node';
/** The pods' range: traffic from outside it is masqueraded (both modes). */
export const CLUSTER_CIDR = '10.10.0.0/16';

/** The Service with the scheduler annotation (its options, when any; sessionAffinity ClientIP with `affinity`) plus its EndpointSlice. */
export function serviceObjects(vip: string, port: number, backends: readonly Backend[], scheduler: string,
  options?: Record<string, unknown>, affinity = false): object[] {
  const annotations: Record<string, string> = { 'ipvs-operator.io/scheduler': scheduler };
  if (options) annotations['ipvs-operator.io/scheduler-options'] = JSON.stringify(options);
  return [
    {
      apiVersion: 'v1', kind: 'Service',
      metadata: { name: SERVICE_NAME, namespace: SERVICE_NAMESPACE, annotations },
      spec: {
        type: 'ClusterIP', clusterIP: vip, clusterIPs: [vip], ipFamilies: ['IPv4'], selector: { app: SERVICE_NAME },
        ports: [{ name: PORT_NAME, port, protocol: 'TCP', targetPort: backends[0]?.port ?? 80 }],
        ...(affinity ? { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 10800 } } } : {}),
      },
    },
    {
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
      metadata: { name: `${SERVICE_NAME}-1`, namespace: SERVICE_NAMESPACE, labels: { 'kubernetes.io/service-name': SERVICE_NAME } },
      addressType: 'IPv4',
      ports: [{ name: PORT_NAME, port: backends[0]?.port ?? 80, protocol: 'TCP' }],
      endpoints: backends.map((b) => ({
        addresses: [b.ip], nodeName: NODE_NAME,
        conditions: { ready: true, serving: true, terminating: false },
        targetRef: { kind: 'Pod', namespace: SERVICE_NAMESPACE, name: b.name },
      })),
    },
  ];
}

/** This node and the operator's config (fast syncs: each mode waits for one). */
export function clusterObjects(): object[] {
  return [
    {
      apiVersion: 'v1', kind: 'Node',
      metadata: { name: NODE_NAME, labels: { 'topology.kubernetes.io/zone': 'zone-a' } },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
    },
    {
      apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig',
      metadata: { name: 'default' },
      spec: { defaultScheduler: 'rr', interfaceName: 'ipvs-op0', clusterCIDRs: [CLUSTER_CIDR], minSyncPeriod: 0.2, syncPeriod: 30 },
    },
  ];
}

/** wrr's options for per-backend weights (by pod name). */
export function weightOptions(backends: readonly Backend[], weights: readonly number[]): Record<string, unknown> {
  return { weights: { byPod: backends.map((b, i) => ({ name: b.name, weight: weights[i] ?? 1 })) } };
}
