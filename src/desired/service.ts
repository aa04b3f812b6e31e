// One Service in, its share of the desired state out: virtual servers with their real servers, the
// VIPs to bind, set entries for the iptables path and problems. This is the unit of incremental
// work: DesiredState (state.ts) calls it only for Services whose inputs changed. pure: no I/O.
//
// kube-proxy's IPVS-mode semantics (pkg/proxy/ipvs/proxier.go syncProxyRules):
// - a virtual server per Service port per clusterIPs entry (dual-stack), per externalIPs entry, per
//   status.loadBalancer.ingress[].ip (not for ipMode Proxy), and per node address for NodePorts;
// - ClusterIP uses Local endpoints when internalTrafficPolicy is Local; external IPs, LB IPs and
//   NodePorts use them when externalTrafficPolicy is Local and the Service is externally reachable
//   (pkg/proxy/serviceport.go externalPolicyLocal = apiservice.ExternallyAccessible && Local:
//   NodePort, LoadBalancer, or ClusterIP with externalIPs). With no usable endpoint the virtual
//   server stays, empty: traffic is dropped, never sent off-node;
// - a Service without selector and without EndpointSlices still gets its (empty) virtual servers:
//   kube-proxy's ServiceChangeTracker ignores the selector, so the VIP drops rather than leaks;
// - sessionAffinity ClientIP makes it persistent for timeoutSeconds (default 10800);
// - real servers are masqueraded, as kube-proxy does; with `ipvs-operator.io/forwarding: tunnel`
//   (forwarding.ts) those of external IPs and LB IPs are ipip tunnel destinations (direct server
//   return), and those virtual servers are listed in the *-LOCAL sets so the iptables path never
//   marks their packets for masquerading (the client IP must reach the pod). IPVS does not
//   rewrite the port in tunnel mode: a Service port whose endpoints listen on another port stays
//   masqueraded, with a TunnelUnsupported problem.
import type { V1EndpointSlice, V1Node, V1Service } from './kube.js';
import type { PluginContext, PluginEndpoint, Resolution } from '../../plugins/types.js';
import type { PluginRegistry } from '../../plugins/index.js';
import {
  type Protocol, type RealServer, SvcFlag, makeRealServer, makeVirtualServer, realServerKey, virtualServerKey,
} from '../model/ipvs.js';
import { categorizeEndpoints, collectEndpoints } from './endpoints.js';
import { type Family, canonicalIP, cidrContains, familyOf, formatIp, parseCidr, parseIp, prefixToMask } from '../model/addr.js';
import { realServerProblems, virtualServerProblems } from '../ipvs/validate.js';
import { arr, describe, intIn, obj, str, stringList } from './fields.js';
import { type SchedulerChoice, chooseScheduler } from './scheduler.js';
import type { DesiredVirtualServer, Problem, SetEntry, SetName, VipKind } from './types.js';
import type { ProxyConfig } from '../config/types.js';
import { type HealthCheck, healthCheckOf } from './health-checks.js';
import { FORWARDING_ANNOTATION, chooseForwarding, tunnelledKind } from './forwarding.js';
import { addOrder, chooseEndpointOrder } from '../balance/order.js';
import { chooseSlowStart, slowStartInapplicable, SLOW_START_ANNOTATION } from '../balance/slow-start.js';
import { BALANCE_ANNOTATION, chooseBalance, clusterBalanceInapplicable } from '../balance/cluster-view.js';

/** Label selecting which proxy handles a Service (kube-proxy honours it the same way). */
export const SERVICE_PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
/** kube-proxy's default ClientIP affinity timeout (3 hours). */
export const DEFAULT_AFFINITY_TIMEOUT = 10800;
/** The API's upper bound for the ClientIP affinity timeout (one day). */
export const MAX_AFFINITY_TIMEOUT = 86400;

/** Everything but the Service and its slices that an entry depends on; rebuilt when it changes. */
export interface BuildEnv {
  config: ProxyConfig;
  registry: PluginRegistry;
  context: PluginContext;
  /** This node's addresses serving NodePorts (canonical, filtered by nodePortAddresses). */
  nodeAddresses: readonly string[];
  /** Scheduler of Services without (or with broken) annotations. */
  fallback: SchedulerChoice;
}

/** One Service's share of the desired state. */
export interface ServiceEntry {
  id: string;
  vss: DesiredVirtualServer[];
  vips: string[];
  sets: SetEntry[];
  problems: Problem[];
  /** Its health-check NodePort (LoadBalancer + externalTrafficPolicy Local), when it has one. */
  healthCheck?: HealthCheck;
}

/** "namespace/name". */
export function serviceId(s: V1Service | V1EndpointSlice): string {
  return `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`;
}

/**
 * Whether this operator handles the Service at all: the proxy-name label matches (with a
 * configured name: exactly that value; without: no label, like kube-proxy), and it is not
 * headless or ExternalName. A selector-less Service without slices is handled (empty virtual servers).
 */
export function handlesService(service: V1Service, config: ProxyConfig): boolean {
  const label = obj(obj(service.metadata)?.labels)?.[SERVICE_PROXY_NAME_LABEL];
  if (config.serviceProxyName ? label !== config.serviceProxyName : label !== undefined) return false;
  const spec = obj(service.spec);
  if (spec?.type === 'ExternalName') return false;
  const ip = spec?.clusterIP;
  return ip !== undefined && ip !== null && ip !== '' && ip !== 'None';
}

/**
 * Node addresses (InternalIP, ExternalIP) in nodePortAddresses, canonical and sorted; config
 * problems appended. Per IP family, as kube-proxy (one proxier per family; pkg/proxy/util/
 * nodeport_addresses.go NewNodePortAddresses keeps the CIDRs of its family and, when none is
 * left, matches all of that family): an IPv4-only list leaves every IPv6 address serving.
 */
export function nodePortAddressesOf(node: V1Node | undefined, config: ProxyConfig, problems: Problem[]): string[] {
  const cidrs = config.nodePortAddresses.flatMap((text) => {
    const c = parseCidr(text);
    if (!c) problems.push({ service: '', reason: 'InvalidConfig', message: `nodePortAddresses: "${text}" is not a CIDR` });
    return c ? [c] : [];
  });
  const out = new Set<string>();
  for (const raw of arr(obj(obj(node)?.status)?.addresses) ?? []) {
    const a = obj(raw);
    if (a?.type !== 'InternalIP' && a?.type !== 'ExternalIP') continue;
    const ip = parseIp(str(a.address) ?? '');
    if (!ip) continue;
    const ofFamily = cidrs.filter((c) => c.family === ip.family);
    if (ofFamily.length && !ofFamily.some((c) => cidrContains(c, ip))) continue;
    out.add(formatIp(ip));
  }
  return [...out].sort();
}

/**
 * The Service's virtual servers, VIPs, sets and problems; an empty entry when it is not handled.
 * Fields of the wrong type (as YAML can produce) and values the kernel would refuse are Problems,
 * never exceptions; every virtual and real server returned passes the IPVS clients' validation.
 */
export function buildServiceEntry(service: V1Service, slices: readonly V1EndpointSlice[], env: BuildEnv): ServiceEntry {
  const id = serviceId(service);
  const entry: ServiceEntry = { id, vss: [], vips: [], sets: [], problems: [] };
  if (!handlesService(service, env.config)) return entry;
  const spec = obj(service.spec)!;
  const problems = entry.problems;
  const invalid = (message: string) => problems.push({ service: id, reason: 'InvalidField', message });
  const annotations = obj(service.metadata)?.annotations;
  const choice = chooseScheduler(id, annotations, env.registry, env.fallback, env.context, problems);
  const forwarding = chooseForwarding(id, obj(annotations), problems);
  const order = chooseEndpointOrder(id, obj(annotations), problems);
  const slowStartMs = chooseSlowStart(id, obj(annotations), problems);
  let warnedSlowStart = false;
  const balance = chooseBalance(id, obj(annotations), problems);
  let warnedBalance = false;

  const ipsField = stringList(spec.clusterIPs, 'spec.clusterIPs');
  const clusterIP = str(spec.clusterIP);
  if (clusterIP === undefined) invalid(`spec.clusterIP: ${describe(spec.clusterIP)} is not a string`);
  ipsField.errors.forEach(invalid);
  const clusterIPs = addressList(ipsField.values.length ? ipsField.values : clusterIP ? [clusterIP] : [], 'spec.clusterIPs', id, problems);
  const families = [...new Set(clusterIPs.map(familyOf))];
  const type = str(spec.type) ?? 'ClusterIP';
  const hasNodePorts = type === 'NodePort' || type === 'LoadBalancer';
  const extField = stringList(spec.externalIPs, 'spec.externalIPs');
  extField.errors.forEach(invalid);
  const externalIPs = addressList(extField.values, 'spec.externalIPs', id, problems);
  const lbIPs = type === 'LoadBalancer' ? addressList(ingressIPs(service, invalid), 'status.loadBalancer.ingress', id, problems) : [];
  // kube-proxy's ExternallyAccessible: NodePort/LoadBalancer, or any type with externalIPs.
  const extLocal = (hasNodePorts || externalIPs.length > 0) && spec.externalTrafficPolicy === 'Local';
  const intLocal = spec.internalTrafficPolicy === 'Local';
  const affinity = spec.sessionAffinity === 'ClientIP';
  const timeout = affinityTimeout(spec, affinity, invalid);
  const rangesField = type === 'LoadBalancer' ? stringList(spec.loadBalancerSourceRanges, 'spec.loadBalancerSourceRanges') : { values: [], errors: [] };
  rangesField.errors.forEach(invalid);
  const sourceRanges = rangesField.values;
  entry.vips.push(...new Set([...clusterIPs, ...externalIPs, ...lbIPs]));
  if (forwarding === 'tunnel' && externalIPs.length === 0 && lbIPs.length === 0) {
    problems.push({ service: id, reason: 'IneffectiveForwarding',
      message: `${FORWARDING_ANNOTATION}: tunnel applies to external IPs and load-balancer IPs only, and this Service has none; its ClusterIPs and NodePorts stay masqueraded` });
  }

  const seen = new Set<string>();
  /** Addresses of this node's ready endpoints, over all ports and families (the health check's count). */
  const localReady = new Set<string>();
  let warnedPersistence = false;
  const ports = spec.ports === undefined || spec.ports === null ? [] : arr(spec.ports);
  if (!ports) invalid(`spec.ports: ${describe(spec.ports)} is not a list`);
  for (const [i, raw] of (ports ?? []).entries()) {
    const sp = obj(raw);
    if (!sp) {
      invalid(`spec.ports[${i}]: ${describe(raw)} is not an object`);
      continue;
    }
    const portName = str(sp.name) ?? '';
    if (sp.name !== undefined && sp.name !== null && typeof sp.name !== 'string') invalid(`spec.ports[${i}].name: ${describe(sp.name)} is not a string`);
    const protocol = (sp.protocol ?? 'TCP') as Protocol;
    if (protocol !== 'TCP' && protocol !== 'UDP' && protocol !== 'SCTP') {
      problems.push({ service: id, reason: 'UnsupportedProtocol', message: `port "${portName}": protocol ${describe(protocol)} is not TCP, UDP or SCTP` });
      continue;
    }
    const port = intIn(sp.port, 1, 65535);
    if (port === undefined) {
      problems.push({ service: id, reason: 'InvalidPort', message: `port "${portName}": port ${describe(sp.port)} is not an integer in 1..65535; not programmed` });
      continue;
    }
    const nodePort = sp.nodePort === undefined || sp.nodePort === null || sp.nodePort === 0 ? undefined : intIn(sp.nodePort, 1, 65535);
    if (nodePort === undefined && sp.nodePort !== undefined && sp.nodePort !== null && sp.nodePort !== 0) {
      problems.push({ service: id, reason: 'InvalidPort', message: `port "${portName}": nodePort ${describe(sp.nodePort)} is not an integer in 1..65535; no NodePort programmed` });
    }
    let warnedPort = false;
    for (const family of families) {
      const endpoints = collectEndpoints(slices, portName, protocol, family, env.context.nodeName);
      for (const e of endpoints) if (e.local && e.ready) localReady.add(e.address);
      const cat = categorizeEndpoints(endpoints, { nodeName: env.context.nodeName, zone: env.context.nodeZone });
      // Hairpin: a local endpoint that reaches its own Service may be sent to itself; kube-proxy
      // lists local endpoints (ip,port,ip) so POSTROUTING masquerades exactly those packets.
      for (const e of new Set([...cat.cluster, ...cat.local])) {
        if (e.local) entry.sets.push({ set: 'KUBE-LOOP-BACK', family, protocol, port: e.port, address: e.address, source: e.address });
      }
      const resolved = new Map<readonly PluginEndpoint[], { res: Resolution; dests: RealServer[]; tunnel?: RealServer[] | undefined }>();
      const resolveFor = (eps: PluginEndpoint[]) => {
        let r = resolved.get(eps);
        if (!r) {
          const res = resolveSafely(choice, env, eps, id, problems);
          const sorted = eps.map((e, i) => makeRealServer({ address: e.address, port: e.port, weight: res.weights[i] ?? 1, forward: 'masq' }))
            .sort((a, b) => cmp(realServerKey(a), realServerKey(b)));
          // The planner adds real servers in this order (balance/order.ts says why it is rotated).
          const dests = order === 'sorted' ? sorted : addOrder(sorted, env.context.nodeName, `${id}/${portName}/${family}`);
          r = { res, dests };
          resolved.set(eps, r);
        }
        return r;
      };
      /**
       * The real servers as tunnel destinations, or undefined when some endpoint listens on another
       * port than the Service's: tunnel mode keeps the packet's port, so those stay masqueraded.
       */
      const tunnelDests = (r: { dests: RealServer[]; tunnel?: RealServer[] | undefined }): RealServer[] | undefined => {
        if (!('tunnel' in r)) {
          r.tunnel = r.dests.every((rs) => rs.port === port) ? r.dests.map((rs) => ({ ...rs, forward: 'tunnel' as const, tunnelType: 'ipip' as const })) : undefined;
        }
        if (!r.tunnel && !warnedPort) {
          warnedPort = true;
          problems.push({ service: id, reason: 'TunnelUnsupported',
            message: `port "${portName}": an endpoint listens on another port than ${port} and IPVS tunnelling keeps the port (no remapping); its external IPs stay masqueraded` });
        }
        return r.tunnel;
      };
      /** Adds a virtual server; true when its real servers are tunnel destinations. */
      const add = (kind: VipKind, address: string, port: number, local: boolean): boolean => {
        const r = resolveFor(local ? cat.local : cat.cluster);
        const res = r.res;
        const tunnelled = forwarding === 'tunnel' && tunnelledKind(kind) ? tunnelDests(r) : undefined;
        const dests = tunnelled ?? r.dests;
        if (res.persistence && !affinity && !warnedPersistence) {
          warnedPersistence = true;
          problems.push({ service: id, reason: 'IneffectiveSchedulerOption',
            message: 'affinityNetmask has no effect without sessionAffinity: ClientIP' });
        }
        const vs = makeVirtualServer({
          family, protocol, address, port,
          scheduler: res.scheduler,
          flags: (res.flags & (SvcFlag.SCHED1 | SvcFlag.SCHED2 | SvcFlag.SCHED3)) | (affinity ? SvcFlag.PERSISTENT : 0),
          ...(affinity ? { timeout, netmask: netmaskFor(family, res.persistence) } : {}),
        });
        const key = virtualServerKey(vs);
        if (seen.has(key)) return tunnelled !== undefined; // e.g. an external IP equal to an LB IP: one virtual server
        seen.add(key);
        const notRamped = slowStartMs === undefined ? undefined : slowStartInapplicable(res.scheduler);
        if (notRamped && !warnedSlowStart) {
          warnedSlowStart = true;
          problems.push({ service: id, reason: 'SlowStartInapplicable', message: `${SLOW_START_ANNOTATION}: ${notRamped}; no slow start` });
        }
        const notBalanced = balance === 'cluster' ? clusterBalanceInapplicable(res.scheduler) : undefined;
        if (notBalanced && !warnedBalance) {
          warnedBalance = true;
          problems.push({ service: id, reason: 'ClusterBalanceInapplicable', message: `${BALANCE_ANNOTATION}: ${notBalanced}; balancing locally` });
        }
        entry.vss.push({ vs, dests, origin: { namespace: str(obj(service.metadata)?.namespace) ?? '', name: str(obj(service.metadata)?.name) ?? '', portName, kind, plugin: choice.plugin.name },
          ...(slowStartMs !== undefined && !notRamped ? { slowStartMs } : {}),
          ...(balance === 'cluster' && !notBalanced ? { clusterBalance: true as const } : {}) });
        return tunnelled !== undefined;
      };
      const set = (name: SetName, extra: Partial<SetEntry>) => entry.sets.push({ set: name, family, protocol, port, ...extra });

      for (const ip of clusterIPs.filter((a) => familyOf(a) === family)) {
        add('cluster-ip', ip, port, intLocal);
        set('KUBE-CLUSTER-IP', { address: ip });
      }
      for (const ip of externalIPs.filter((a) => familyOf(a) === family)) {
        // A tunnelled one is never marked for masquerading either (render.ts: the *-LOCAL sets RETURN).
        const tunnelled = add('external-ip', ip, port, extLocal);
        set('KUBE-EXTERNAL-IP', { address: ip });
        if (extLocal || tunnelled) set('KUBE-EXTERNAL-IP-LOCAL', { address: ip });
      }
      for (const ip of lbIPs.filter((a) => familyOf(a) === family)) {
        const tunnelled = add('load-balancer', ip, port, extLocal);
        set('KUBE-LOAD-BALANCER', { address: ip });
        if (extLocal || tunnelled) set('KUBE-LOAD-BALANCER-LOCAL', { address: ip });
        const ranges = sourceRanges.filter((r) => parseCidr(r.trim())?.family === family);
        if (ranges.length) set('KUBE-LOAD-BALANCER-FW', { address: ip });
        for (const r of ranges) set('KUBE-LOAD-BALANCER-SOURCE-CIDR', { address: ip, cidr: r.trim() });
        // kube-proxy's allowFromNode: when a range admits this node, the node itself (which sends
        // to a local LB IP from that same address) may pass the firewall too.
        const admitsNode = ranges.some((r) => env.nodeAddresses.some((n) => cidrContains(parseCidr(r.trim())!, parseIp(n)!)));
        if (admitsNode) set('KUBE-LOAD-BALANCER-SOURCE-IP', { address: ip, source: ip });
      }
      if (hasNodePorts && nodePort !== undefined) {
        for (const ip of env.nodeAddresses.filter((a) => familyOf(a) === family)) add('node-port', ip, nodePort, extLocal);
        const np = (name: SetName, extra: Partial<SetEntry>) => entry.sets.push({ set: name, family, protocol, port: nodePort, ...extra });
        if (protocol === 'SCTP') {
          // kube-proxy's SCTP NodePort set is hash:ip,port over the node addresses.
          for (const ip of env.nodeAddresses.filter((a) => familyOf(a) === family)) {
            np('KUBE-NODE-PORT-SCTP-HASH', { address: ip });
            if (extLocal) np('KUBE-NODE-PORT-LOCAL-SCTP-HASH', { address: ip });
          }
        } else {
          np(`KUBE-NODE-PORT-${protocol}`, {});
          if (extLocal) np(`KUBE-NODE-PORT-LOCAL-${protocol}`, {});
        }
      }
    }
  }
  for (const r of sourceRanges) {
    if (!parseCidr(r.trim())) problems.push({ service: id, reason: 'InvalidSourceRange', message: `spec.loadBalancerSourceRanges: "${r}" is not a CIDR` });
  }
  entry.vss = entry.vss.flatMap((d) => acceptedByKernel(d, id, problems));
  const healthCheck = healthCheckOf(id, spec, localReady, problems);
  if (healthCheck) entry.healthCheck = healthCheck;
  return entry;
}

/**
 * The virtual server with the real servers the IPVS clients accept (validate.ts, the same check
 * NetlinkIpvs and FakeIpvs make); a refused one is dropped with a Problem instead of failing at
 * apply forever. [] when the virtual server itself is refused.
 */
function acceptedByKernel(d: DesiredVirtualServer, id: string, problems: Problem[]): DesiredVirtualServer[] {
  const vsProblems = virtualServerProblems(d.vs);
  if (vsProblems.length) {
    problems.push({ service: id, reason: 'InvalidVirtualServer', message: `${virtualServerKey(d.vs)}: ${vsProblems.join('; ')}; not programmed` });
    return [];
  }
  const dests = d.dests.filter((rs) => {
    const p = realServerProblems(d.vs, rs, true);
    if (p.length) problems.push({ service: id, reason: 'InvalidEndpoint', message: `${virtualServerKey(d.vs)} -> ${realServerKey(rs)}: ${p.join('; ')}; left out` });
    return p.length === 0;
  });
  return [dests.length === d.dests.length ? d : { ...d, dests }];
}

/** status.loadBalancer.ingress[].ip, except ipMode Proxy (the LB proxies: no VIP here). */
function ingressIPs(service: V1Service, invalid: (m: string) => void): string[] {
  const ingress = obj(obj(service.status)?.loadBalancer)?.ingress;
  if (ingress === undefined || ingress === null) return [];
  const list = arr(ingress);
  if (!list) {
    invalid(`status.loadBalancer.ingress: ${describe(ingress)} is not a list`);
    return [];
  }
  const out: string[] = [];
  list.forEach((raw, i) => {
    const ing = obj(raw);
    if (!ing) return invalid(`status.loadBalancer.ingress[${i}]: ${describe(raw)} is not an object`);
    if (ing.ip === undefined || ing.ip === null || ing.ip === '' || ing.ipMode === 'Proxy') return;
    if (typeof ing.ip !== 'string') return invalid(`status.loadBalancer.ingress[${i}].ip: ${describe(ing.ip)} is not a string`);
    out.push(ing.ip);
  });
  return out;
}

/** sessionAffinityConfig.clientIP.timeoutSeconds (1..86400 as the API allows), default 3 hours. */
function affinityTimeout(spec: Record<string, unknown>, affinity: boolean, invalid: (m: string) => void): number {
  const raw = obj(obj(spec.sessionAffinityConfig)?.clientIP)?.timeoutSeconds;
  if (raw === undefined || raw === null) return DEFAULT_AFFINITY_TIMEOUT;
  const t = intIn(raw, 1, MAX_AFFINITY_TIMEOUT);
  if (t === undefined && affinity) {
    invalid(`spec.sessionAffinityConfig.clientIP.timeoutSeconds: ${describe(raw)} is not an integer in 1..${MAX_AFFINITY_TIMEOUT}; using ${DEFAULT_AFFINITY_TIMEOUT}`);
  }
  return t ?? DEFAULT_AFFINITY_TIMEOUT;
}

/** Canonical addresses; a problem for each that is not an IP. */
function addressList(list: readonly string[], field: string, id: string, problems: Problem[]): string[] {
  const out: string[] = [];
  for (const raw of list) {
    const ip = canonicalIP(raw.trim());
    if (ip === undefined) problems.push({ service: id, reason: 'InvalidAddress', message: `${field}: "${raw}" is not an IP address` });
    else if (!out.includes(ip)) out.push(ip);
  }
  return out;
}

/** IPVS persistence netmask: a dotted mask as u32 for IPv4, a prefix length for IPv6. */
function netmaskFor(family: Family, p: Resolution['persistence']): number {
  if (family === 'IPv6') return p?.ipv6Prefix ?? 128;
  return prefixToMask(p?.ipv4Prefix ?? 32);
}

/**
 * Runs the plugin; an extra plugin that throws or answers nonsense (wrong weight count, negative
 * weights, a scheduler the kernel lacks) is reported and the default scheduler used instead.
 */
function resolveSafely(choice: SchedulerChoice, env: BuildEnv, eps: readonly PluginEndpoint[], id: string, problems: Problem[]): Resolution {
  // Each call gets its own frozen copies: a plugin that mutates what it is given (the shared set
  // of kernel schedulers, the endpoints, the options) changes nothing another Service sees.
  const context = frozenContext(env.context);
  const attempt = (c: SchedulerChoice): Resolution | string => {
    try {
      const res: unknown = c.plugin.resolve(deepFrozenCopy(c.options), frozenEndpoints(eps), context);
      return checkResolution(res, eps.length, env.context.availableSchedulers);
    } catch (e) {
      return `threw: ${firstLineOf(e)}`;
    }
  };
  const first = attempt(choice);
  if (typeof first !== 'string') return first;
  problems.push({ service: id, reason: 'SchedulerPluginFailed', message: `plugin "${choice.plugin.name}" ${first}; using the default scheduler "${env.fallback.plugin.name}"` });
  const second = choice === env.fallback ? first : attempt(env.fallback);
  if (typeof second !== 'string') return second;
  return { scheduler: 'rr', flags: 0, weights: eps.map(() => 1) };
}

/** A plugin's answer checked field by field (getters that throw are caught by the caller); the reason when it is not usable. */
function checkResolution(res: unknown, n: number, available: ReadonlySet<string> | undefined): Resolution | string {
  if (typeof res !== 'object' || res === null) return 'returned no resolution';
  const r = res as Record<string, unknown>;
  const scheduler = r.scheduler;
  if (typeof scheduler !== 'string' || !/^[a-z0-9_]{1,15}$/.test(scheduler)) return 'returned no valid scheduler name';
  const weights = r.weights;
  if (!Array.isArray(weights) || weights.length !== n) return `returned ${Array.isArray(weights) ? weights.length : 'no'} weights for ${n} endpoints`;
  if (!weights.every((w) => Number.isInteger(w) && w >= 0 && w <= 0x7fffffff)) return 'returned a weight that is not an integer in [0, 2^31)';
  if (available && !available.has(scheduler)) return `chose scheduler "${scheduler}" which the kernel lacks`;
  const p = r.persistence;
  let persistence: Resolution['persistence'];
  if (p !== undefined) {
    if (typeof p !== 'object' || p === null) return 'returned a persistence that is not an object';
    const { ipv4Prefix, ipv6Prefix } = p as Record<string, unknown>;
    if (ipv4Prefix !== undefined && !(Number.isInteger(ipv4Prefix) && (ipv4Prefix as number) >= 0 && (ipv4Prefix as number) <= 32)) return 'returned an ipv4Prefix outside 0..32';
    if (ipv6Prefix !== undefined && !(Number.isInteger(ipv6Prefix) && (ipv6Prefix as number) >= 0 && (ipv6Prefix as number) <= 128)) return 'returned an ipv6Prefix outside 0..128';
    persistence = { ...(ipv4Prefix === undefined ? {} : { ipv4Prefix: ipv4Prefix as number }), ...(ipv6Prefix === undefined ? {} : { ipv6Prefix: ipv6Prefix as number }) };
  }
  const flags = Number.isInteger(r.flags) && (r.flags as number) >= 0 && (r.flags as number) <= 0xffff ? r.flags as number : 0;
  return { scheduler, flags, weights: [...weights] as number[], ...(persistence ? { persistence } : {}) };
}

/** A deep copy of plain data, frozen all the way down. */
function deepFrozenCopy<T>(v: T): T {
  const copy = structuredClone(v);
  const freeze = (o: unknown): void => {
    if (typeof o !== 'object' || o === null || Object.isFrozen(o)) return;
    Object.freeze(o);
    for (const x of Object.values(o)) freeze(x);
  };
  freeze(copy);
  return copy;
}

/**
 * Frozen copies of the endpoints, their nested records and lists copied too: on the path of every
 * Service's build, so a field-wise copy (about twice as fast as structuredClone here) rather than
 * a generic deep one. A field added to PluginEndpoint that holds an object must be copied here.
 */
function frozenEndpoints(eps: readonly PluginEndpoint[]): PluginEndpoint[] {
  return Object.freeze(eps.map((e) => Object.freeze({
    ...e,
    sliceLabels: Object.freeze({ ...e.sliceLabels }),
    ...(e.zoneHints ? { zoneHints: Object.freeze([...e.zoneHints]) } : {}),
    ...(e.nodeHints ? { nodeHints: Object.freeze([...e.nodeHints]) } : {}),
  }))) as PluginEndpoint[];
}

/** The plugin context with a read-only view of the scheduler set (a frozen Set can still be added to). */
function frozenContext(c: PluginContext): PluginContext {
  const set = c.availableSchedulers;
  const view: ReadonlySet<string> | undefined = set && Object.freeze({
    has: (x: string) => set.has(x), get size() { return set.size; },
    forEach: (f: (v: string, k: string, s: ReadonlySet<string>) => void) => set.forEach((v) => f(v, v, view!)),
    entries: () => set.entries(), keys: () => set.keys(), values: () => set.values(), [Symbol.iterator]: () => set.values(),
  } as ReadonlySet<string>);
  return Object.freeze({ ...c, ...(view ? { availableSchedulers: view } : {}) });
}

function firstLineOf(e: unknown): string {
  try {
    return String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 300);
  } catch {
    return 'an unprintable error';
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
