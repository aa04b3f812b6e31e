// Service defaulting and allocation of the lab API server, pure: ClusterIPs from the service CIDRs
// (one per family), NodePorts and healthCheckNodePorts from the node port range, with the real
// API's validation messages (422 Invalid as `spec.<field>: Invalid value: ...`).
//
// Kept from the real server: the first address of a range is the kubernetes Service's and is
// never handed out dynamically; requested IPs/ports must be in range and free; clusterIPs are
// immutable on update and kept when an update leaves them out, nodePorts likewise per port;
// ipFamilyPolicy SingleStack / PreferDualStack / RequireDualStack with ipFamilies in order;
// clusterIP None (headless) allocates nothing; ExternalName Services get no clusterIP.
// Type transitions as kube-apiserver's dropTypeDependentFields makes them: a field the new type
// does not use (clusterIPs for ExternalName, nodePorts for ClusterIP, healthCheckNodePort without
// LoadBalancer + externalTrafficPolicy Local, externalTrafficPolicy without NodePort/LoadBalancer
// or externalIPs, allocateLoadBalancerNodePorts without LoadBalancer) is wiped when the update
// left it as it was, so `kubectl patch -p '{"spec":{"type":"ClusterIP"}}'` releases the node
// ports; one the user changed on the way is validated (and refused) as given.
// Approximated: addresses and ports are handed out lowest-free-first (the real allocator is
// random), and ports of one Service may not share a nodePort even across protocols.

/** An IP family as the Service API names it. */
export type IpFamily = 'IPv4' | 'IPv6';

/** Allocation ranges. */
export interface AllocConfig {
  /** Service CIDRs, at most one per family; the first is the primary family. */
  serviceCIDRs: string[];
  /** First and last NodePort (inclusive). */
  nodePortRange: [number, number];
}

/** The notes' kind lab ranges plus an IPv6 range for dual-stack. */
export const DEFAULT_ALLOC: AllocConfig = { serviceCIDRs: ['10.200.1.0/24', 'fd00:10:200::/108'], nodePortRange: [30000, 32767] };

type Port = { name?: string; port?: number; protocol?: string; targetPort?: number | string; nodePort?: number };
type Spec = {
  type?: string; clusterIP?: string; clusterIPs?: string[]; ipFamilies?: string[]; ipFamilyPolicy?: string; ports?: Port[];
  externalTrafficPolicy?: string; internalTrafficPolicy?: string; healthCheckNodePort?: number; sessionAffinity?: string;
  allocateLoadBalancerNodePorts?: boolean; selector?: Record<string, string>;
};
/** The parts of a Service allocation reads and writes. */
export type ServiceLike = { metadata: { name: string; namespace?: string }; spec?: Spec };

/** The Service with defaults and allocations filled in, or the 422 message. */
export type AllocResult = { ok: true; service: ServiceLike } | { ok: false; message: string };

/** Defaults, validates and allocates `svc` (created when `old` is undefined) given every other Service. */
export function allocateService(svc: ServiceLike, old: ServiceLike | undefined, others: readonly ServiceLike[], cfg: AllocConfig): AllocResult {
  const s = structuredClone(svc);
  const spec = (s.spec ??= {});
  const prev = old?.spec ?? {};
  spec.type ??= 'ClusterIP';
  if (old) dropTypeDependentFields(spec, prev);
  if (spec.type === 'LoadBalancer') spec.allocateLoadBalancerNodePorts ??= true;
  spec.sessionAffinity ??= 'None';
  spec.internalTrafficPolicy ??= 'Cluster';
  for (const p of spec.ports ?? []) {
    p.protocol ??= 'TCP';
    p.targetPort ??= p.port;
  }
  if (spec.type === 'ExternalName') {
    delete spec.clusterIP;
    delete spec.clusterIPs;
    return { ok: true, service: s };
  }
  // A Service coming from ExternalName has no addresses to keep: it gets new ones as on create.
  const ips = allocateClusterIPs(spec, prev.type === 'ExternalName' ? {} : prev, others, cfg);
  if (typeof ips === 'string') return { ok: false, message: ips };
  const ports = allocateNodePorts(spec, prev, others, cfg);
  if (ports) return { ok: false, message: ports };
  return { ok: true, service: s };
}

const needsNodePorts = (s: Spec) => s.type === 'NodePort' || s.type === 'LoadBalancer';
const needsHealthCheckNodePort = (s: Spec) => s.type === 'LoadBalancer' && s.externalTrafficPolicy === 'Local';
const externalPolicyApplies = (s: Spec & { externalIPs?: string[] }) => needsNodePorts(s) || (s.externalIPs?.length ?? 0) > 0;
const portKey = (p: Port) => `${p.port}/${p.protocol ?? 'TCP'}`;

/** kube-apiserver's dropTypeDependentFields (see the file comment): wipes in `spec` what the new type does not use and the update did not change. */
function dropTypeDependentFields(spec: Spec, prev: Spec): void {
  if (prev.type !== 'ExternalName' && spec.type === 'ExternalName') {
    if (JSON.stringify(spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : prev.clusterIPs)) === JSON.stringify(prev.clusterIPs)) {
      delete spec.clusterIP;
      delete spec.clusterIPs;
    }
    if (JSON.stringify(spec.ipFamilies) === JSON.stringify(prev.ipFamilies)) delete spec.ipFamilies;
    if (spec.ipFamilyPolicy === prev.ipFamilyPolicy) delete spec.ipFamilyPolicy;
  }
  const oldNodePorts = new Map((prev.ports ?? []).map((p) => [portKey(p), p.nodePort]));
  const sameNodePorts = (spec.ports ?? []).every((p) => p.nodePort === undefined || p.nodePort === oldNodePorts.get(portKey(p)));
  if (needsNodePorts(prev) && !needsNodePorts(spec) && sameNodePorts) for (const p of spec.ports ?? []) delete p.nodePort;
  if (needsHealthCheckNodePort(prev) && !needsHealthCheckNodePort(spec) && (spec.healthCheckNodePort ?? prev.healthCheckNodePort) === prev.healthCheckNodePort) {
    delete spec.healthCheckNodePort;
  }
  if (spec.type !== 'LoadBalancer' && spec.allocateLoadBalancerNodePorts === prev.allocateLoadBalancerNodePorts) delete spec.allocateLoadBalancerNodePorts;
  if (!externalPolicyApplies(spec) && spec.externalTrafficPolicy === prev.externalTrafficPolicy) delete spec.externalTrafficPolicy;
}

function allocateClusterIPs(spec: Spec, prev: Spec, others: readonly ServiceLike[], cfg: AllocConfig): true | string {
  if (prev.clusterIPs?.length) {
    const asked = spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : undefined);
    if (asked && asked[0] !== prev.clusterIPs[0]) return `spec.clusterIPs[0]: Invalid value: ${JSON.stringify(asked)}: may not change once set`;
    spec.clusterIP = prev.clusterIP;
    spec.clusterIPs = prev.clusterIPs;
    spec.ipFamilies ??= prev.ipFamilies;
    spec.ipFamilyPolicy ??= prev.ipFamilyPolicy;
    return true;
  }
  const ranges = cfg.serviceCIDRs.map(parseCidr);
  const configured = ranges.map((r) => r.family);
  const asked = spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : []);
  const headless = asked[0] === 'None';
  const policy = spec.ipFamilyPolicy ?? 'SingleStack';
  if (!['SingleStack', 'PreferDualStack', 'RequireDualStack'].includes(policy)) return `spec.ipFamilyPolicy: Unsupported value: "${policy}"`;
  const requested = (spec.ipFamilies ?? (headless ? [] : asked.map((a) => parseIp(a)?.family ?? 'IPv4'))) as IpFamily[];
  for (const [i, f] of requested.entries()) {
    if (!configured.includes(f)) return `spec.ipFamilies[${i}]: Invalid value: "${f}": not configured on this cluster`;
  }
  const primary = requested[0] ?? configured[0]!;
  const both = [primary, ...configured.filter((f) => f !== primary)];
  if (policy === 'RequireDualStack' && both.length < 2) return 'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services';
  const families = policy === 'SingleStack' ? [primary] : both;
  spec.ipFamilyPolicy = policy;
  spec.ipFamilies = families;
  if (headless) {
    spec.clusterIP = 'None';
    spec.clusterIPs = ['None'];
    return true;
  }
  const used = new Set(others.flatMap((o) => o.spec?.clusterIPs ?? (o.spec?.clusterIP ? [o.spec.clusterIP] : [])).map(ipKey));
  const out: string[] = [];
  for (const [i, family] of families.entries()) {
    const range = ranges.find((r) => r.family === family)!;
    const want = asked[i];
    if (want !== undefined) {
      const ip = parseIp(want);
      if (!ip || ip.family !== family || !inRange(range, ip.value)) {
        return `spec.clusterIPs[${i}]: Invalid value: "${want}": provided IP is not in the valid range. The range of valid IPs is ${cidrText(range)}`;
      }
      if (used.has(ipKey(want))) return `spec.clusterIPs[${i}]: Invalid value: "${want}": provided IP is already allocated`;
      out.push(formatIp(family, ip.value));
      continue;
    }
    const free = firstFreeIp(range, used);
    if (free === undefined) return `spec.clusterIPs[${i}]: Internal error: range ${cidrText(range)} is full`;
    out.push(formatIp(family, free));
  }
  spec.clusterIPs = out;
  spec.clusterIP = out[0];
  return true;
}

function allocateNodePorts(spec: Spec, prev: Spec, others: readonly ServiceLike[], cfg: AllocConfig): string | undefined {
  const [lo, hi] = cfg.nodePortRange;
  const external = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
  const ports = spec.ports ?? [];
  if (!external) {
    const i = ports.findIndex((p) => p.nodePort);
    if (i >= 0) return `spec.ports[${i}].nodePort: Forbidden: may not be used when \`type\` is '${spec.type}'`;
    if (spec.healthCheckNodePort) return 'spec.healthCheckNodePort: Forbidden: may only be set when `type` is \'LoadBalancer\'';
    return undefined;
  }
  spec.externalTrafficPolicy ??= 'Cluster';
  const used = new Set(others.flatMap((o) => [...(o.spec?.ports ?? []).map((p) => p.nodePort), o.spec?.healthCheckNodePort]).filter((p): p is number => !!p));
  const take = (field: string, want: number | undefined): number | string => {
    if (want !== undefined) {
      if (!Number.isInteger(want) || want < lo || want > hi) return `${field}: Invalid value: ${want}: provided port is not in the valid range. The range of valid ports is ${lo}-${hi}`;
      if (used.has(want)) return `${field}: Invalid value: ${want}: provided port is already allocated`;
      used.add(want);
      return want;
    }
    for (let p = lo; p <= hi; p++) {
      if (!used.has(p)) {
        used.add(p);
        return p;
      }
    }
    return `${field}: Internal error: range ${lo}-${hi} is full`;
  };
  const skipPorts = spec.type === 'LoadBalancer' && spec.allocateLoadBalancerNodePorts === false;
  for (const [i, p] of ports.entries()) {
    const kept = prev.ports?.find((q) => q.port === p.port && (q.protocol ?? 'TCP') === p.protocol)?.nodePort;
    if (skipPorts && p.nodePort === undefined) continue;
    const want = p.nodePort ?? kept;
    const got = want !== undefined && want === kept ? (used.add(want), want) : take(`spec.ports[${i}].nodePort`, want);
    if (typeof got === 'string') return got;
    p.nodePort = got;
  }
  if (spec.type === 'LoadBalancer' && spec.externalTrafficPolicy === 'Local') {
    const want = spec.healthCheckNodePort ?? prev.healthCheckNodePort;
    const got = want !== undefined && want === prev.healthCheckNodePort ? want : take('spec.healthCheckNodePort', want);
    if (typeof got === 'string') return got;
    spec.healthCheckNodePort = got;
  } else if (spec.healthCheckNodePort) {
    return 'spec.healthCheckNodePort: Invalid value: may only be set when `type` is \'LoadBalancer\' and `externalTrafficPolicy` is \'Local\'';
  }
  return undefined;
}

interface Range { family: IpFamily; base: bigint; bits: number; size: bigint }

/** Parses `a.b.c.d/n` or an IPv6 CIDR; throws on garbage (configuration error). */
export function parseCidr(text: string): Range {
  const [addr, len] = text.split('/');
  const ip = parseIp(addr ?? '');
  const bits = Number(len);
  const width = ip?.family === 'IPv6' ? 128 : 32;
  if (!ip || !Number.isInteger(bits) || bits < 0 || bits > width - 2) throw new Error(`bad service CIDR "${text}"`);
  const size = 1n << BigInt(width - bits);
  return { family: ip.family, base: ip.value - (ip.value % size), bits, size };
}

/** Parses an IPv4 or IPv6 address to its family and numeric value; undefined for garbage. */
export function parseIp(text: string): { family: IpFamily; value: bigint } | undefined {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (v4) {
    const b = v4.slice(1).map(Number);
    if (b.some((x) => x > 255)) return undefined;
    return { family: 'IPv4', value: b.reduce((a, x) => (a << 8n) | BigInt(x), 0n) };
  }
  if (!text.includes(':') || !/^[0-9a-fA-F:]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const fill = 8 - head.length - tail.length;
  if ((halves.length === 2 && fill < 1) || (halves.length === 1 && fill !== 0)) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? fill : 0).fill('0'), ...tail];
  if (groups.some((g) => g.length === 0 || g.length > 4)) return undefined;
  return { family: 'IPv6', value: groups.reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

/** The canonical text of an address (IPv6 compressed as RFC 5952). */
export function formatIp(family: IpFamily, value: bigint): string {
  if (family === 'IPv4') return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 255n)).join('.');
  const g = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function ipKey(text: string): string | undefined {
  const ip = parseIp(text);
  return ip && `${ip.family}/${ip.value}`;
}

function inRange(r: Range, v: bigint): boolean {
  return v > r.base && v < r.base + r.size - (r.family === 'IPv4' ? 1n : 0n);
}

function firstFreeIp(r: Range, used: Set<string | undefined>): bigint | undefined {
  const last = r.base + r.size - (r.family === 'IPv4' ? 1n : 0n);
  for (let v = r.base + 2n; v < last; v++) if (!used.has(`${r.family}/${v}`)) return v;
  return undefined;
}

function cidrText(r: Range): string {
  return `${formatIp(r.family, r.base)}/${r.bits}`;
}
