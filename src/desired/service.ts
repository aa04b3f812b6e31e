// One Service in, its share of the desired state out: virtual servers with their real servers, the
// VIPs to bind, set entries for the iptables path and problems. This is the unit of incremental
// work: DesiredState (state.ts) calls it only for Services whose inputs changed. Parse, then
// build: service-parse.ts reads and checks the Service and its slices, and the build here maps
// that value to the entry. pure: no I/O. The kube-proxy semantics it follows are listed in
// docs/semantics.md ("How a Service maps to IPVS").
import type { V1EndpointSlice, V1Service } from './kube.js';
import type { PluginEndpoint, Resolution } from '../../plugins/types.js';
import {
  type RealServer, SvcFlag, makeRealServer, makeVirtualServer, realServerKey, virtualServerKey,
} from '../model/ipvs.js';
import { type Family, cidrContains, familyOf, parseIp, prefixToMask } from '../model/addr.js';
import { realServerProblems, virtualServerProblems } from '../ipvs/validate.js';
import type { DesiredVirtualServer, Problem, SetEntry, SetName, VipKind } from './types.js';
import type { HealthCheck } from './health-checks.js';
import { tunnelledKind } from './forwarding.js';
import { addOrder } from '../balance/order.js';
import { slowStartInapplicable, SLOW_START_ANNOTATION } from '../balance/slow-start.js';
import { BALANCE_ANNOTATION, clusterBalanceInapplicable } from '../balance/cluster-view.js';
import {
  type BuildEnv, type FamilyEndpoints, type ParsedService, type ServicePort, parseService, serviceId,
} from './service-parse.js';
import { resolveSafely } from './resolve.js';

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

/**
 * The Service's virtual servers, VIPs, sets and problems; an empty entry when it is not handled.
 * Fields of the wrong type (as YAML can produce) and values the kernel would refuse are Problems,
 * never exceptions; every virtual and real server returned passes the IPVS clients' validation.
 */
export function buildServiceEntry(service: V1Service, slices: readonly V1EndpointSlice[], env: BuildEnv): ServiceEntry {
  const parsed = parseService(service, slices, env);
  return parsed ? buildEntry(parsed, env) : { id: serviceId(service), vss: [], vips: [], sets: [], problems: [] };
}

/**
 * The entry of a parsed Service: its problems first, then what its ports give (see ParsedService
 * for the order of problems).
 */
export function buildEntry(p: ParsedService, env: BuildEnv): ServiceEntry {
  const entry: ServiceEntry = { id: p.id, vss: [], vips: [...new Set([...p.clusterIPs, ...p.externalIPs, ...p.lbIPs])],
    sets: [], problems: [...p.problems] };
  const b: Build = { p, env, entry, seen: new Set(), said: new Set() };
  for (const [index, { problems, port }] of p.ports.entries()) {
    entry.problems.push(...problems);
    if (port) for (const eps of port.endpoints) buildPortFamily(b, { index, port, eps, resolved: new Map() });
  }
  entry.problems.push(...p.rangeProblems);
  entry.vss = entry.vss.flatMap((d) => acceptedByKernel(d, p.id, entry.problems));
  entry.problems.push(...p.healthCheckProblems);
  if (p.healthCheck) entry.healthCheck = p.healthCheck;
  // Copies of exact length: an array grown by push keeps room for 16 more (152 bytes for one item),
  // and the desired state keeps these for every Service.
  entry.vss = entry.vss.slice();
  entry.sets = entry.sets.slice();
  entry.problems = entry.problems.slice();
  return entry;
}

/** What the build of one Service keeps across its ports. */
interface Build {
  readonly p: ParsedService;
  readonly env: BuildEnv;
  readonly entry: ServiceEntry;
  /** Keys of the virtual servers made: an external IP equal to an LB IP gives one virtual server. */
  readonly seen: Set<string>;
  /** Keys of the problems reported once per Service (or once per port). */
  readonly said: Set<string>;
}

/** One Service port in one family, while its virtual servers are made. */
interface PortFamily {
  /** The port's index in spec.ports. */
  readonly index: number;
  readonly port: ServicePort;
  readonly eps: FamilyEndpoints;
  /** The real servers of each endpoint list (cluster, local), resolved by the plugin on first use. */
  readonly resolved: Map<readonly PluginEndpoint[], Resolved>;
}

interface Resolved { res: Resolution; dests: RealServer[]; tunnel?: RealServer[] | undefined }

/** Pushes the problem unless one with this key was pushed for the Service before. */
function once(b: Build, key: string, problem: Problem): void {
  if (b.said.has(key)) return;
  b.said.add(key);
  b.entry.problems.push(problem);
}

/** The virtual servers and set entries of one port in one family. */
function buildPortFamily(b: Build, pf: PortFamily): void {
  const { p, env, entry } = b;
  const { family, cluster, local } = pf.eps;
  const { protocol, port, nodePort } = pf.port;
  // Hairpin: a local endpoint that reaches its own Service may be sent to itself; kube-proxy
  // lists local endpoints (ip,port,ip) so POSTROUTING masquerades exactly those packets.
  for (const e of new Set([...cluster, ...local])) {
    if (e.local) entry.sets.push(
      { set: 'KUBE-LOOP-BACK', family, protocol, port: e.port, address: e.address, source: e.address });
  }
  const add = (kind: VipKind, address: string, vsPort: number, useLocal: boolean) =>
    addVirtualServer(b, pf, kind, address, vsPort, useLocal);
  const set = (name: SetName, extra: Partial<SetEntry>) =>
    entry.sets.push({ set: name, family, protocol, port, ...extra });
  const ofFamily = (list: readonly string[]) => list.filter((a) => familyOf(a) === family);

  for (const ip of ofFamily(p.clusterIPs)) {
    add('cluster-ip', ip, port, p.intLocal);
    set('KUBE-CLUSTER-IP', { address: ip });
  }
  for (const ip of ofFamily(p.externalIPs)) {
    // A tunnelled one is never marked for masquerading either (render.ts: the *-LOCAL sets RETURN).
    const tunnelled = add('external-ip', ip, port, p.extLocal);
    set('KUBE-EXTERNAL-IP', { address: ip });
    if (p.extLocal || tunnelled) set('KUBE-EXTERNAL-IP-LOCAL', { address: ip });
  }
  for (const ip of ofFamily(p.lbIPs)) {
    const tunnelled = add('load-balancer', ip, port, p.extLocal);
    set('KUBE-LOAD-BALANCER', { address: ip });
    if (p.extLocal || tunnelled) set('KUBE-LOAD-BALANCER-LOCAL', { address: ip });
    const ranges = p.sourceRanges.filter((r) => r.cidr.family === family);
    if (ranges.length) set('KUBE-LOAD-BALANCER-FW', { address: ip });
    for (const r of ranges) set('KUBE-LOAD-BALANCER-SOURCE-CIDR', { address: ip, cidr: r.text });
    // kube-proxy's allowFromNode: when a range admits this node, the node itself (which sends
    // to a local LB IP from that same address) may pass the firewall too.
    const admitsNode = ranges.some((r) => env.nodeAddresses.some((n) => cidrContains(r.cidr, parseIp(n)!)));
    if (admitsNode) set('KUBE-LOAD-BALANCER-SOURCE-IP', { address: ip, source: ip });
  }
  if (p.hasNodePorts && nodePort !== undefined) {
    for (const ip of ofFamily(env.nodeAddresses)) add('node-port', ip, nodePort, p.extLocal);
    const np = (name: SetName, extra: Partial<SetEntry>) =>
      entry.sets.push({ set: name, family, protocol, port: nodePort, ...extra });
    if (protocol === 'SCTP') {
      // kube-proxy's SCTP NodePort set is hash:ip,port over the node addresses.
      for (const ip of ofFamily(env.nodeAddresses)) {
        np('KUBE-NODE-PORT-SCTP-HASH', { address: ip });
        if (p.extLocal) np('KUBE-NODE-PORT-LOCAL-SCTP-HASH', { address: ip });
      }
    } else {
      np(`KUBE-NODE-PORT-${protocol}`, {});
      if (p.extLocal) np(`KUBE-NODE-PORT-LOCAL-${protocol}`, {});
    }
  }
}

/** Adds a virtual server (once per key); true when its real servers are tunnel destinations. */
function addVirtualServer(
  b: Build, pf: PortFamily, kind: VipKind, address: string, vsPort: number, useLocal: boolean,
): boolean {
  const { p, entry } = b;
  const family = pf.eps.family;
  const r = resolvedFor(b, pf, useLocal ? pf.eps.local : pf.eps.cluster);
  const res = r.res;
  const tunnelled = p.forwarding === 'tunnel' && tunnelledKind(kind) ? tunnelDests(b, pf, r) : undefined;
  const dests = tunnelled ?? r.dests;
  const timeout = p.affinityTimeout;
  if (res.persistence && timeout === undefined) {
    once(b, 'IneffectiveSchedulerOption', { service: p.id, reason: 'IneffectiveSchedulerOption',
      message: 'affinityNetmask has no effect without sessionAffinity: ClientIP' });
  }
  const vs = makeVirtualServer({
    family, protocol: pf.port.protocol, address, port: vsPort,
    scheduler: res.scheduler,
    flags: (res.flags & (SvcFlag.SCHED1 | SvcFlag.SCHED2 | SvcFlag.SCHED3))
      | (timeout !== undefined ? SvcFlag.PERSISTENT : 0),
    ...(timeout !== undefined ? { timeout, netmask: netmaskFor(family, res.persistence) } : {}),
  });
  const key = virtualServerKey(vs);
  if (b.seen.has(key)) return tunnelled !== undefined;
  b.seen.add(key);
  const notRamped = p.slowStartMs === undefined ? undefined : slowStartInapplicable(res.scheduler);
  if (notRamped) once(b, 'SlowStartInapplicable', { service: p.id, reason: 'SlowStartInapplicable',
    message: `${SLOW_START_ANNOTATION}: ${notRamped}; no slow start` });
  const notBalanced = p.balance === 'cluster' ? clusterBalanceInapplicable(res.scheduler) : undefined;
  if (notBalanced) once(b, 'ClusterBalanceInapplicable', { service: p.id, reason: 'ClusterBalanceInapplicable',
    message: `${BALANCE_ANNOTATION}: ${notBalanced}; balancing locally` });
  entry.vss.push({
    vs, dests,
    origin: { namespace: p.namespace, name: p.name, portName: pf.port.name, kind, plugin: p.choice.plugin.name },
    ...(p.slowStartMs !== undefined && !notRamped ? { slowStartMs: p.slowStartMs } : {}),
    ...(p.balance === 'cluster' && !notBalanced ? { clusterBalance: true as const } : {}),
  });
  return tunnelled !== undefined;
}

/** The endpoints' real servers, weighted by the plugin on first use, in the order the planner adds them. */
function resolvedFor(b: Build, pf: PortFamily, eps: PluginEndpoint[]): Resolved {
  let r = pf.resolved.get(eps);
  if (!r) {
    const { p, env } = b;
    const res = resolveSafely(p.choice, env, eps, p.id, b.entry.problems);
    // Sorted by key, each key made once (not twice per comparison).
    const sorted = eps.map((e, i) => {
      const rs = makeRealServer({ address: e.address, port: e.port, weight: res.weights[i] ?? 1, forward: 'masq' });
      return { rs, key: realServerKey(rs) };
    }).sort((x, y) => cmp(x.key, y.key)).map((k) => k.rs);
    // The planner adds real servers in this order (balance/order.ts says why it is rotated).
    const dests = p.order === 'sorted'
      ? sorted : addOrder(sorted, env.context.nodeName, `${p.id}/${pf.port.name}/${pf.eps.family}`);
    r = { res, dests };
    pf.resolved.set(eps, r);
  }
  return r;
}

/**
 * The real servers as tunnel destinations, or undefined when some endpoint listens on another
 * port than the Service's: tunnel mode keeps the packet's port, so those stay masqueraded.
 */
function tunnelDests(b: Build, pf: PortFamily, r: Resolved): RealServer[] | undefined {
  const { name, port } = pf.port;
  if (!('tunnel' in r)) {
    r.tunnel = r.dests.every((rs) => rs.port === port)
      ? r.dests.map((rs) => ({ ...rs, forward: 'tunnel' as const, tunnelType: 'ipip' as const })) : undefined;
  }
  if (!r.tunnel) {
    once(b, `TunnelUnsupported ${pf.index}`, { service: b.p.id, reason: 'TunnelUnsupported',
      message: `port "${name}": an endpoint listens on another port than ${port} and IPVS tunnelling keeps the port ` +
        `(no remapping); its external IPs stay masqueraded` });
  }
  return r.tunnel;
}

/**
 * The virtual server with the real servers the IPVS clients accept (validate.ts, the same check
 * NetlinkIpvs and FakeIpvs make); a refused one is dropped with a Problem instead of failing at
 * apply forever. [] when the virtual server itself is refused.
 */
function acceptedByKernel(d: DesiredVirtualServer, id: string, problems: Problem[]): DesiredVirtualServer[] {
  const vsProblems = virtualServerProblems(d.vs);
  if (vsProblems.length) {
    problems.push({ service: id, reason: 'InvalidVirtualServer',
      message: `${virtualServerKey(d.vs)}: ${vsProblems.join('; ')}; not programmed` });
    return [];
  }
  const dests = d.dests.filter((rs) => {
    const problem = realServerProblems(d.vs, rs, true);
    if (problem.length) problems.push({ service: id, reason: 'InvalidEndpoint',
      message: `${virtualServerKey(d.vs)} -> ${realServerKey(rs)}: ${problem.join('; ')}; left out` });
    return problem.length === 0;
  });
  return [dests.length === d.dests.length ? d : { ...d, dests }];
}

/** IPVS persistence netmask: a dotted mask as u32 for IPv4, a prefix length for IPv6. */
function netmaskFor(family: Family, persistence: Resolution['persistence']): number {
  if (family === 'IPv6') return persistence?.ipv6Prefix ?? 128;
  return prefixToMask(persistence?.ipv4Prefix ?? 32);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
