// Endpoints of one Service port from its EndpointSlices, and kube-proxy's rules for which of them
// serve (pkg/proxy/topology.go CategorizeEndpoints, topology hints included). pure: no I/O.
import type { V1EndpointSlice } from './kube.js';
import type { PluginEndpoint } from '../../plugins/types.js';
import type { Protocol } from '../model/ipvs.js';
import { type Family, canonicalIP, familyOf } from '../model/addr.js';
import { arr, bool, intIn, obj, str, stringMap } from './fields.js';

/** Label tying an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/**
 * The endpoints of Service port `portName`/`protocol` in `family`, from every slice of the Service.
 * The slice port with the same name carries the number (that is how named targetPorts resolve: the
 * EndpointSlice controller looks the name up in each Pod). Like kube-proxy: the first address of an
 * endpoint only; a duplicate ip:port across slices (during slice moves) keeps the readiest copy.
 * Conditions as kube-proxy reads them (pkg/proxy/endpointslicecache.go): ready nil = true,
 * serving nil = true (not "= ready"), terminating nil = false.
 */
export function collectEndpoints(
  slices: readonly V1EndpointSlice[], portName: string, protocol: Protocol, family: Family, nodeName: string,
): PluginEndpoint[] {
  // Keyed by address: a flat string whose hash the runtime keeps, where an "ip|port" key would be
  // built and hashed per endpoint. The same address on another port (rare) goes to `otherPorts`.
  const byAddress = new Map<string, PluginEndpoint>();
  let otherPorts: Map<string, PluginEndpoint> | undefined;
  for (const slice of slices) {
    if (obj(slice)?.addressType !== family) continue;
    // Fields are read type-safely (fields.ts): a slice from YAML may hold anything; what is not of
    // the API's type is skipped, as an endpoint without an address is.
    const port = (arr(slice.ports) ?? []).map(obj).find((p) =>
      p && (p.name ?? '') === portName && (p.protocol ?? 'TCP') === protocol);
    const portNumber = intIn(port?.port, 1, 65535);
    if (portNumber === undefined) continue;
    // Frozen, like each endpoint below: plugins get them as they are (resolve.ts copies what is not).
    const labels = Object.freeze(stringMap(obj(slice.metadata)?.labels));
    for (const raw of arr(slice.endpoints) ?? []) {
      const ep = obj(raw);
      const first = arr(ep?.addresses)?.[0];
      const address = typeof first === 'string' ? canonicalIP(first) : undefined;
      if (!ep || address === undefined || familyOf(address) !== family) continue;
      const cond = obj(ep.conditions);
      const ready = bool(cond?.ready) ?? true;
      const epNode = str(ep.nodeName);
      const e: PluginEndpoint = {
        address,
        port: portNumber,
        family,
        sliceLabels: labels,
        ready,
        serving: bool(cond?.serving) ?? true,
        terminating: bool(cond?.terminating) ?? false,
        local: epNode !== undefined && epNode === nodeName,
      };
      if (epNode !== undefined) e.nodeName = epNode;
      const zone = str(ep.zone);
      if (zone !== undefined) e.zone = zone;
      const hostname = str(ep.hostname);
      if (hostname !== undefined) e.hostname = hostname;
      const hints = obj(ep.hints);
      const zoneHints = hintNames(hints?.forZones);
      if (zoneHints.length) e.zoneHints = Object.freeze(zoneHints);
      const nodeHints = hintNames(hints?.forNodes);
      if (nodeHints.length) e.nodeHints = Object.freeze(nodeHints);
      const ref = obj(ep.targetRef);
      if (ref?.kind === 'Pod' && typeof ref.name === 'string' && ref.name) e.podName = ref.name;
      Object.freeze(e);
      const old = byAddress.get(address);
      if (!old) byAddress.set(address, e);
      else if (old.port === portNumber) {
        if (rank(e) > rank(old)) byAddress.set(address, e);
      } else {
        otherPorts ??= new Map();
        const key = `${address}|${portNumber}`;
        const other = otherPorts.get(key);
        if (!other || rank(e) > rank(other)) otherPorts.set(key, e);
      }
    }
  }
  const out = [...byAddress.values()];
  if (otherPorts) out.push(...otherPorts.values());
  return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.port - b.port));
}

/** The `name` of each `{name}` entry of a hints list; entries of the wrong type are skipped. */
function hintNames(list: unknown): string[] {
  if (list === undefined) return []; // the usual case, without the flatMap below
  return (arr(list) ?? []).flatMap((h) => { const n = str(obj(h)?.name); return n ? [n] : []; });
}

function rank(e: PluginEndpoint): number {
  return e.ready ? 2 : e.serving ? 1 : 0;
}

/** Which endpoints each traffic policy uses (kube-proxy's CategorizeEndpoints). */
export interface Categorized {
  /**
   * For Cluster policy: ready endpoints (only those hinted for this node or zone when the hints
   * apply, see topologyMode), or serving+terminating ones when none is ready.
   */
  cluster: PluginEndpoint[];
  /**
   * For Local policy: local ready endpoints, or local serving+terminating ones when none is ready
   * (hints never apply).
   */
  local: PluginEndpoint[];
  /** The topology mode the Cluster list was filtered with ("" = none). */
  topology: TopologyMode;
}

/** kube-proxy's topology modes: "" (every ready endpoint), PreferSameZone, PreferSameNode. */
export type TopologyMode = '' | 'PreferSameZone' | 'PreferSameNode';

/**
 * kube-proxy's topologyModeFromHints (pkg/proxy/topology.go): over the *ready* endpoints,
 * PreferSameNode when every one has a node hint and one is hinted for this node; else
 * PreferSameZone when every one has a zone hint and one is hinted for this node's zone; else ""
 * (hints ignored: one endpoint without hints, a node without a zone label, no endpoint for this
 * zone). The EndpointSlice controller writes the hints (trafficDistribution PreferClose /
 * PreferSameZone -> zones, PreferSameNode -> nodes; topology-mode Auto -> zones); like kube-proxy,
 * the proxy follows the hints, not the Service field.
 */
export function topologyMode(
  endpoints: readonly PluginEndpoint[], nodeName: string, zone: string | undefined,
): TopologyMode {
  const ready = endpoints.filter((e) => e.ready);
  if (ready.length === 0) return '';
  if (ready.every((e) => e.nodeHints?.length) && ready.some((e) => e.nodeHints!.includes(nodeName))) {
    return 'PreferSameNode';
  }
  if (zone && ready.every((e) => e.zoneHints?.length) && ready.some((e) => e.zoneHints!.includes(zone))) {
    return 'PreferSameZone';
  }
  return '';
}

function availableForTopology(
  e: PluginEndpoint, mode: TopologyMode, nodeName: string, zone: string | undefined,
): boolean {
  if (mode === 'PreferSameNode') return e.nodeHints?.includes(nodeName) ?? false;
  if (mode === 'PreferSameZone') return zone !== undefined && (e.zoneHints?.includes(zone) ?? false);
  return true;
}

/** Splits endpoints by kube-proxy's rule; each list stays in input order. Without `where`, hints are ignored. */
export function categorizeEndpoints(
  endpoints: readonly PluginEndpoint[], where?: { nodeName: string; zone?: string | undefined },
): Categorized {
  const mode = where ? topologyMode(endpoints, where.nodeName, where.zone) : '';
  let cluster = endpoints.filter((e) => e.ready && availableForTopology(e, mode, where?.nodeName ?? '', where?.zone));
  if (cluster.length === 0) cluster = endpoints.filter((e) => e.serving && e.terminating);
  let local = endpoints.filter((e) => e.local && e.ready);
  if (local.length === 0) local = endpoints.filter((e) => e.local && e.serving && e.terminating);
  return { cluster, local, topology: mode };
}
