// IPVS generic netlink attributes, encoded: the nested SERVICE and DEST attributes of a request.
// pure: values in, bytes out. Requests are built in requests.ts, replies decoded in decode.ts;
// constants follow include/uapi/linux/ip_vs.h as of Linux 6.1 (constants.ts). The message layout
// is drawn below the imports; docs/ipvs-client.md ("Message layout") says the rest.
import type { ForwardMethod, Protocol, RealServer, TunnelType, VirtualServer } from '../model/ipvs.js';
import { FORWARD_METHODS } from '../model/ipvs.js';
import { type Family, parseIPv4Number, parseIPv6 } from '../model/addr.js';
import {
  AF_INET, AF_INET6, CmdAttr, DestAttr, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, SvcAttr, TunType,
} from './constants.js';
import { IpvsError } from './errors.js';
import { NLA_HDRLEN } from '../netlink/constants.js';
import { NlaWriter, nlaSize } from '../netlink/framing.js';

/*
 * One IPVS message, as sent and as received (integers host order, be = big-endian; every
 * attribute padded to 4 bytes):
 *
 * 0               4       6       8              12             16   17   18      20
 * +---------------+-------+-------+--------------+--------------+----+----+-------+
 * | nlmsg_len u32 | type  | flags | seq u32      | port u32     |cmd |ver | rsvd  |
 * +---------------+-------+-------+--------------+--------------+----+----+-------+
 * | nlmsghdr: type = the IPVS family id       | genlmsghdr: cmd = IPVS_CMD_*, ver = 1 |
 * +---------------------------------------------------------------------------------+
 * | nla_len u16 | nla_type u16 = IPVS_CMD_ATTR_SERVICE | nested:                      |
 * |    | len | AF u16 | len | PROTOCOL u16 | len | ADDR 16 bytes (v4 in the first 4)  |
 * |    | len | PORT be16 | len | SCHED_NAME "rr\0" | len | FLAGS {flags u32,mask u32} |
 * |    | len | TIMEOUT u32 | len | NETMASK u32 | ...                                  |
 * | nla_len | IPVS_CMD_ATTR_DEST | nested: ADDR, PORT be16, FWD_METHOD u32, WEIGHT u32, |
 * |    U_THRESH u32, L_THRESH u32, ADDR_FAMILY u16, TUN_TYPE u8, TUN_PORT be16, ...     |
 * +---------------------------------------------------------------------------------+
 */
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
  else w.be32(SvcAttr.NETMASK, vs.netmask);
}

/**
 * Writes the 16-byte address attribute `type` (an IPv4 address in the first 4 bytes); throws
 * IpvsError when `address` is not of `family`.
 */
function writeAddr(w: NlaWriter, type: number, what: What, family: Family, address: string): void {
  if (family === 'IPv4') {
    const v = parseIPv4Number(address);
    if (v !== undefined) return w.addr4(type, v);
  } else {
    const raw = parseIPv6(address);
    if (raw) return w.bytes(type, raw, 16);
  }
  throw IpvsError.invalidArgument(whatOf(what), `${JSON.stringify(address)} is not an ${family} address`);
}

/**
 * The bytes of the nested SERVICE attribute: AF + (FWMARK | PROTOCOL, ADDR, PORT) identify the
 * virtual server; `full` adds what NEW/SET_SERVICE require (the kernel answers EINVAL when any
 * of SCHED_NAME, FLAGS, TIMEOUT, NETMASK is missing).
 */
export function serviceAttrSize(vs: VirtualServer, full: boolean): number {
  return NLA_HDRLEN + nlaSize(2) + (vs.fwmark ? nlaSize(4) : nlaSize(2) + nlaSize(16) + nlaSize(2))
    + (full ? nlaSize(Buffer.byteLength(vs.scheduler) + 1) + nlaSize(8) + nlaSize(4) + nlaSize(4)
      + (vs.peName ? nlaSize(Buffer.byteLength(vs.peName) + 1) : 0) : 0);
}

/** Writes the SERVICE attribute of serviceAttrSize's size; flags are sent with mask ~0. */
export function writeServiceAttr(w: NlaWriter, what: What, vs: VirtualServer, full: boolean): void {
  const at = w.nest(CmdAttr.SERVICE);
  w.u16(SvcAttr.AF, afOf[vs.family]);
  if (!vs.fwmark) {
    w.u16(SvcAttr.PROTOCOL, protoOf[vs.protocol]);
    writeAddr(w, SvcAttr.ADDR, what, vs.family, vs.address);
    w.be16(SvcAttr.PORT, vs.port);
  } else {
    w.u32(SvcAttr.FWMARK, vs.fwmark);
  }
  if (full) {
    w.cstring(SvcAttr.SCHED_NAME, vs.scheduler);
    w.u32pair(SvcAttr.FLAGS, vs.flags, 0xffffffff);
    w.u32(SvcAttr.TIMEOUT, vs.timeout);
    writeNetmask(w, vs);
    if (vs.peName) w.cstring(SvcAttr.PE_NAME, vs.peName);
  }
  w.end(at);
}

/** The SERVICE attribute in a buffer of its own (dumps, zero; a plan's ops write in place). */
export function encodeService(what: What, vs: VirtualServer, full: boolean): Buffer {
  const w = new NlaWriter(serviceAttrSize(vs, full));
  writeServiceAttr(w, what, vs, full);
  return w.done();
}

/**
 * The bytes of the nested DEST attribute. ADDR_FAMILY is always sent (kernels < 3.18 ignore it);
 * `full` adds what NEW/SET_DEST require (FWD_METHOD, WEIGHT, U_THRESH, L_THRESH) and the tunnel
 * settings for tunnel real servers (kernel >= 5.2).
 */
export function destAttrSize(rs: RealServer, full: boolean): number {
  return NLA_HDRLEN + nlaSize(16) + 2 * nlaSize(2) + (full ? 4 * nlaSize(4) : 0)
    + (full && rs.forward === 'tunnel' ? nlaSize(1) + 2 * nlaSize(2) : 0);
}

/** Writes the DEST attribute of destAttrSize's size. */
export function writeDestAttr(w: NlaWriter, what: What, rs: RealServer, full: boolean): void {
  const at = w.nest(CmdAttr.DEST);
  writeAddr(w, DestAttr.ADDR, what, rs.family, rs.address);
  w.be16(DestAttr.PORT, rs.port);
  w.u16(DestAttr.ADDR_FAMILY, afOf[rs.family]);
  if (full) {
    w.u32(DestAttr.FWD_METHOD, fwdOf(rs.forward));
    w.u32(DestAttr.WEIGHT, rs.weight);
    w.u32(DestAttr.U_THRESH, rs.upperThreshold);
    w.u32(DestAttr.L_THRESH, rs.lowerThreshold);
    if (rs.forward === 'tunnel') {
      w.u8(DestAttr.TUN_TYPE, tunOf[rs.tunnelType]);
      w.be16(DestAttr.TUN_PORT, rs.tunnelPort);
      w.u16(DestAttr.TUN_FLAGS, rs.tunnelFlags);
    }
  }
  w.end(at);
}

/** The DEST attribute in a buffer of its own. */
export function encodeDest(what: What, rs: RealServer, full: boolean): Buffer {
  const w = new NlaWriter(destAttrSize(rs, full));
  writeDestAttr(w, what, rs, full);
  return w.done();
}
