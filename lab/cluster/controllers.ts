// The lab API server's EndpointSlice controller, pure: the slices a Service with a selector should
// have, from the Pods and Nodes. The server applies the difference after every write of a Service,
// Pod or Node (lab/cluster/apiserver.ts).
//
// Kept from the real controller: label kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by; one addressType per Service ipFamily; only pods with a
// nodeName, an address of the family and a phase other than Succeeded/Failed; conditions
// ready = Ready condition and not terminating (always true with publishNotReadyAddresses),
// serving = Ready condition, terminating = deletionTimestamp set; nodeName, zone from the Node's
// topology.kubernetes.io/zone label, targetRef to the Pod; a named targetPort resolved from the
// pod's container ports, pods that resolve the ports differently in different slices, and a name
// a pod does not resolve drops only that port for that pod (the pod goes to a slice without it,
// with no ports at all when none resolves: the real controller's getEndpointPorts skips it).
// Approximated: slice names are `<service>-<family>[-<n>]` rather than generated, and there is no
// 100-endpoint limit per slice.

type Meta = { name: string; namespace?: string; labels?: Record<string, string>; uid?: string; deletionTimestamp?: string };
type PodLike = {
  metadata: Meta;
  spec?: { nodeName?: string; hostname?: string; containers?: Array<{ ports?: Array<{ name?: string; containerPort?: number; protocol?: string }> }> };
  status?: { phase?: string; podIP?: string; podIPs?: Array<{ ip: string }>; conditions?: Array<{ type: string; status: string }> };
};
type ServiceLike = {
  metadata: Meta;
  spec?: { selector?: Record<string, string>; ipFamilies?: string[]; publishNotReadyAddresses?: boolean; type?: string;
    ports?: Array<{ name?: string; port?: number; protocol?: string; targetPort?: number | string; appProtocol?: string }> };
};
type NodeLike = { metadata: Meta };

/** The label naming a slice's Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** The label naming the controller that manages a slice. */
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
/** This controller's managed-by value (the real controller's). */
export const MANAGED_BY = 'endpointslice-controller.k8s.io';

/** An EndpointSlice as the controller writes it. */
export interface SliceLike {
  metadata: { name: string; namespace: string; labels: Record<string, string>; ownerReferences: object[] };
  addressType: 'IPv4' | 'IPv6';
  endpoints: object[];
  ports: Array<{ name: string; port: number; protocol: string; appProtocol?: string }>;
}

/** The slices `svc` should have (none without a selector or for ExternalName). */
export function buildEndpointSlices(svc: ServiceLike, pods: readonly PodLike[], nodes: readonly NodeLike[]): SliceLike[] {
  const sel = svc.spec?.selector;
  if (!sel || Object.keys(sel).length === 0 || svc.spec?.type === 'ExternalName') return [];
  const ns = svc.metadata.namespace ?? 'default';
  const zones = new Map(nodes.map((n) => [n.metadata.name, n.metadata.labels?.['topology.kubernetes.io/zone']]));
  const families = (svc.spec?.ipFamilies?.length ? svc.spec.ipFamilies : ['IPv4']) as Array<'IPv4' | 'IPv6'>;
  const matching = pods.filter((p) => (p.metadata.namespace ?? 'default') === ns && labelsMatch(sel, p.metadata.labels) &&
    p.spec?.nodeName && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const out: SliceLike[] = [];
  for (const family of families) {
    const groups = new Map<string, { ports: SliceLike['ports']; endpoints: object[] }>();
    for (const pod of matching) {
      const addr = podAddresses(pod).find((a) => (a.includes(':') ? 'IPv6' : 'IPv4') === family);
      const ports = resolvePorts(svc, pod);
      if (!addr) continue;
      const k = JSON.stringify(ports);
      if (!groups.has(k)) groups.set(k, { ports, endpoints: [] });
      groups.get(k)!.endpoints.push(endpointOf(pod, addr, zones.get(pod.spec!.nodeName!), !!svc.spec?.publishNotReadyAddresses));
    }
    // A Service whose pods are all gone keeps one empty slice with its ports, as the real controller does.
    if (groups.size === 0) groups.set('', { ports: resolvePorts(svc, undefined), endpoints: [] });
    [...groups.values()].forEach((g, i) => out.push({
      metadata: {
        name: `${svc.metadata.name}-${family.toLowerCase()}${i ? `-${i}` : ''}`, namespace: ns,
        labels: { [SERVICE_NAME_LABEL]: svc.metadata.name, [MANAGED_BY_LABEL]: MANAGED_BY },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: svc.metadata.name, uid: svc.metadata.uid ?? '', controller: true, blockOwnerDeletion: true }],
      },
      addressType: family, endpoints: g.endpoints, ports: g.ports,
    }));
  }
  return out;
}

/** Whether every selector label is on the object (the map form of a label selector). */
export function labelsMatch(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

function podAddresses(pod: PodLike): string[] {
  const ips = pod.status?.podIPs?.map((p) => p.ip) ?? [];
  return ips.length ? ips : pod.status?.podIP ? [pod.status.podIP] : [];
}

function endpointOf(pod: PodLike, addr: string, zone: string | undefined, publishNotReady: boolean): object {
  const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const terminating = !!pod.metadata.deletionTimestamp;
  return {
    addresses: [addr],
    conditions: { ready: publishNotReady || (ready && !terminating), serving: ready, terminating },
    nodeName: pod.spec!.nodeName,
    ...(zone ? { zone } : {}),
    targetRef: { kind: 'Pod', namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name, uid: pod.metadata.uid ?? '' },
  };
}

/** The slice ports for a pod (named targetPorts looked up in its containers); a name it does not resolve is left out (without a pod, every named one). */
function resolvePorts(svc: ServiceLike, pod: PodLike | undefined): SliceLike['ports'] {
  const out: SliceLike['ports'] = [];
  for (const p of svc.spec?.ports ?? []) {
    const protocol = p.protocol ?? 'TCP';
    let port = typeof p.targetPort === 'number' ? p.targetPort : p.targetPort === undefined ? p.port : Number.NaN;
    if (typeof p.targetPort === 'string') {
      if (/^\d+$/.test(p.targetPort)) port = Number(p.targetPort);
      else if (pod) {
        const found = pod.spec?.containers?.flatMap((c) => c.ports ?? []).find((cp) => cp.name === p.targetPort && (cp.protocol ?? 'TCP') === protocol);
        if (!found?.containerPort) continue;
        port = found.containerPort;
      } else continue;
    }
    if (port === undefined || Number.isNaN(port)) continue;
    out.push({ name: p.name ?? '', port, protocol, ...(p.appProtocol ? { appProtocol: p.appProtocol } : {}) });
  }
  return out;
}
