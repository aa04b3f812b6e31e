// IPVS generic netlink replies, decoded: virtual and real servers, stats, info and timeouts.
// pure: bytes in, values out (layout: docs/ipvs-client.md, "Message layout"). Every decoder throws
// only IpvsError, so garbage from the kernel (or a fuzzer) is a typed error, never a RangeError
// escaping from a Buffer read.
import type {
  IpvsInfo, IpvsStats, IpvsTimeouts, Protocol, RealServer, TunnelType, VirtualServer,
} from '../model/ipvs.js';
import { FORWARD_METHODS } from '../model/ipvs.js';
import { type Family, formatIPv6 } from '../model/addr.js';
import {
  AF_INET, AF_INET6, CONN_F_FWD_MASK, CmdAttr, DestAttr, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, InfoAttr, StatsAttr,
  SvcAttr,
} from './constants.js';
import { IpvsError } from './errors.js';
import { type NlMessage, genlAttrs } from '../netlink/framing.js';
import { AttrIndex } from '../netlink/attr-index.js';

/** genlAttrs that throws IpvsError. */
const ipvsGenlAttrs = (m: NlMessage): Buffer => genlAttrs(m, IpvsError);
/** The attributes of buf[start, end) in place (no Buffer per attribute), throwing IpvsError. */
const index = (buf: Buffer, start: number, end: number, max: number): AttrIndex =>
  new AttrIndex(buf, start, end, max, IpvsError);

const SVC_MAX = SvcAttr.STATS64;
const DEST_MAX = DestAttr.TUN_FLAGS;
const STATS_MAX = StatsAttr.OUTBPS;

function decodeNetmask(a: AttrIndex, family: Family): number {
  if (!a.has(SvcAttr.NETMASK)) return 0;
  const len = a.len(SvcAttr.NETMASK);
  if (len < 4) throw IpvsError.malformed('decode', `service: netmask of ${len} bytes`);
  const at = a.at(SvcAttr.NETMASK);
  return family === 'IPv6' ? a.buf.readUInt32LE(at) : a.buf.readUInt32BE(at);
}

/** The offset of a required attribute of at least `size` bytes. */
function need(a: AttrIndex, type: number, size: number, what: string): number {
  if (!a.has(type)) throw IpvsError.malformed('decode', `${what}: attribute ${type} missing`);
  if (a.len(type) < size) {
    throw IpvsError.malformed('decode', `${what}: attribute ${type} has ${a.len(type)} bytes, needs ${size}`);
  }
  return a.at(type);
}
function optU32(a: AttrIndex, type: number, what: string): number {
  return a.has(type) ? a.buf.readUInt32LE(need(a, type, 4, what)) : 0;
}
function optU16(a: AttrIndex, type: number, what: string): number {
  return a.has(type) ? a.buf.readUInt16LE(need(a, type, 2, what)) : 0;
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

function decodeAddr(a: AttrIndex, type: number, family: Family, what: string): string {
  const at = need(a, type, 4, what);
  const b = a.buf;
  if (family === 'IPv4') return `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;
  if (a.len(type) < 16) throw IpvsError.malformed('decode', `${what}: IPv6 address of ${a.len(type)} bytes`);
  return formatIPv6(b.subarray(at, at + 16));
}

const protocols: Record<number, Protocol> = { [IPPROTO_TCP]: 'TCP', [IPPROTO_UDP]: 'UDP', [IPPROTO_SCTP]: 'SCTP' };
const tunnels: TunnelType[] = ['ipip', 'gue', 'gre'];

/** IPVS counters from a nested STATS (u32 but the byte counters) or STATS64 (all u64) attribute. */
export function decodeStats(buf: Buffer, wide: boolean): IpvsStats {
  return statsIn(buf, 0, buf.length, wide);
}

function statsIn(buf: Buffer, start: number, end: number, wide: boolean): IpvsStats {
  const a = index(buf, start, end, STATS_MAX);
  const get = (type: number, isU64: boolean): bigint => {
    if (!a.has(type)) return 0n;
    const at = a.at(type);
    if (isU64) {
      if (a.len(type) < 8) throw IpvsError.malformed('decode', `stats attribute ${type} has ${a.len(type)} bytes`);
      return buf.readBigUInt64LE(at);
    }
    if (a.len(type) < 4) throw IpvsError.malformed('decode', `stats attribute ${type} has ${a.len(type)} bytes`);
    return BigInt(buf.readUInt32LE(at));
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

function statsOf(a: AttrIndex, stats64: number, stats32: number): IpvsStats | undefined {
  const type = a.has(stats64) ? stats64 : a.has(stats32) ? stats32 : 0;
  if (!type) return undefined;
  const at = a.at(type);
  return statsIn(a.buf, at, at + a.len(type), type === stats64);
}

/** A virtual server from the attributes of a nested SERVICE attribute. */
export function decodeService(buf: Buffer): VirtualServer {
  return serviceIn(buf, 0, buf.length, true);
}

/** `stats`: decode the STATS / STATS64 nest (ReadOptions.stats). */
function serviceIn(buf: Buffer, start: number, end: number, stats: boolean): VirtualServer {
  const what = 'service';
  const a = index(buf, start, end, SVC_MAX);
  const family = familyFromAf(buf.readUInt16LE(need(a, SvcAttr.AF, 2, what)), what);
  const fwmark = optU32(a, SvcAttr.FWMARK, what);
  let protocol: Protocol = 'TCP';
  let address = family === 'IPv4' ? '0.0.0.0' : '::';
  let port = 0;
  // Firewall-mark services come back without PROTOCOL/ADDR/PORT (the kernel stores TCP for them).
  if (!fwmark) {
    const p = buf.readUInt16LE(need(a, SvcAttr.PROTOCOL, 2, what));
    const proto = protocols[p];
    if (!proto) throw IpvsError.malformed('decode', `${what}: unknown protocol ${p}`);
    protocol = proto;
    address = decodeAddr(a, SvcAttr.ADDR, family, what);
    port = buf.readUInt16BE(need(a, SvcAttr.PORT, 2, what));
  }
  if (a.has(SvcAttr.FLAGS) && a.len(SvcAttr.FLAGS) < 4) {
    throw IpvsError.malformed('decode', `${what}: flags of ${a.len(SvcAttr.FLAGS)} bytes`);
  }
  const vs: VirtualServer = {
    family,
    protocol,
    address,
    port,
    fwmark,
    scheduler: a.has(SvcAttr.SCHED_NAME) ? readCString(a.sub(SvcAttr.SCHED_NAME)!) : '',
    flags: a.has(SvcAttr.FLAGS) ? buf.readUInt32LE(a.at(SvcAttr.FLAGS)) : 0,
    timeout: optU32(a, SvcAttr.TIMEOUT, what),
    netmask: decodeNetmask(a, family),
    peName: a.has(SvcAttr.PE_NAME) ? readCString(a.sub(SvcAttr.PE_NAME)!) : '',
  };
  const counters = stats ? statsOf(a, SvcAttr.STATS64, SvcAttr.STATS) : undefined;
  if (counters) vs.stats = counters;
  return vs;
}

/**
 * A real server from the attributes of a nested DEST attribute. Kernels before 3.18 send no
 * ADDR_FAMILY: the service's family is the real server's then.
 */
export function decodeDest(buf: Buffer, serviceFamily: Family): RealServer {
  return destIn(buf, 0, buf.length, serviceFamily, true);
}

function destIn(buf: Buffer, start: number, end: number, serviceFamily: Family, stats: boolean): RealServer {
  const what = 'dest';
  const a = index(buf, start, end, DEST_MAX);
  const family = a.has(DestAttr.ADDR_FAMILY)
    ? familyFromAf(buf.readUInt16LE(need(a, DestAttr.ADDR_FAMILY, 2, what)), what)
    : serviceFamily;
  const fwd = optU32(a, DestAttr.FWD_METHOD, what) & CONN_F_FWD_MASK;
  const forward = FORWARD_METHODS[fwd];
  if (!forward) throw IpvsError.malformed('decode', `${what}: unknown forwarding method ${fwd}`);
  const tun = a.has(DestAttr.TUN_TYPE) ? buf.readUInt8(need(a, DestAttr.TUN_TYPE, 1, what)) : 0;
  const rs: RealServer = {
    address: decodeAddr(a, DestAttr.ADDR, family, what),
    port: buf.readUInt16BE(need(a, DestAttr.PORT, 2, what)),
    family,
    weight: optU32(a, DestAttr.WEIGHT, what),
    forward,
    upperThreshold: optU32(a, DestAttr.U_THRESH, what),
    lowerThreshold: optU32(a, DestAttr.L_THRESH, what),
    tunnelType: tunnels[tun] ?? 'ipip',
    tunnelPort: a.has(DestAttr.TUN_PORT) ? buf.readUInt16BE(need(a, DestAttr.TUN_PORT, 2, what)) : 0,
    tunnelFlags: optU16(a, DestAttr.TUN_FLAGS, what),
    activeConns: optU32(a, DestAttr.ACTIVE_CONNS, what),
    inactiveConns: optU32(a, DestAttr.INACT_CONNS, what),
    persistentConns: optU32(a, DestAttr.PERSIST_CONNS, what),
  };
  const counters = stats ? statsOf(a, DestAttr.STATS64, DestAttr.STATS) : undefined;
  if (counters) rs.stats = counters;
  return rs;
}

/** The [start, end) of the nested attribute `type` of a genl message's top level; throws when missing. */
function topNest(msg: NlMessage, type: number, what: string): [number, number] {
  const p = ipvsGenlAttrs(msg);
  const top = index(p, 0, p.length, CmdAttr.TIMEOUT_UDP);
  const at = need(top, type, 0, what);
  return [at, at + top.len(type)];
}

/** The virtual server of one GET_SERVICE message; its counters unless `stats` is false. */
export function decodeServiceMessage(msg: NlMessage, stats = true): VirtualServer {
  const [start, end] = topNest(msg, CmdAttr.SERVICE, 'service message');
  return serviceIn(ipvsGenlAttrs(msg), start, end, stats);
}

/** The real server of one GET_DEST dump message; its counters unless `stats` is false. */
export function decodeDestMessage(msg: NlMessage, serviceFamily: Family, stats = true): RealServer {
  const [start, end] = topNest(msg, CmdAttr.DEST, 'dest message');
  return destIn(ipvsGenlAttrs(msg), start, end, serviceFamily, stats);
}

/** GET_INFO reply. */
export function decodeInfo(msg: NlMessage): IpvsInfo {
  const p = ipvsGenlAttrs(msg);
  const a = index(p, 0, p.length, InfoAttr.CONN_TAB_SIZE);
  const code = p.readUInt32LE(need(a, InfoAttr.VERSION, 4, 'info'));
  return {
    versionCode: code,
    version: `${(code >> 16) & 0xff}.${(code >> 8) & 0xff}.${code & 0xff}`,
    connTableSize: p.readUInt32LE(need(a, InfoAttr.CONN_TAB_SIZE, 4, 'info')),
  };
}

/** GET_CONFIG reply. */
export function decodeTimeouts(msg: NlMessage): IpvsTimeouts {
  const p = ipvsGenlAttrs(msg);
  const a = index(p, 0, p.length, CmdAttr.TIMEOUT_UDP);
  return {
    tcp: optU32(a, CmdAttr.TIMEOUT_TCP, 'config'),
    tcpFin: optU32(a, CmdAttr.TIMEOUT_TCP_FIN, 'config'),
    udp: optU32(a, CmdAttr.TIMEOUT_UDP, 'config'),
  };
}
