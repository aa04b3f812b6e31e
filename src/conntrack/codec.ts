// ctnetlink codec, pure: the conntrack dump request, one entry of its answer, and the delete
// request for one entry. Only what the operator's UDP cleanup needs: the two tuples, the id and
// the zone (a delete must name the entry exactly, so a flow that ended and was made again under
// the same tuple is not deleted by mistake: the kernel answers ENOENT when CTA_ID differs).
// Message layout, the protocol filter (Linux >= 5.8) and nesting: docs/ipvs-client.md
// ("ctnetlink messages").
import { formatHostPort } from '../model/ipvs.js';
import { type Family, formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../model/addr.js';
import {
  NLA_F_NESTED, NLMSG_HDRLEN, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST,
} from '../netlink/constants.js';
import { type NlMessage, be16, nla, parseAttrs } from '../netlink/framing.js';
import {
  AF_INET, AF_INET6, CTA_FILTER, CTA_FILTER_F_CTA_PROTO_NUM, CTA_FILTER_ORIG_FLAGS, CTA_ID, CTA_IP_V4_DST,
  CTA_IP_V4_SRC, CTA_IP_V6_DST, CTA_IP_V6_SRC, CTA_PROTO_DST_PORT, CTA_PROTO_NUM, CTA_PROTO_SRC_PORT, CTA_TIMEOUT,
  CTA_TUPLE_IP, CTA_TUPLE_ORIG, CTA_TUPLE_PROTO, CTA_TUPLE_REPLY, CTA_ZONE, IPCTNL_MSG_CT_DELETE, IPCTNL_MSG_CT_GET,
  IPCTNL_MSG_CT_NEW, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, NFGENMSG_LEN, NFNETLINK_V0, NFNL_SUBSYS_CTNETLINK,
} from './constants.js';
import { ConntrackError } from './errors.js';

/** One direction of a conntrack entry. Ports are 0 for protocols without them. */
export interface FlowTuple {
  src: string;
  dst: string;
  sport: number;
  dport: number;
}

/** A conntrack entry as the cleanup sees it. */
export interface Flow {
  family: Family;
  /** IP protocol number (17 = UDP). */
  proto: number;
  orig: FlowTuple;
  reply: FlowTuple;
  /** The kernel's id of the entry (CTA_ID); 0 when it sent none. */
  id: number;
  /** Conntrack zone (CTA_ZONE); 0, the default zone, when absent. */
  zone: number;
}

const PROTO_NAMES = new Map<number, string>([[IPPROTO_TCP, 'tcp'], [IPPROTO_UDP, 'udp'], [IPPROTO_SCTP, 'sctp']]);

/** One line: `udp 192.168.100.61:40002 -> 10.200.1.61:53 reply 10.10.1.61:53 -> 192.168.100.61:40002 id=7 zone=0`. */
export function formatFlow(f: Flow): string {
  const t = (x: FlowTuple) => `${formatHostPort(x.src, x.sport)} -> ${formatHostPort(x.dst, x.dport)}`;
  return `${PROTO_NAMES.get(f.proto) ?? `proto${f.proto}`} ${t(f.orig)} reply ${t(f.reply)} id=${f.id} zone=${f.zone}`;
}

/** Parses formatFlow's line (the fake's seed); undefined when it is not one. */
export function parseFlow(line: string): Flow | undefined {
  const m = /^(\w+) (\S+) -> (\S+) reply (\S+) -> (\S+) id=(\d+) zone=(\d+)$/.exec(line.trim());
  if (!m) return undefined;
  const proto = [...PROTO_NAMES].find(([, n]) => n === m[1])?.[0]
    ?? (/^proto(\d+)$/.exec(m[1]!) ? Number(m[1]!.slice(5)) : undefined);
  const hp = (s: string): [string, number] | undefined => {
    const x = /^\[([^\]]+)\]:(\d+)$/.exec(s) ?? /^([^:]+):(\d+)$/.exec(s);
    return x ? [x[1]!, Number(x[2])] : undefined;
  };
  const parts = [m[2]!, m[3]!, m[4]!, m[5]!].map(hp);
  if (proto === undefined || parts.some((p) => !p)) return undefined;
  const [os, od, rs, rd] = parts as Array<[string, number]>;
  const family: Family = os![0].includes(':') ? 'IPv6' : 'IPv4';
  return {
    family, proto,
    orig: { src: os![0], sport: os![1], dst: od![0], dport: od![1] },
    reply: { src: rs![0], sport: rs![1], dst: rd![0], dport: rd![1] },
    id: Number(m[6]), zone: Number(m[7]),
  };
}

function header(msg: number, flags: number, family: Family, seq: number, port: number, body: Buffer): Buffer {
  const b = Buffer.alloc(NLMSG_HDRLEN + NFGENMSG_LEN + body.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE((NFNL_SUBSYS_CTNETLINK << 8) | msg, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(port >>> 0, 12);
  b.writeUInt8(family === 'IPv4' ? AF_INET : AF_INET6, 16);
  b.writeUInt8(NFNETLINK_V0, 17);
  // res_id (be16) stays 0.
  body.copy(b, NLMSG_HDRLEN + NFGENMSG_LEN);
  return b;
}

// ctnetlink accepts nests with or without NLA_F_NESTED; the kernel sets it (parseAttrs masks it).
const nested = (type: number, children: Buffer[]): Buffer => nla(type | NLA_F_NESTED, Buffer.concat(children));

/** A u32 in host byte order, as nla_get_u32 reads it. */
function hostU32(v: number): Buffer {
  return Buffer.from(new Uint32Array([v >>> 0]).buffer);
}

/**
 * The dump request: every conntrack entry of `family` in the socket's network namespace; with
 * `proto`, the kernel is asked to send only entries of that IP protocol (CTA_FILTER, see above).
 */
export function encodeDump(family: Family, seq: number, port: number, proto?: number): Buffer {
  if (proto === undefined) {
    return header(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, family, seq, port, Buffer.alloc(0));
  }
  if (!Number.isInteger(proto) || proto < 0 || proto > 0xff) {
    throw ConntrackError.invalidArgument('list', `protocol ${proto} is not 0-255`);
  }
  const body = Buffer.concat([
    nested(CTA_TUPLE_ORIG, [nested(CTA_TUPLE_PROTO, [nla(CTA_PROTO_NUM, Buffer.from([proto]))])]),
    nested(CTA_FILTER, [nla(CTA_FILTER_ORIG_FLAGS, hostU32(CTA_FILTER_F_CTA_PROTO_NUM))]),
  ]);
  return header(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, family, seq, port, body);
}

function encodeTuple(type: number, family: Family, proto: number, t: FlowTuple): Buffer {
  const parse = family === 'IPv4' ? parseIPv4 : parseIPv6;
  const src = parse(t.src);
  const dst = parse(t.dst);
  if (!src || !dst) throw ConntrackError.invalidArgument('delete', `tuple ${t.src} -> ${t.dst} is not ${family}`);
  for (const p of [t.sport, t.dport]) {
    if (!Number.isInteger(p) || p < 0 || p > 0xffff) {
      throw ConntrackError.invalidArgument('delete', `port ${p} is not 0-65535`);
    }
  }
  const [s, d] = family === 'IPv4' ? [CTA_IP_V4_SRC, CTA_IP_V4_DST] : [CTA_IP_V6_SRC, CTA_IP_V6_DST];
  return nested(type, [
    nested(CTA_TUPLE_IP, [nla(s, src), nla(d, dst)]),
    nested(CTA_TUPLE_PROTO,
      [nla(CTA_PROTO_NUM, Buffer.from([proto])), nla(CTA_PROTO_SRC_PORT, be16(t.sport)),
        nla(CTA_PROTO_DST_PORT, be16(t.dport))]),
  ]);
}

/**
 * The delete request for exactly this entry: its original tuple, its zone, and its id when known
 * (then the kernel deletes only that entry: ENOENT when the tuple now belongs to another one).
 * Only for protocols with ports (UDP, TCP, SCTP): anything else is refused before sending. It never
 * goes without a tuple: ctnetlink_del_conntrack flushes the whole table then.
 */
export function encodeDelete(f: Flow, seq: number, port: number): Buffer {
  if (!PROTO_NAMES.has(f.proto)) {
    throw ConntrackError.invalidArgument('delete', `protocol ${f.proto} has no ports; refusing to build its tuple`);
  }
  if (!Number.isInteger(f.zone) || f.zone < 0 || f.zone > 0xffff) {
    throw ConntrackError.invalidArgument('delete', `zone ${f.zone} is not 0-65535`);
  }
  const attrs = [encodeTuple(CTA_TUPLE_ORIG, f.family, f.proto, f.orig), nla(CTA_ZONE, be16(f.zone))];
  if (f.id) {
    const id = Buffer.alloc(4);
    id.writeUInt32BE(f.id >>> 0);
    attrs.push(nla(CTA_ID, id));
  }
  return header(IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, f.family, seq, port, Buffer.concat(attrs));
}

function decodeTuple(buf: Buffer, family: Family, what: string): { proto: number; t: FlowTuple } {
  const bad = (why: string) => ConntrackError.malformed('list', `${what}: ${why}`);
  const a = parseAttrs(buf, ConntrackError);
  const ip = a.get(CTA_TUPLE_IP);
  const l4 = a.get(CTA_TUPLE_PROTO);
  if (!ip || !l4) throw bad('CTA_TUPLE_IP or CTA_TUPLE_PROTO missing');
  const ips = parseAttrs(ip, ConntrackError);
  const [s, d, len, fmt] = family === 'IPv4'
    ? [CTA_IP_V4_SRC, CTA_IP_V4_DST, 4, formatIPv4] : [CTA_IP_V6_SRC, CTA_IP_V6_DST, 16, formatIPv6];
  const src = ips.get(s);
  const dst = ips.get(d);
  if (!src || !dst) throw bad(`no ${family} source or destination`);
  if (src.length !== len || dst.length !== len) throw bad(`${family} address of ${src.length}/${dst.length} bytes`);
  const p = parseAttrs(l4, ConntrackError);
  const num = p.get(CTA_PROTO_NUM);
  if (!num || num.length < 1) throw bad('CTA_PROTO_NUM missing');
  const port = (type: number): number => {
    const v = p.get(type);
    if (!v) return 0;
    if (v.length < 2) throw bad(`port attribute ${type} of ${v.length} bytes`);
    return v.readUInt16BE(0);
  };
  return { proto: num.readUInt8(0),
    t: { src: fmt(src), dst: fmt(dst), sport: port(CTA_PROTO_SRC_PORT), dport: port(CTA_PROTO_DST_PORT) } };
}

/**
 * One entry of a dump answer (IPCTNL_MSG_CT_NEW). Throws ConntrackError (EMALFORMED) when the
 * message is not a conntrack entry or a tuple is unreadable.
 */
export function decodeFlow(m: NlMessage): Flow {
  if (m.type !== ((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW)) {
    throw ConntrackError.malformed('list', `message type 0x${m.type.toString(16)} is not a conntrack entry`);
  }
  if (m.payload.length < NFGENMSG_LEN) throw ConntrackError.malformed('list', 'message shorter than nfgenmsg');
  const af = m.payload.readUInt8(0);
  const family: Family | undefined = af === AF_INET ? 'IPv4' : af === AF_INET6 ? 'IPv6' : undefined;
  if (!family) throw ConntrackError.malformed('list', `address family ${af}`);
  const a = parseAttrs(m.payload.subarray(NFGENMSG_LEN), ConntrackError);
  const orig = a.get(CTA_TUPLE_ORIG);
  const reply = a.get(CTA_TUPLE_REPLY);
  if (!orig || !reply) throw ConntrackError.malformed('list', 'entry without CTA_TUPLE_ORIG or CTA_TUPLE_REPLY');
  const o = decodeTuple(orig, family, 'original tuple');
  const r = decodeTuple(reply, family, 'reply tuple');
  const id = a.get(CTA_ID);
  const zone = a.get(CTA_ZONE);
  return {
    family, proto: o.proto, orig: o.t, reply: r.t,
    id: id && id.length >= 4 ? id.readUInt32BE(0) : 0,
    zone: zone && zone.length >= 2 ? zone.readUInt16BE(0) : 0,
  };
}

/** The kernel's form of a conntrack entry (what a dump sends), for the fake and tests. */
export function encodeFlow(f: Flow, seq: number, port: number): Buffer {
  const attrs = [encodeTuple(CTA_TUPLE_ORIG, f.family, f.proto, f.orig),
    encodeTuple(CTA_TUPLE_REPLY, f.family, f.proto, f.reply)];
  const id = Buffer.alloc(4);
  id.writeUInt32BE(f.id >>> 0);
  attrs.push(nla(CTA_ID, id));
  if (f.zone) attrs.push(nla(CTA_ZONE, be16(f.zone)));
  return header(IPCTNL_MSG_CT_NEW, 0, f.family, seq, port, Buffer.concat(attrs));
}

/**
 * The request that makes this entry (both tuples, its zone, `timeout` seconds to live): only the
 * kernel contract's set-up uses it, the operator never creates entries. EEXIST when either tuple
 * is taken in that zone (the kernel hashes both directions).
 */
export function encodeCreate(f: Flow, timeout: number, seq: number, port: number): Buffer {
  const attrs = [encodeTuple(CTA_TUPLE_ORIG, f.family, f.proto, f.orig),
    encodeTuple(CTA_TUPLE_REPLY, f.family, f.proto, f.reply)];
  const ttl = Buffer.alloc(4);
  ttl.writeUInt32BE(timeout >>> 0);
  attrs.push(nla(CTA_TIMEOUT, ttl));
  if (f.zone) attrs.push(nla(CTA_ZONE, be16(f.zone)));
  return header(IPCTNL_MSG_CT_NEW, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, f.family, seq, port,
    Buffer.concat(attrs));
}
