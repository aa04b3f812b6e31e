// The IPVS table as values: virtual servers, real servers and the operations between two tables,
// shared by the planner (pure) and the kernel client (src/ipvs/), which encodes exactly these.
// Their string forms are stable: logs, `--dry-run` output and test expectations use them.
//   TCP 10.200.1.63:9000 rr                       a virtual server
//   FWM 17 IPv4 wrr persistent=10800/32           a firewall-mark virtual server
//   10.10.1.3:80 w=1 masq                         a real server
//   add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq
// pure: no I/O.
import { type Family, maskToPrefix } from './addr.js';

/** Transport protocol of an address-keyed virtual server. */
export type Protocol = 'TCP' | 'UDP' | 'SCTP';
/**
 * The packet forwarding methods of a real server, the one table of them: each one's index is its
 * kernel value (IP_VS_CONN_F_* & IP_VS_CONN_F_FWD_MASK: MASQ 0, LOCALNODE 1, TUNNEL 2, DROUTE 3, BYPASS 4).
 */
export const FORWARD_METHODS = ['masq', 'local', 'tunnel', 'route', 'bypass'] as const;
/** Packet forwarding method of a real server. */
export type ForwardMethod = (typeof FORWARD_METHODS)[number];
/** Tunnel encapsulation of a `tunnel` real server (kernel >= 5.2). */
export type TunnelType = 'ipip' | 'gue' | 'gre';

/** Service flags (IP_VS_SVC_F_*). HASHED is set by the kernel on every service: never compare it. */
export const SvcFlag = {
  PERSISTENT: 0x1,
  HASHED: 0x2,
  ONEPACKET: 0x4,
  SCHED1: 0x8,
  SCHED2: 0x10,
  SCHED3: 0x20,
} as const;
/** sh / mh: fall back to another real server when the hashed one is unavailable. */
export const SCHED_SH_FALLBACK = SvcFlag.SCHED1;
/** sh / mh: include the source port in the hash. */
export const SCHED_SH_PORT = SvcFlag.SCHED2;

/** IPVS counters (IPVS_STATS_ATTR_*); from STATS64 when the kernel sends it, else STATS. */
export interface IpvsStats {
  conns: bigint;
  inPkts: bigint;
  outPkts: bigint;
  inBytes: bigint;
  outBytes: bigint;
  cps: bigint;
  inPps: bigint;
  outPps: bigint;
  inBps: bigint;
  outBps: bigint;
}

/**
 * A virtual server: keyed by (protocol, address, port), or by firewall mark when `fwmark` is
 * non-zero (then protocol, address and port are not part of the identity).
 */
export interface VirtualServer {
  family: Family;
  protocol: Protocol;
  address: string;
  port: number;
  /** Non-zero: a firewall-mark service; 0: an address-keyed one. */
  fwmark: number;
  scheduler: string;
  /** IP_VS_SVC_F_* without HASHED. */
  flags: number;
  /** Persistence timeout in seconds (meaningful with PERSISTENT). */
  timeout: number;
  /** Persistence netmask: 0xffffffff-style mask for IPv4, a prefix length for IPv6. */
  netmask: number;
  /** Persistence engine name, e.g. "sip"; empty for none. */
  peName: string;
  /** Read back from the kernel only. */
  stats?: IpvsStats;
}

/** A real server (destination) of a virtual server. */
export interface RealServer {
  address: string;
  port: number;
  /** Family of the real server's address; may differ from the service's for tunnel/route. */
  family: Family;
  weight: number;
  forward: ForwardMethod;
  upperThreshold: number;
  lowerThreshold: number;
  tunnelType: TunnelType;
  tunnelPort: number;
  tunnelFlags: number;
  /** Read back from the kernel only. */
  activeConns?: number;
  inactiveConns?: number;
  persistentConns?: number;
  stats?: IpvsStats;
}

/** One change to the kernel's table; `formatOp` gives its one-line form. */
export type IpvsOp =
  | { kind: 'add-service'; vs: VirtualServer }
  | { kind: 'update-service'; vs: VirtualServer }
  | { kind: 'delete-service'; vs: VirtualServer }
  | { kind: 'add-dest'; vs: VirtualServer; rs: RealServer }
  | { kind: 'update-dest'; vs: VirtualServer; rs: RealServer }
  | { kind: 'delete-dest'; vs: VirtualServer; rs: RealServer };

/** Kernel IPVS version and connection table size (GET_INFO). */
export interface IpvsInfo {
  version: string;
  versionCode: number;
  connTableSize: number;
}

/** IPVS timeouts in seconds (GET_CONFIG / SET_CONFIG); 0 in a SET leaves the value unchanged. */
export interface IpvsTimeouts {
  tcp: number;
  tcpFin: number;
  udp: number;
}

/** Defaults for the optional parts of a virtual server. */
export function makeVirtualServer(v: Partial<VirtualServer> & Pick<VirtualServer, 'family'>): VirtualServer {
  return {
    protocol: 'TCP',
    address: v.family === 'IPv6' ? '::' : '0.0.0.0',
    port: 0,
    fwmark: 0,
    scheduler: 'rr',
    flags: 0,
    timeout: 0,
    netmask: v.family === 'IPv6' ? 128 : 0xffffffff,
    peName: '',
    ...v,
  };
}

/**
 * Defaults for the optional parts of a real server (weight 1, masquerading). Every field is written
 * in the literal, none by a spread or a rest pattern: V8 keeps a literal's own fields inside the
 * object, while fields a spread adds go to a separate property array (about 40 bytes more per real
 * server, 4 MB at 100 000); a rest pattern copies `r` by a slower generic path, on the desired
 * state's path for every real server.
 */
export function makeRealServer(r: Partial<RealServer> & Pick<RealServer, 'address' | 'port'>): RealServer {
  const { address } = r;
  const rs: RealServer = {
    address,
    port: r.port,
    family: r.family ?? (address.includes(':') ? 'IPv6' : 'IPv4'),
    weight: r.weight ?? 1,
    forward: r.forward ?? 'masq',
    upperThreshold: r.upperThreshold ?? 0,
    lowerThreshold: r.lowerThreshold ?? 0,
    tunnelType: r.tunnelType ?? 'ipip',
    tunnelPort: r.tunnelPort ?? 0,
    tunnelFlags: r.tunnelFlags ?? 0,
  };
  if (r.activeConns !== undefined) rs.activeConns = r.activeConns;
  if (r.inactiveConns !== undefined) rs.inactiveConns = r.inactiveConns;
  if (r.persistentConns !== undefined) rs.persistentConns = r.persistentConns;
  if (r.stats !== undefined) rs.stats = r.stats;
  return rs;
}

/**
 * `[addr]:port` for IPv6, `addr:port` for IPv4. Built with join, which makes one flat string: a
 * template literal of 13 characters or more leaves V8 a tree of two cons strings (32 bytes each),
 * which the tables' Maps then keep for every real server (120 000 at 10 000 Services x 10).
 */
export function formatHostPort(address: string, port: number): string {
  return address.includes(':') ? ['[', address, ']:', port].join('') : [address, port].join(':');
}

/** Identity of a virtual server: what the kernel keys it by (flat, as formatHostPort). */
export function virtualServerKey(vs: VirtualServer): string {
  return vs.fwmark
    ? ['FWM', vs.fwmark, vs.family].join(' ')
    : [vs.protocol, formatHostPort(vs.address, vs.port)].join(' ');
}

/**
 * virtualServerKey for a run of ops in one synchronous loop: a plan's ops share their VirtualServer
 * object, so the key is made once per object in a row, not per op (at 132 000 ops in the lab VM the
 * keys made per op cost the first sync about 1.5 s after its writes: docs/performance.md).
 */
export function sameServerKeys(): (vs: VirtualServer) => string {
  let last: VirtualServer | undefined;
  let key = '';
  return (vs) => {
    if (vs !== last) {
      last = vs;
      key = virtualServerKey(vs);
    }
    return key;
  };
}

/** Identity of a real server within its virtual server. */
export function realServerKey(rs: RealServer): string {
  return formatHostPort(rs.address, rs.port);
}

/** Whether two virtual servers agree on everything SET_SERVICE can change (HASHED ignored). */
export function virtualServerEqual(a: VirtualServer, b: VirtualServer): boolean {
  return virtualServerKey(a) === virtualServerKey(b)
    && a.scheduler === b.scheduler
    && (a.flags & ~SvcFlag.HASHED) === (b.flags & ~SvcFlag.HASHED)
    && persistenceEqual(a, b)
    && a.peName === b.peName;
}

/** Timeout and netmask only matter to the kernel's behaviour for persistent services. */
function persistenceEqual(a: VirtualServer, b: VirtualServer): boolean {
  if (!(a.flags & SvcFlag.PERSISTENT) && !(b.flags & SvcFlag.PERSISTENT)) return true;
  return a.timeout === b.timeout && a.netmask === b.netmask;
}

/** Whether two real servers agree on everything SET_DEST can change. */
export function realServerEqual(a: RealServer, b: RealServer): boolean {
  return realServerKey(a) === realServerKey(b)
    && a.weight === b.weight
    && a.forward === b.forward
    && a.upperThreshold === b.upperThreshold
    && a.lowerThreshold === b.lowerThreshold
    && (a.forward !== 'tunnel'
      || (a.tunnelType === b.tunnelType && a.tunnelPort === b.tunnelPort && a.tunnelFlags === b.tunnelFlags));
}

const flagNames: Array<[number, string]> = [
  [SvcFlag.ONEPACKET, 'ops'],
  [SvcFlag.SCHED1, 'flag-1'],
  [SvcFlag.SCHED2, 'flag-2'],
  [SvcFlag.SCHED3, 'flag-3'],
];

/** One-line form of a virtual server: key, scheduler, then only the non-default settings. */
export function formatVirtualServer(vs: VirtualServer): string {
  const parts = [virtualServerKey(vs), vs.scheduler];
  if (vs.flags & SvcFlag.PERSISTENT) parts.push(`persistent=${vs.timeout}/${formatNetmask(vs)}`);
  for (const [bit, name] of flagNames) if (vs.flags & bit) parts.push(name);
  if (vs.peName) parts.push(`pe=${vs.peName}`);
  return parts.join(' ');
}

function formatNetmask(vs: VirtualServer): string {
  return String(vs.family === 'IPv6' ? vs.netmask : maskToPrefix(vs.netmask));
}

/** One-line form of a real server: address, weight, forwarding, then non-default settings. */
export function formatRealServer(rs: RealServer): string {
  const parts = [realServerKey(rs), `w=${rs.weight}`, rs.forward];
  if (rs.upperThreshold) parts.push(`x=${rs.upperThreshold}`);
  if (rs.lowerThreshold) parts.push(`y=${rs.lowerThreshold}`);
  if (rs.forward === 'tunnel') {
    parts.push(`tun=${rs.tunnelType}`);
    if (rs.tunnelPort) parts.push(`tun-port=${rs.tunnelPort}`);
    if (rs.tunnelFlags) parts.push(`tun-flags=0x${rs.tunnelFlags.toString(16)}`);
  }
  return parts.join(' ');
}

/** One-line form of an op, e.g. `add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq`. */
export function formatOp(op: IpvsOp): string {
  switch (op.kind) {
    case 'add-service':
    case 'update-service':
      return `${op.kind} ${formatVirtualServer(op.vs)}`;
    case 'delete-service':
      return `${op.kind} ${virtualServerKey(op.vs)}`;
    case 'add-dest':
    case 'update-dest':
      return `${op.kind} ${virtualServerKey(op.vs)} -> ${formatRealServer(op.rs)}`;
    case 'delete-dest':
      return `${op.kind} ${virtualServerKey(op.vs)} -> ${realServerKey(op.rs)}`;
  }
}

/** One virtual server of a table with its real servers keyed by `realServerKey`. */
export interface VirtualServerEntry {
  vs: VirtualServer;
  dests: ReadonlyMap<string, RealServer>;
}

/** An IPVS table (the kernel's, or one we want) keyed by `virtualServerKey`. */
export type IpvsTable = ReadonlyMap<string, VirtualServerEntry>;

/**
 * A table as sorted `add-service` / `add-dest` lines: the ops that would build it from nothing.
 * `destSuffix` appends to each `add-dest` line (FakeIpvs.dump adds ` conns=A/I`).
 */
export function formatTable(table: IpvsTable, destSuffix: (rs: RealServer) => string = () => ''): string {
  const lines: string[] = [];
  for (const key of [...table.keys()].sort()) {
    const e = table.get(key)!;
    lines.push(formatOp({ kind: 'add-service', vs: e.vs }));
    for (const rkey of [...e.dests.keys()].sort()) {
      const rs = e.dests.get(rkey)!;
      lines.push(formatOp({ kind: 'add-dest', vs: e.vs, rs }) + destSuffix(rs));
    }
  }
  return lines.join('\n');
}
