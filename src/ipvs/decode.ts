// IPVS generic netlink replies, decoded: virtual and real servers, stats, info and timeouts.
// pure: bytes in, values out (layout: docs/ipvs-client.md, "Message layout"). Every decoder throws
// only IpvsError, so garbage from the kernel (or a fuzzer) is a typed error, never a RangeError
// escaping from a Buffer read.
import type {
  IpvsInfo, IpvsStats, IpvsTimeouts, Protocol, RealServer, TunnelType, VirtualServer,
} from '../model/ipvs.js';
import { FORWARD_METHODS } from '../model/ipvs.js';
import { type Family, formatIPv4, formatIPv6 } from '../model/addr.js';
import {
  AF_INET, AF_INET6, CONN_F_FWD_MASK, CmdAttr, DestAttr, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, InfoAttr, StatsAttr,
  SvcAttr,
} from './constants.js';
import { IpvsError } from './errors.js';
import { type NlMessage, genlAttrs, parseAttrs } from '../netlink/framing.js';

/** parseAttrs that throws IpvsError. */
const ipvsAttrs = (b: Buffer): Map<number, Buffer> => parseAttrs(b, IpvsError);
/** genlAttrs that throws IpvsError. */
const ipvsGenlAttrs = (m: NlMessage): Buffer => genlAttrs(m, IpvsError);

function decodeNetmask(b: Buffer | undefined, family: Family): number {
  if (!b) return 0;
  if (b.length < 4) throw IpvsError.malformed('decode', `service: netmask of ${b.length} bytes`);
  return family === 'IPv6' ? b.readUInt32LE(0) : b.readUInt32BE(0);
}

function need(attrs: Map<number, Buffer>, type: number, size: number, what: string): Buffer {
  const v = attrs.get(type);
  if (!v) throw IpvsError.malformed('decode', `${what}: attribute ${type} missing`);
  if (v.length < size) {
    throw IpvsError.malformed('decode', `${what}: attribute ${type} has ${v.length} bytes, needs ${size}`);
  }
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
  if (flagsAttr && flagsAttr.length < 4) {
    throw IpvsError.malformed('decode', `${what}: flags of ${flagsAttr.length} bytes`);
  }
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
