// IPVS generic netlink attributes: virtual and real servers, stats, info and timeouts, encoded and
// decoded. pure: bytes in, values out. Requests are built in requests.ts; the framing they share
// with every netlink family is src/netlink/framing.ts; the one socket is in socket.ts. Constants follow include/uapi/linux/ip_vs.h as of Linux 6.1 (constants.ts).
//
// One message, as sent and as received (all integers host order = little-endian on x86, except
// where marked be; every attribute is padded to 4 bytes):
//
//   0               4       6       8              12             16   17   18      20
//   +---------------+-------+-------+--------------+--------------+----+----+-------+
//   | nlmsg_len u32 | type  | flags | seq u32      | port u32     |cmd |ver | rsvd  |
//   +---------------+-------+-------+--------------+--------------+----+----+-------+
//   | nlmsghdr: type = the IPVS family id       | genlmsghdr: cmd = IPVS_CMD_*, ver = 1 |
//   +---------------------------------------------------------------------------------+
//   | nla_len u16 | nla_type u16 = IPVS_CMD_ATTR_SERVICE | nested:                      |
//   |    | len | AF u16 | len | PROTOCOL u16 | len | ADDR 16 bytes (v4 in the first 4)  |
//   |    | len | PORT be16 | len | SCHED_NAME "rr\0" | len | FLAGS {flags u32,mask u32} |
//   |    | len | TIMEOUT u32 | len | NETMASK u32 | ...                                  |
//   | nla_len | IPVS_CMD_ATTR_DEST | nested: ADDR, PORT be16, FWD_METHOD u32, WEIGHT u32, |
//   |    U_THRESH u32, L_THRESH u32, ADDR_FAMILY u16, TUN_TYPE u8, TUN_PORT be16, ...     |
//   +---------------------------------------------------------------------------------+
//
// Replies: NLMSG_ERROR (type 2) carries `int32 error` (0 = ACK, else -errno) and the request's
// nlmsghdr; a dump answers with NLM_F_MULTI messages (cmd NEW_SERVICE / NEW_DEST) ended by
// NLMSG_DONE. Every decoder throws only IpvsError, so garbage from the kernel (or a fuzzer) is a
// typed error, never a RangeError escaping from a Buffer read.
import type {
  ForwardMethod, IpvsInfo, IpvsStats, IpvsTimeouts, Protocol, RealServer, TunnelType, VirtualServer,
} from '../model/ipvs.js';
import { FORWARD_METHODS } from '../model/ipvs.js';
import { type Family, formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../model/addr.js';
import {
  AF_INET, AF_INET6, CONN_F_FWD_MASK,
  CmdAttr, DestAttr, IPPROTO_SCTP, IPPROTO_TCP,
  IPPROTO_UDP, InfoAttr, StatsAttr, SvcAttr, TunType,
} from './constants.js';
import { IpvsError } from './errors.js';
import {
  type NlMessage, be16, cstring, genlAttrs, nla, nlaNested, parseAttrs, u16, u32, u8,
} from '../netlink/framing.js';

/** parseAttrs that throws IpvsError. */
const ipvsAttrs = (b: Buffer): Map<number, Buffer> => parseAttrs(b, IpvsError);
/** genlAttrs that throws IpvsError. */
const ipvsGenlAttrs = (m: NlMessage): Buffer => genlAttrs(m, IpvsError);


// ---------------------------------------------------------------- attributes (encode)

const afOf: Record<Family, number> = { IPv4: AF_INET, IPv6: AF_INET6 };
const protoOf: Record<Protocol, number> = { TCP: IPPROTO_TCP, UDP: IPPROTO_UDP, SCTP: IPPROTO_SCTP };
const fwdOf = (f: ForwardMethod): number => FORWARD_METHODS.indexOf(f);
const tunOf: Record<TunnelType, number> = { ipip: TunType.IPIP, gue: TunType.GUE, gre: TunType.GRE };

/**
 * The one-line form of what is being encoded, for errors. A function is only called when an error
 * is thrown: formatting every op of a 100 000-op batch up front cost more than encoding it.
 */
export type What = string | (() => string);

function whatOf(what: What): string {
  return typeof what === 'string' ? what : what();
}

/**
 * 16 bytes of `union nf_inet_addr`, as ipvsadm sends it (an IPv4 address in the first 4 bytes).
 * Throws IpvsError on an address that is not of `family`.
 */
export function encodeAddr(what: What, family: Family, address: string): Buffer {
  const raw = family === 'IPv4' ? parseIPv4(address) : parseIPv6(address);
  if (!raw) throw IpvsError.invalidArgument(whatOf(what), `${JSON.stringify(address)} is not an ${family} address`);
  const b = Buffer.alloc(16);
  b.set(raw, 0);
  return b;
}

/** The attributes that identify a virtual server: AF + (FWMARK | PROTOCOL, ADDR, PORT). */
function serviceKeyAttrs(what: What, vs: VirtualServer): Buffer[] {
  const out = [nla(SvcAttr.AF, u16(afOf[vs.family]))];
  if (vs.fwmark) {
    out.push(nla(SvcAttr.FWMARK, u32(vs.fwmark)));
  } else {
    out.push(
      nla(SvcAttr.PROTOCOL, u16(protoOf[vs.protocol])),
      nla(SvcAttr.ADDR, encodeAddr(what, vs.family, vs.address)),
      nla(SvcAttr.PORT, be16(vs.port)),
    );
  }
  return out;
}

/**
 * NETMASK is declared __be32: an IPv4 mask travels in network byte order (0xffffff00 is
 * ff ff ff 00), while for IPv6 the kernel compares the same field as a number 1..128, and
 * ipvsadm sends the prefix length in host order. Both ways are what ipvsadm reads back.
 */
function encodeNetmask(vs: VirtualServer): Buffer {
  if (vs.family === 'IPv6') return u32(vs.netmask);
  const b = Buffer.alloc(4);
  b.writeUInt32BE(vs.netmask >>> 0);
  return b;
}

function decodeNetmask(b: Buffer | undefined, family: Family): number {
  if (!b) return 0;
  if (b.length < 4) throw IpvsError.malformed('decode', `service: netmask of ${b.length} bytes`);
  return family === 'IPv6' ? b.readUInt32LE(0) : b.readUInt32BE(0);
}

/**
 * The nested SERVICE attribute. `full` adds what NEW/SET_SERVICE require (the kernel answers EINVAL
 * when any of SCHED_NAME, FLAGS, TIMEOUT, NETMASK is missing); flags are sent with mask ~0.
 */
export function encodeService(what: What, vs: VirtualServer, full: boolean): Buffer {
  const attrs = serviceKeyAttrs(what, vs);
  if (full) {
    const flags = Buffer.alloc(8);
    flags.writeUInt32LE(vs.flags >>> 0, 0);
    flags.writeUInt32LE(0xffffffff, 4);
    attrs.push(
      nla(SvcAttr.SCHED_NAME, cstring(vs.scheduler)),
      nla(SvcAttr.FLAGS, flags),
      nla(SvcAttr.TIMEOUT, u32(vs.timeout)),
      nla(SvcAttr.NETMASK, encodeNetmask(vs)),
    );
    if (vs.peName) attrs.push(nla(SvcAttr.PE_NAME, cstring(vs.peName)));
  }
  return nlaNested(CmdAttr.SERVICE, attrs);
}

/**
 * The nested DEST attribute. ADDR_FAMILY is always sent (kernels < 3.18 ignore it); `full` adds
 * what NEW/SET_DEST require (FWD_METHOD, WEIGHT, U_THRESH, L_THRESH) and the tunnel settings for
 * tunnel real servers (kernel >= 5.2).
 */
export function encodeDest(what: What, rs: RealServer, full: boolean): Buffer {
  const attrs = [
    nla(DestAttr.ADDR, encodeAddr(what, rs.family, rs.address)),
    nla(DestAttr.PORT, be16(rs.port)),
    nla(DestAttr.ADDR_FAMILY, u16(afOf[rs.family])),
  ];
  if (full) {
    attrs.push(
      nla(DestAttr.FWD_METHOD, u32(fwdOf(rs.forward))),
      nla(DestAttr.WEIGHT, u32(rs.weight)),
      nla(DestAttr.U_THRESH, u32(rs.upperThreshold)),
      nla(DestAttr.L_THRESH, u32(rs.lowerThreshold)),
    );
    if (rs.forward === 'tunnel') {
      attrs.push(
        nla(DestAttr.TUN_TYPE, u8(tunOf[rs.tunnelType])),
        nla(DestAttr.TUN_PORT, be16(rs.tunnelPort)),
        nla(DestAttr.TUN_FLAGS, u16(rs.tunnelFlags)),
      );
    }
  }
  return nlaNested(CmdAttr.DEST, attrs);
}

// ---------------------------------------------------------------- decode

function need(attrs: Map<number, Buffer>, type: number, size: number, what: string): Buffer {
  const v = attrs.get(type);
  if (!v) throw IpvsError.malformed('decode', `${what}: attribute ${type} missing`);
  if (v.length < size) throw IpvsError.malformed('decode', `${what}: attribute ${type} has ${v.length} bytes, needs ${size}`);
  return v;
}
function optU32(attrs: Map<number, Buffer>, type: number, what: string): number {
  return attrs.has(type) ? need(attrs, type, 4, what).readUInt32LE(0) : 0;
}
function optU16(attrs: Map<number, Buffer>, type: number, what: string): number {
  return attrs.has(type) ? need(attrs, type, 2, what).readUInt16LE(0) : 0;
}
function readCString(b: Buffer): string {
  const nul = b.indexOf(0);
  return b.subarray(0, nul < 0 ? b.length : nul).toString('utf8');
}

function familyFromAf(af: number, what: string): Family {
  if (af === AF_INET) return 'IPv4';
  if (af === AF_INET6) return 'IPv6';
  throw IpvsError.malformed('decode', `${what}: unknown address family ${af}`);
}

function decodeAddr(b: Buffer, family: Family, what: string): string {
  if (family === 'IPv4') {
    if (b.length < 4) throw IpvsError.malformed('decode', `${what}: IPv4 address of ${b.length} bytes`);
    return formatIPv4(b.subarray(0, 4));
  }
  if (b.length < 16) throw IpvsError.malformed('decode', `${what}: IPv6 address of ${b.length} bytes`);
  return formatIPv6(b.subarray(0, 16));
}

const protocols: Record<number, Protocol> = { [IPPROTO_TCP]: 'TCP', [IPPROTO_UDP]: 'UDP', [IPPROTO_SCTP]: 'SCTP' };
const tunnels: TunnelType[] = ['ipip', 'gue', 'gre'];

/** IPVS counters from a nested STATS (u32 but the byte counters) or STATS64 (all u64) attribute. */
export function decodeStats(buf: Buffer, wide: boolean): IpvsStats {
  const a = ipvsAttrs(buf);
  const get = (type: number, isU64: boolean): bigint => {
    const v = a.get(type);
    if (!v) return 0n;
    if (isU64) {
      if (v.length < 8) throw IpvsError.malformed('decode', `stats attribute ${type} has ${v.length} bytes`);
      return v.readBigUInt64LE(0);
    }
    if (v.length < 4) throw IpvsError.malformed('decode', `stats attribute ${type} has ${v.length} bytes`);
    return BigInt(v.readUInt32LE(0));
  };
  return {
    conns: get(StatsAttr.CONNS, wide),
    inPkts: get(StatsAttr.INPKTS, wide),
    outPkts: get(StatsAttr.OUTPKTS, wide),
    inBytes: get(StatsAttr.INBYTES, true),
    outBytes: get(StatsAttr.OUTBYTES, true),
    cps: get(StatsAttr.CPS, wide),
    inPps: get(StatsAttr.INPPS, wide),
    outPps: get(StatsAttr.OUTPPS, wide),
    inBps: get(StatsAttr.INBPS, wide),
    outBps: get(StatsAttr.OUTBPS, wide),
  };
}

function statsOf(a: Map<number, Buffer>, stats64: number, stats32: number): IpvsStats | undefined {
  const s64 = a.get(stats64);
  if (s64) return decodeStats(s64, true);
  const s32 = a.get(stats32);
  return s32 ? decodeStats(s32, false) : undefined;
}

/** A virtual server from the attributes of a nested SERVICE attribute. */
export function decodeService(buf: Buffer): VirtualServer {
  const what = 'service';
  const a = ipvsAttrs(buf);
  const family = familyFromAf(need(a, SvcAttr.AF, 2, what).readUInt16LE(0), what);
  const fwmark = optU32(a, SvcAttr.FWMARK, what);
  let protocol: Protocol = 'TCP';
  let address = family === 'IPv4' ? '0.0.0.0' : '::';
  let port = 0;
  // Firewall-mark services come back without PROTOCOL/ADDR/PORT (the kernel stores TCP for them).
  if (!fwmark) {
    const p = need(a, SvcAttr.PROTOCOL, 2, what).readUInt16LE(0);
    const proto = protocols[p];
    if (!proto) throw IpvsError.malformed('decode', `${what}: unknown protocol ${p}`);
    protocol = proto;
    address = decodeAddr(need(a, SvcAttr.ADDR, 4, what), family, what);
    port = need(a, SvcAttr.PORT, 2, what).readUInt16BE(0);
  }
  const flagsAttr = a.get(SvcAttr.FLAGS);
  if (flagsAttr && flagsAttr.length < 4) throw IpvsError.malformed('decode', `${what}: flags of ${flagsAttr.length} bytes`);
  const vs: VirtualServer = {
    family,
    protocol,
    address,
    port,
    fwmark,
    scheduler: a.has(SvcAttr.SCHED_NAME) ? readCString(a.get(SvcAttr.SCHED_NAME)!) : '',
    flags: flagsAttr ? flagsAttr.readUInt32LE(0) : 0,
    timeout: optU32(a, SvcAttr.TIMEOUT, what),
    netmask: decodeNetmask(a.get(SvcAttr.NETMASK), family),
    peName: a.has(SvcAttr.PE_NAME) ? readCString(a.get(SvcAttr.PE_NAME)!) : '',
  };
  const stats = statsOf(a, SvcAttr.STATS64, SvcAttr.STATS);
  if (stats) vs.stats = stats;
  return vs;
}

/**
 * A real server from the attributes of a nested DEST attribute. Kernels before 3.18 send no
 * ADDR_FAMILY: the service's family is the real server's then.
 */
export function decodeDest(buf: Buffer, serviceFamily: Family): RealServer {
  const what = 'dest';
  const a = ipvsAttrs(buf);
  const family = a.has(DestAttr.ADDR_FAMILY)
    ? familyFromAf(need(a, DestAttr.ADDR_FAMILY, 2, what).readUInt16LE(0), what)
    : serviceFamily;
  const fwd = optU32(a, DestAttr.FWD_METHOD, what) & CONN_F_FWD_MASK;
  const forward = FORWARD_METHODS[fwd];
  if (!forward) throw IpvsError.malformed('decode', `${what}: unknown forwarding method ${fwd}`);
  const tun = a.has(DestAttr.TUN_TYPE) ? need(a, DestAttr.TUN_TYPE, 1, what).readUInt8(0) : 0;
  const rs: RealServer = {
    address: decodeAddr(need(a, DestAttr.ADDR, 4, what), family, what),
    port: need(a, DestAttr.PORT, 2, what).readUInt16BE(0),
    family,
    weight: optU32(a, DestAttr.WEIGHT, what),
    forward,
    upperThreshold: optU32(a, DestAttr.U_THRESH, what),
    lowerThreshold: optU32(a, DestAttr.L_THRESH, what),
    tunnelType: tunnels[tun] ?? 'ipip',
    tunnelPort: a.has(DestAttr.TUN_PORT) ? need(a, DestAttr.TUN_PORT, 2, what).readUInt16BE(0) : 0,
    tunnelFlags: optU16(a, DestAttr.TUN_FLAGS, what),
    activeConns: optU32(a, DestAttr.ACTIVE_CONNS, what),
    inactiveConns: optU32(a, DestAttr.INACT_CONNS, what),
    persistentConns: optU32(a, DestAttr.PERSIST_CONNS, what),
  };
  const stats = statsOf(a, DestAttr.STATS64, DestAttr.STATS);
  if (stats) rs.stats = stats;
  return rs;
}

/** The virtual server of one GET_SERVICE dump message. */
export function decodeServiceMessage(msg: NlMessage): VirtualServer {
  const top = ipvsAttrs(ipvsGenlAttrs(msg));
  return decodeService(need(top, CmdAttr.SERVICE, 0, 'service message'));
}

/** The real server of one GET_DEST dump message. */
export function decodeDestMessage(msg: NlMessage, serviceFamily: Family): RealServer {
  const top = ipvsAttrs(ipvsGenlAttrs(msg));
  return decodeDest(need(top, CmdAttr.DEST, 0, 'dest message'), serviceFamily);
}

/** GET_INFO reply. */
export function decodeInfo(msg: NlMessage): IpvsInfo {
  const a = ipvsAttrs(ipvsGenlAttrs(msg));
  const code = need(a, InfoAttr.VERSION, 4, 'info').readUInt32LE(0);
  return {
    versionCode: code,
    version: `${(code >> 16) & 0xff}.${(code >> 8) & 0xff}.${code & 0xff}`,
    connTableSize: need(a, InfoAttr.CONN_TAB_SIZE, 4, 'info').readUInt32LE(0),
  };
}

/** GET_CONFIG reply. */
export function decodeTimeouts(msg: NlMessage): IpvsTimeouts {
  const a = ipvsAttrs(ipvsGenlAttrs(msg));
  return {
    tcp: optU32(a, CmdAttr.TIMEOUT_TCP, 'config'),
    tcpFin: optU32(a, CmdAttr.TIMEOUT_TCP_FIN, 'config'),
    udp: optU32(a, CmdAttr.TIMEOUT_UDP, 'config'),
  };
}

