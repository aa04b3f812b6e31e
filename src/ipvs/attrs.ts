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
import { NLA_HDRLEN } from '../netlink/constants.js';
import { type NlMessage, NlaWriter, genlAttrs, nlaSize, parseAttrs } from '../netlink/framing.js';

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
 * NETMASK is declared __be32: an IPv4 mask travels in network byte order (0xffffff00 is
 * ff ff ff 00), while for IPv6 the kernel compares the same field as a number 1..128, and
 * ipvsadm sends the prefix length in host order. Both ways are what ipvsadm reads back.
 */
function writeNetmask(w: NlaWriter, vs: VirtualServer): void {
  if (vs.family === 'IPv6') w.u32(SvcAttr.NETMASK, vs.netmask);
  else w.bytes(SvcAttr.NETMASK, be32(vs.netmask));
}

function be32(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, false);
  return b;
}

/** The 4 or 16 bytes of `address`; throws IpvsError when it is not of `family`. */
function addrBytes(what: What, family: Family, address: string): Uint8Array {
  const raw = family === 'IPv4' ? parseIPv4(address) : parseIPv6(address);
  if (!raw) throw IpvsError.invalidArgument(whatOf(what), `${JSON.stringify(address)} is not an ${family} address`);
  return raw;
}

function decodeNetmask(b: Buffer | undefined, family: Family): number {
  if (!b) return 0;
  if (b.length < 4) throw IpvsError.malformed('decode', `service: netmask of ${b.length} bytes`);
  return family === 'IPv6' ? b.readUInt32LE(0) : b.readUInt32BE(0);
}

/**
 * The nested SERVICE attribute: AF + (FWMARK | PROTOCOL, ADDR, PORT) identify the virtual server;
 * `full` adds what NEW/SET_SERVICE require (the kernel answers EINVAL when any of SCHED_NAME,
 * FLAGS, TIMEOUT, NETMASK is missing); flags are sent with mask ~0.
 */
export function encodeService(what: What, vs: VirtualServer, full: boolean): Buffer {
  const addr = vs.fwmark ? undefined : addrBytes(what, vs.family, vs.address);
  const sched = full ? Buffer.byteLength(vs.scheduler) : 0;
  const pe = full && vs.peName ? Buffer.byteLength(vs.peName) : 0;
  const size = NLA_HDRLEN + nlaSize(2) + (addr ? nlaSize(2) + nlaSize(16) + nlaSize(2) : nlaSize(4))
    + (full ? nlaSize(sched + 1) + nlaSize(8) + nlaSize(4) + nlaSize(4) + (vs.peName ? nlaSize(pe + 1) : 0) : 0);
  const w = new NlaWriter(size);
  const at = w.nest(CmdAttr.SERVICE);
  w.u16(SvcAttr.AF, afOf[vs.family]);
  if (addr) {
    w.u16(SvcAttr.PROTOCOL, protoOf[vs.protocol]);
    w.bytes(SvcAttr.ADDR, addr, 16); // union nf_inet_addr: an IPv4 address in the first 4 bytes
    w.be16(SvcAttr.PORT, vs.port);
  } else {
    w.u32(SvcAttr.FWMARK, vs.fwmark);
  }
  if (full) {
    w.cstring(SvcAttr.SCHED_NAME, vs.scheduler, sched);
    const flags = new Uint8Array(8);
    const dv = new DataView(flags.buffer);
    dv.setUint32(0, vs.flags >>> 0, true);
    dv.setUint32(4, 0xffffffff, true);
    w.bytes(SvcAttr.FLAGS, flags);
    w.u32(SvcAttr.TIMEOUT, vs.timeout);
    writeNetmask(w, vs);
    if (vs.peName) w.cstring(SvcAttr.PE_NAME, vs.peName, pe);
  }
  w.end(at);
  return w.done();
}

/**
 * The nested DEST attribute. ADDR_FAMILY is always sent (kernels < 3.18 ignore it); `full` adds
 * what NEW/SET_DEST require (FWD_METHOD, WEIGHT, U_THRESH, L_THRESH) and the tunnel settings for
 * tunnel real servers (kernel >= 5.2).
 */
export function encodeDest(what: What, rs: RealServer, full: boolean): Buffer {
  const addr = addrBytes(what, rs.family, rs.address);
  const tunnel = full && rs.forward === 'tunnel';
  const w = new NlaWriter(NLA_HDRLEN + nlaSize(16) + 2 * nlaSize(2) + (full ? 4 * nlaSize(4) : 0)
    + (tunnel ? nlaSize(1) + 2 * nlaSize(2) : 0));
  const at = w.nest(CmdAttr.DEST);
  w.bytes(DestAttr.ADDR, addr, 16);
  w.be16(DestAttr.PORT, rs.port);
  w.u16(DestAttr.ADDR_FAMILY, afOf[rs.family]);
  if (full) {
    w.u32(DestAttr.FWD_METHOD, fwdOf(rs.forward));
    w.u32(DestAttr.WEIGHT, rs.weight);
    w.u32(DestAttr.U_THRESH, rs.upperThreshold);
    w.u32(DestAttr.L_THRESH, rs.lowerThreshold);
    if (tunnel) {
      w.u8(DestAttr.TUN_TYPE, tunOf[rs.tunnelType]);
      w.be16(DestAttr.TUN_PORT, rs.tunnelPort);
      w.u16(DestAttr.TUN_FLAGS, rs.tunnelFlags);
    }
  }
  w.end(at);
  return w.done();
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

