// Endpoints of one Service port from its EndpointSlices, and kube-proxy's rules for which of them
// serve (pkg/proxy/topology.go CategorizeEndpoints, without topology hints). pure: no I/O.
import type { V1EndpointSlice } from './kube.js';
import type { PluginEndpoint } from '../../plugins/types.js';
import type { Family, Protocol } from '../model/ipvs.js';
import { canonicalIp } from './ip.js';

/** Label tying an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/**
 * The endpoints of Service port `portName`/`protocol` in `family`, from every slice of the Service.
 * The slice port with the same name carries the number (that is how named targetPorts resolve: the
 * EndpointSlice controller looks the name up in each Pod). Like kube-proxy: the first address of an
 * endpoint only; a duplicate ip:port across slices (during slice moves) keeps the readiest copy.
 * Conditions: ready nil = true, serving nil = ready, terminating nil = false (the API's rules).
 */
export function collectEndpoints(
  slices: readonly V1EndpointSlice[], portName: string, protocol: Protocol, family: Family, nodeName: string,
): PluginEndpoint[] {
  const byKey = new Map<string, PluginEndpoint>();
  for (const slice of slices) {
    if (slice.addressType !== family) continue;
    const port = slice.ports?.find((p) => (p.name ?? '') === portName && (p.protocol ?? 'TCP') === protocol);
    if (port?.port === undefined || port.port === null) continue;
    const labels = slice.metadata?.labels ?? {};
    for (const ep of slice.endpoints ?? []) {
      const raw = ep.addresses?.[0];
      const address = raw === undefined ? undefined : canonicalIp(raw);
      if (address === undefined) continue;
      const ready = ep.conditions?.ready ?? true;
      const e: PluginEndpoint = {
        address,
        port: port.port,
        family,
        sliceLabels: labels,
        ready,
        serving: ep.conditions?.serving ?? ready,
        terminating: ep.conditions?.terminating ?? false,
        local: ep.nodeName !== undefined && ep.nodeName === nodeName,
      };
      if (ep.nodeName !== undefined) e.nodeName = ep.nodeName;
      if (ep.zone !== undefined) e.zone = ep.zone;
      if (ep.hostname !== undefined) e.hostname = ep.hostname;
      if (ep.targetRef?.kind === 'Pod' && ep.targetRef.name) e.podName = ep.targetRef.name;
      const key = `${address}|${port.port}`;
      const old = byKey.get(key);
      if (!old || rank(e) > rank(old)) byKey.set(key, e);
    }
  }
  return [...byKey.values()].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.port - b.port));
}

function rank(e: PluginEndpoint): number {
  return e.ready ? 2 : e.serving ? 1 : 0;
}

/** Which endpoints each traffic policy uses (kube-proxy's CategorizeEndpoints). */
export interface Categorized {
  /** For Cluster policy: ready endpoints, or serving+terminating ones when none is ready. */
  cluster: PluginEndpoint[];
  /** For Local policy: local ready endpoints, or local serving+terminating ones when none is ready. */
  local: PluginEndpoint[];
}

/** Splits endpoints by kube-proxy's rule; each list stays in input order. */
export function categorizeEndpoints(endpoints: readonly PluginEndpoint[]): Categorized {
  let cluster = endpoints.filter((e) => e.ready);
  if (cluster.length === 0) cluster = endpoints.filter((e) => e.serving && e.terminating);
  let local = endpoints.filter((e) => e.local && e.ready);
  if (local.length === 0) local = endpoints.filter((e) => e.local && e.serving && e.terminating);
  return { cluster, local };
}
