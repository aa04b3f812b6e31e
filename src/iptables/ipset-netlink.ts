// Our ipsets read over netlink (nfnetlink subsystem IPSET, <linux/netfilter/ipset/ip_set.h>) as
// ipset-save.ts's SavedSets: header fields, and members in the text render.ts writes, so the
// planner compares them as it compares a save. pure: no I/O (the socket: ipset-reader.ts). Why:
// `ipset` spent seconds on its text at a restart of 10 000 Services under TCG (docs/performance.md).
// A dump (IPSET_CMD_LIST, NLM_F_DUMP) answers per set: a first message with the name, type, family
// and header (IPSET_ATTR_DATA), then members as IPSET_ATTR_ADT, one IPSET_ATTR_DATA each, continued
// in messages carrying only the name (ip_set_core.c ip_set_dump_start). What this does not know
// (another type, a header option, a member extension) becomes an option or marks the set `odd`,
// as in ipset-save.ts, so the planner refills that set.
import {
  NFGENMSG_LEN, NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLMSG_HDRLEN, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
} from '../netlink/constants.js';
import { NetlinkError } from '../netlink/errors.js';
import { type NlMessage, attrList, cstring, nla, parseAttrs } from '../netlink/framing.js';
import { type IpPortMember, formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../model/addr.js';
import type { SavedSet, SavedSets } from './ipset-save.js';

export type { IpPortMember };

/** An ipset netlink request that failed, or an ipset message that could not be read. */
export class IpsetError extends NetlinkError {}

const NFNL_SUBSYS_IPSET = 6;
const IPSET_CMD_LIST = 7;
/** The message type of a list request and of each of its answers. */
export const IPSET_LIST = (NFNL_SUBSYS_IPSET << 8) | IPSET_CMD_LIST;
/** Add and delete one element (IPSET_CMD_ADD, IPSET_CMD_DEL). */
export const IPSET_ADD = (NFNL_SUBSYS_IPSET << 8) | 9;
export const IPSET_DEL = (NFNL_SUBSYS_IPSET << 8) | 10;
/** IPSET_PROTOCOL_MIN: every kernel since 2.6.39 speaks it; 7 only adds the set's index. */
const PROTOCOL = 6;
const AF_INET = 2;
const NFPROTO_IPV6 = 10;
const IPSET_FLAG_LIST_SETNAME = 1 << 1;
const IPSET_FLAG_LIST_HEADER = 1 << 2;
const IPSET_FLAG_NOMATCH = 1 << 2;

/** Command-level attributes. */
const A = { PROTOCOL: 1, SETNAME: 2, TYPENAME: 3, FAMILY: 5, FLAGS: 6, DATA: 7, ADT: 8 } as const;
/** Attributes inside IPSET_ATTR_DATA: an element's, and a header's. */
const D = {
  IP: 1, PORT: 4, PORT_TO: 5, PROTO: 7, CADT_FLAGS: 8, IP2: 20, CIDR2: 21,
  INITVAL: 17, HASHSIZE: 18, MAXELEM: 19, BUCKETSIZE: 21, ELEMENTS: 24, REFERENCES: 25, MEMSIZE: 26,
} as const;
const IPADDR_IPV4 = 1;
const IPADDR_IPV6 = 2;
/** Header attributes that change neither what a set holds nor how it matches (ipset-save.ts IGNORED, counts). */
const HEADER_KEPT = new Set<number>(
  [D.INITVAL, D.HASHSIZE, D.MAXELEM, D.BUCKETSIZE, D.ELEMENTS, D.REFERENCES, D.MEMSIZE],
);
/** Member protocols as ipset prints them (getprotobynumber); what render.ts writes. */
const PROTO_NAMES = new Map([[6, 'tcp'], [17, 'udp'], [132, 'sctp']]);
/** An element's attributes for the types we write; any other (timeout, counters, comment, skbinfo) is an extension. */
const ELEMENT_ATTRS = new Set<number>([D.IP, D.PORT, D.PROTO, D.CADT_FLAGS, D.IP2, D.CIDR2]);

/**
 * A list request: one set's header and members (`name`); or, without a name, every set on the
 * host: its name alone (`names`), or its name and header (`headers`).
 */
export function encodeList(seq: number, port: number, what: { set: string } | 'names' | 'headers'): Buffer {
  const attrs = [nla(A.PROTOCOL, Buffer.from([PROTOCOL]))];
  if (typeof what === 'object') attrs.push(nla(A.SETNAME, cstring(what.set)));
  else {
    const flag = what === 'names' ? IPSET_FLAG_LIST_SETNAME : IPSET_FLAG_LIST_HEADER;
    attrs.push(nla(A.FLAGS | NLA_F_NET_BYTEORDER, be32(flag)));
  }
  return message(IPSET_LIST, NLM_F_REQUEST | NLM_F_DUMP, seq, port, Buffer.concat(attrs));
}

/** An ipset request: netlink header, nfgenmsg (AF_INET, version 0: the set's own family decides), attributes. */
function message(type: number, flags: number, seq: number, port: number, body: Buffer): Buffer {
  const b = Buffer.alloc(NLMSG_HDRLEN + NFGENMSG_LEN + body.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(port >>> 0, 12);
  b.writeUInt8(AF_INET, 16);
  body.copy(b, NLMSG_HDRLEN + NFGENMSG_LEN);
  return b;
}

const PROTO_NUMBERS = { tcp: 6, udp: 17, sctp: 132 } as const;

/**
 * An add or delete of one hash:ip,port element, acknowledged. Without NLM_F_EXCL the kernel takes
 * it as `ipset -exist` does: adding a member already there, or deleting one not there, is no error
 * (ip_set_core.c flag_exist). Throws IpsetError (invalid argument) on an address that is not one.
 */
export function encodeMember(
  type: typeof IPSET_ADD | typeof IPSET_DEL, seq: number, port: number, set: string, m: IpPortMember,
): Buffer {
  const raw = m.family === 'IPv4' ? parseIPv4(m.address) : parseIPv6(m.address);
  if (!raw || !Number.isInteger(m.port) || m.port < 0 || m.port > 65535 || !(m.protocol in PROTO_NUMBERS)) {
    const op = type === IPSET_ADD ? 'add-member' : 'del-member';
    throw IpsetError.invalidArgument(op, `not a member: ${JSON.stringify(m)}`);
  }
  const addr = nla((m.family === 'IPv4' ? IPADDR_IPV4 : IPADDR_IPV6) | NLA_F_NET_BYTEORDER, raw);
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(m.port);
  const data = Buffer.concat([
    nla(D.IP | NLA_F_NESTED, addr), nla(D.PORT | NLA_F_NET_BYTEORDER, portBytes),
    nla(D.PROTO, Buffer.from([PROTO_NUMBERS[m.protocol]])),
  ]);
  const body = Buffer.concat([
    nla(A.PROTOCOL, Buffer.from([PROTOCOL])), nla(A.SETNAME, cstring(set)), nla(A.DATA | NLA_F_NESTED, data),
  ]);
  return message(type, NLM_F_REQUEST | NLM_F_ACK, seq, port, body);
}

/** The set names a names-only list answered with, in the kernel's order. */
export function decodeNames(messages: readonly NlMessage[]): string[] {
  return messages.filter((m) => m.type === IPSET_LIST).map((m) => setName(topAttrs(m)));
}

/**
 * Members per set from a headers list (the header's IPSET_ATTR_ELEMENTS, the count `ipset list -t`
 * prints); a set whose header lacks it is left out.
 */
export function decodeCounts(messages: readonly NlMessage[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of messages) {
    if (m.type !== IPSET_LIST) continue;
    const a = topAttrs(m);
    const data = a.get(A.DATA);
    const n = data ? parseAttrs(data, IpsetError).get(D.ELEMENTS) : undefined;
    if (n?.length === 4) out.set(setName(a), n.readUInt32BE(0));
  }
  return out;
}

/** Adds what one set's list answered (its messages, in order) to `into`. Throws IpsetError on torn messages. */
export function decodeSet(messages: readonly NlMessage[], into: SavedSets): void {
  for (const m of messages) {
    if (m.type !== IPSET_LIST) continue;
    const a = topAttrs(m);
    const name = setName(a);
    let set = into.sets.get(name);
    if (!set) {
      const type = a.get(A.TYPENAME);
      if (!type) throw malformed(`set ${name}: members before its header`);
      set = header(name, text(type), a.get(A.FAMILY)?.[0] ?? 0, a.get(A.DATA));
      into.sets.set(name, set);
    }
    const adt = a.get(A.ADT);
    if (adt) for (const [, element] of attrList(adt, IpsetError)) addMember(set, element);
  }
}

function header(name: string, type: string, family: number, data: Buffer | undefined): SavedSet {
  const set: SavedSet = { name, type, options: [], members: new Set() };
  const bitmap = type === 'bitmap:port';
  if (!bitmap) set.family = family === NFPROTO_IPV6 ? 'inet6' : family === AF_INET ? 'inet' : `${family}`;
  let from: Buffer | undefined;
  let to: Buffer | undefined;
  for (const [t, v] of data ? attrList(data, IpsetError) : []) {
    if (t === D.MAXELEM && v.length === 4) set.maxelem = v.readUInt32BE(0);
    else if (bitmap && t === D.PORT) from = v;
    else if (bitmap && t === D.PORT_TO) to = v;
    else if (!HEADER_KEPT.has(t)) set.options.push(`attribute-${t}`);
  }
  if (from?.length === 2 && to?.length === 2) set.range = `${from.readUInt16BE(0)}-${to.readUInt16BE(0)}`;
  return set;
}

/** One element, as ipset prints it for our types; anything else marks the set odd. */
function addMember(set: SavedSet, element: Buffer): void {
  const e = new Map<number, Buffer>();
  for (const [t, v] of attrList(element, IpsetError)) {
    if (!ELEMENT_ATTRS.has(t)) { set.odd ??= `member with extensions (attribute ${t})`; return; }
    e.set(t, v);
  }
  const flags = e.get(D.CADT_FLAGS);
  if (flags?.length === 4 && flags.readUInt32BE(0) & IPSET_FLAG_NOMATCH) {
    set.odd ??= 'member with extensions (nomatch)';
    return;
  }
  const member = memberText(set.type, e);
  if (member === undefined) set.odd ??= `member not understood in a ${set.type} set`;
  else set.members.add(member);
}

function memberText(type: string, e: Map<number, Buffer>): string | undefined {
  const port = e.get(D.PORT);
  if (type === 'bitmap:port') return port?.length === 2 ? `${port.readUInt16BE(0)}` : undefined;
  const ip = address(e.get(D.IP));
  if (ip === undefined) return undefined;
  if (type === 'hash:ip') return ip;
  const proto = PROTO_NAMES.get(e.get(D.PROTO)?.[0] ?? -1);
  if (!proto || port?.length !== 2) return undefined;
  const ipPort = `${ip},${proto}:${port.readUInt16BE(0)}`;
  if (type === 'hash:ip,port') return ipPort;
  const ip2 = address(e.get(D.IP2));
  if (ip2 === undefined) return undefined;
  if (type === 'hash:ip,port,ip') return `${ipPort},${ip2}`;
  if (type !== 'hash:ip,port,net') return undefined;
  const cidr = e.get(D.CIDR2)?.[0];
  if (cidr === undefined) return undefined;
  return cidr === (ip2.includes(':') ? 128 : 32) ? `${ipPort},${ip2}` : `${ipPort},${ip2}/${cidr}`;
}

/** IPSET_ATTR_IP / IP2's nested address, as text; undefined when absent or not 4 / 16 bytes. */
function address(nested: Buffer | undefined): string | undefined {
  if (!nested) return undefined;
  const a = parseAttrs(nested, IpsetError);
  const v4 = a.get(IPADDR_IPV4);
  if (v4?.length === 4) return formatIPv4(v4);
  const v6 = a.get(IPADDR_IPV6);
  return v6?.length === 16 ? formatIPv6(v6) : undefined;
}

function topAttrs(m: NlMessage): Map<number, Buffer> {
  if (m.payload.length < NFGENMSG_LEN) throw malformed('message shorter than an nfgenmsg');
  return parseAttrs(m.payload.subarray(NFGENMSG_LEN), IpsetError);
}

function setName(a: Map<number, Buffer>): string {
  const name = a.get(A.SETNAME);
  if (!name) throw malformed('answer without a set name');
  return text(name);
}

const text = (b: Buffer) => b.toString('utf8').replace(/\0+$/, '');
const malformed = (message: string) => IpsetError.malformed('list-sets', message);

function be32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
}
