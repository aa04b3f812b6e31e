// The first half of one Service's build: the Service, its EndpointSlices and the environment
// (config, node addresses, plugins) read into a checked ParsedService. Every field of the wrong
// type (as YAML can produce) or out of range is a Problem here, never an exception; service.ts
// maps the result to virtual servers, VIPs and sets without looking at the API objects again.
// pure: no I/O.
import type { V1EndpointSlice, V1Service } from './kube.js';
import type { PluginContext, PluginEndpoint } from '../../plugins/types.js';
import type { PluginRegistry } from '../../plugins/index.js';
import type { Protocol } from '../model/ipvs.js';
import { categorizeEndpoints, collectEndpoints } from './endpoints.js';
import { type Cidr, type Family, canonicalIP, familyOf, parseCidr } from '../model/addr.js';
import { arr, describe, intIn, obj, str, stringList } from './fields.js';
import { type SchedulerChoice, chooseScheduler } from './scheduler.js';
import type { Problem } from './types.js';
import type { ProxyConfig } from '../config/types.js';
import { type HealthCheck, healthCheckOf } from './health-checks.js';
import { FORWARDING_ANNOTATION, type ServiceForwarding, chooseForwarding } from './forwarding.js';
import { type EndpointOrder, chooseEndpointOrder } from '../balance/order.js';
import { chooseSlowStart } from '../balance/slow-start.js';
import { chooseBalance } from '../balance/cluster-view.js';

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

/**
 * A handled Service as checked values. Its problems keep the order in which the build has always
 * reported them: `problems` (annotations and Service fields), then each port's, then the build's
 * own (plugins, tunnelling, options without effect), `rangeProblems`, the kernel's refusals and
 * last `healthCheckProblems`.
 */
export interface ParsedService {
  id: string;
  namespace: string;
  name: string;
  choice: SchedulerChoice;
  forwarding: ServiceForwarding;
  order: EndpointOrder;
  slowStartMs: number | undefined;
  balance: 'local' | 'cluster';
  /** Canonical, without duplicates, in the Service's order. */
  clusterIPs: string[];
  externalIPs: string[];
  /** status.loadBalancer.ingress IPs (LoadBalancer only, not ipMode Proxy). */
  lbIPs: string[];
  /** The families of the ClusterIPs: a virtual server per port is made for each. */
  families: Family[];
  /** NodePort or LoadBalancer. */
  hasNodePorts: boolean;
  /** External IPs, LB IPs and NodePorts use Local endpoints (kube-proxy's externalPolicyLocal). */
  extLocal: boolean;
  /** ClusterIPs use Local endpoints (internalTrafficPolicy Local). */
  intLocal: boolean;
  /** sessionAffinity ClientIP: its timeout in seconds; undefined without affinity. */
  affinityTimeout: number | undefined;
  /** The valid loadBalancerSourceRanges (LoadBalancer only), trimmed. */
  sourceRanges: Array<{ text: string; cidr: Cidr }>;
  ports: ParsedPort[];
  problems: Problem[];
  rangeProblems: Problem[];
  healthCheck: HealthCheck | undefined;
  healthCheckProblems: Problem[];
}

/** One entry of spec.ports: `port` undefined when it cannot be programmed (its problems say why). */
export interface ParsedPort {
  problems: Problem[];
  port?: ServicePort;
}

/** A Service port that can be programmed, with its endpoints per family of the Service. */
export interface ServicePort {
  name: string;
  protocol: Protocol;
  port: number;
  /** Undefined when the Service port has none, or an invalid one. */
  nodePort: number | undefined;
  endpoints: FamilyEndpoints[];
}

/** A port's endpoints of one family, as each traffic policy uses them (endpoints.ts). */
export interface FamilyEndpoints {
  family: Family;
  cluster: PluginEndpoint[];
  local: PluginEndpoint[];
}

/** "namespace/name". */
export function serviceId(s: V1Service | V1EndpointSlice): string {
  // join makes a flat string; a template literal of 13 characters or more, a tree of cons strings
  // that the Maps keyed by it keep (model/ipvs.ts formatHostPort).
  return [s.metadata?.namespace ?? '', s.metadata?.name ?? ''].join('/');
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

/** The Service read and checked; undefined when this operator does not handle it (handlesService). */
export function parseService(
  service: V1Service, slices: readonly V1EndpointSlice[], env: BuildEnv,
): ParsedService | undefined {
  if (!handlesService(service, env.config)) return undefined;
  const id = serviceId(service);
  const spec = obj(service.spec)!;
  const problems: Problem[] = [];
  const invalid = (message: string) => problems.push({ service: id, reason: 'InvalidField', message });
  const annotations = obj(service.metadata)?.annotations;
  const choice = chooseScheduler(id, annotations, env.registry, env.fallback, env.context, problems);
  const forwarding = chooseForwarding(id, obj(annotations), problems);
  const order = chooseEndpointOrder(id, obj(annotations), problems);
  const slowStartMs = chooseSlowStart(id, obj(annotations), problems);
  const balance = chooseBalance(id, obj(annotations), problems);

  const ipsField = stringList(spec.clusterIPs, 'spec.clusterIPs');
  const clusterIP = str(spec.clusterIP);
  if (clusterIP === undefined) invalid(`spec.clusterIP: ${describe(spec.clusterIP)} is not a string`);
  ipsField.errors.forEach(invalid);
  const clusterIPs = addressList(ipsField.values.length ? ipsField.values : clusterIP ? [clusterIP] : [],
    'spec.clusterIPs', id, problems);
  const type = str(spec.type) ?? 'ClusterIP';
  const hasNodePorts = type === 'NodePort' || type === 'LoadBalancer';
  const extField = stringList(spec.externalIPs, 'spec.externalIPs');
  extField.errors.forEach(invalid);
  const externalIPs = addressList(extField.values, 'spec.externalIPs', id, problems);
  const lbIPs = type === 'LoadBalancer'
    ? addressList(ingressIPs(service, invalid), 'status.loadBalancer.ingress', id, problems) : [];
  const affinity = spec.sessionAffinity === 'ClientIP';
  const timeout = affinityTimeout(spec, affinity, invalid);
  const rangesField = type === 'LoadBalancer'
    ? stringList(spec.loadBalancerSourceRanges, 'spec.loadBalancerSourceRanges') : { values: [], errors: [] };
  rangesField.errors.forEach(invalid);
  if (forwarding === 'tunnel' && externalIPs.length === 0 && lbIPs.length === 0) {
    problems.push({ service: id, reason: 'IneffectiveForwarding',
      message: `${FORWARDING_ANNOTATION}: tunnel applies to external IPs and load-balancer IPs only, and this ` +
        `Service has none; its ClusterIPs and NodePorts stay masqueraded` });
  }
  const sourceRanges: ParsedService['sourceRanges'] = [];
  const rangeProblems: Problem[] = [];
  for (const r of rangesField.values) {
    const cidr = parseCidr(r.trim());
    if (cidr) sourceRanges.push({ text: r.trim(), cidr });
    else rangeProblems.push(
      { service: id, reason: 'InvalidSourceRange', message: `spec.loadBalancerSourceRanges: "${r}" is not a CIDR` });
  }

  const families = [...new Set(clusterIPs.map(familyOf))];
  /** Addresses of this node's ready endpoints, over all ports and families (the health check's count). */
  const localReady = new Set<string>();
  const ports = spec.ports === undefined || spec.ports === null ? [] : arr(spec.ports);
  if (!ports) invalid(`spec.ports: ${describe(spec.ports)} is not a list`);
  const parsedPorts = (ports ?? []).map((raw, i) => parsePort(raw, i, id, families, slices, env.context, localReady));
  const healthCheckProblems: Problem[] = [];
  const healthCheck = healthCheckOf(id, spec, localReady, healthCheckProblems);
  return {
    id,
    namespace: str(obj(service.metadata)?.namespace) ?? '',
    name: str(obj(service.metadata)?.name) ?? '',
    choice, forwarding, order, slowStartMs, balance,
    clusterIPs, externalIPs, lbIPs, families, hasNodePorts,
    // kube-proxy's ExternallyAccessible: NodePort/LoadBalancer, or any type with externalIPs.
    extLocal: (hasNodePorts || externalIPs.length > 0) && spec.externalTrafficPolicy === 'Local',
    intLocal: spec.internalTrafficPolicy === 'Local',
    affinityTimeout: affinity ? timeout : undefined,
    sourceRanges, ports: parsedPorts, problems, rangeProblems, healthCheck, healthCheckProblems,
  };
}

/** spec.ports[i] with its endpoints; this node's ready endpoint addresses are added to `localReady`. */
function parsePort(
  raw: unknown, i: number, id: string, families: readonly Family[], slices: readonly V1EndpointSlice[],
  context: PluginContext, localReady: Set<string>,
): ParsedPort {
  const problems: Problem[] = [];
  const invalid = (message: string) => problems.push({ service: id, reason: 'InvalidField', message });
  const sp = obj(raw);
  if (!sp) {
    invalid(`spec.ports[${i}]: ${describe(raw)} is not an object`);
    return { problems };
  }
  const name = str(sp.name) ?? '';
  if (sp.name !== undefined && sp.name !== null && typeof sp.name !== 'string') {
    invalid(`spec.ports[${i}].name: ${describe(sp.name)} is not a string`);
  }
  const protocol = (sp.protocol ?? 'TCP') as Protocol;
  if (protocol !== 'TCP' && protocol !== 'UDP' && protocol !== 'SCTP') {
    problems.push({ service: id, reason: 'UnsupportedProtocol',
      message: `port "${name}": protocol ${describe(protocol)} is not TCP, UDP or SCTP` });
    return { problems };
  }
  const port = intIn(sp.port, 1, 65535);
  if (port === undefined) {
    problems.push({ service: id, reason: 'InvalidPort',
      message: `port "${name}": port ${describe(sp.port)} is not an integer in 1..65535; not programmed` });
    return { problems };
  }
  const nodePort = sp.nodePort === undefined || sp.nodePort === null || sp.nodePort === 0
    ? undefined : intIn(sp.nodePort, 1, 65535);
  if (nodePort === undefined && sp.nodePort !== undefined && sp.nodePort !== null && sp.nodePort !== 0) {
    const message = `port "${name}": nodePort ${describe(sp.nodePort)} is not an integer in 1..65535; `
      + 'no NodePort programmed';
    problems.push({ service: id, reason: 'InvalidPort', message });
  }
  const endpoints = families.map((family): FamilyEndpoints => {
    const all = collectEndpoints(slices, name, protocol, family, context.nodeName);
    for (const e of all) if (e.local && e.ready) localReady.add(e.address);
    const { cluster, local } = categorizeEndpoints(all, { nodeName: context.nodeName, zone: context.nodeZone });
    return { family, cluster, local };
  });
  return { problems, port: { name, protocol, port, nodePort, endpoints } };
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
    if (typeof ing.ip !== 'string') {
      return invalid(`status.loadBalancer.ingress[${i}].ip: ${describe(ing.ip)} is not a string`);
    }
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
    invalid(`spec.sessionAffinityConfig.clientIP.timeoutSeconds: ${describe(raw)} is not an integer in ` +
      `1..${MAX_AFFINITY_TIMEOUT}; using ${DEFAULT_AFFINITY_TIMEOUT}`);
  }
  return t ?? DEFAULT_AFFINITY_TIMEOUT;
}

/** Canonical addresses; a problem for each that is not an IP. */
function addressList(list: readonly string[], field: string, id: string, problems: Problem[]): string[] {
  const out: string[] = [];
  for (const raw of list) {
    const ip = canonicalIP(raw.trim());
    if (ip === undefined) {
      problems.push({ service: id, reason: 'InvalidAddress', message: `${field}: "${raw}" is not an IP address` });
    }
    else if (!out.includes(ip)) out.push(ip);
  }
  return out;
}
