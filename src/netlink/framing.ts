// Netlink framing, pure: nlmsghdr encode/decode, attributes (nla) encode/parse, the generic
// netlink header, and the genl controller's GETFAMILY request/reply. Shared by IPVS (genl) and
// rtnetlink. Decoders throw the NetlinkError subclass they are given (default NetlinkError), so
// an IPVS decode path still throws IpvsError.
import {
  CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME, CTRL_ATTR_VERSION, CTRL_CMD_GETFAMILY, GENL_HDRLEN, GENL_ID_CTRL,
  NLA_HDRLEN, NLA_TYPE_MASK, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN, NLM_F_ACK, NLM_F_REQUEST,
} from './constants.js';
import { NetlinkError, type NetlinkErrorClass } from './errors.js';

/** A netlink message: header fields and the payload after the 16-byte nlmsghdr. */
export interface NlMessage {
  type: number;
  flags: number;
  seq: number;
  port: number;
  payload: Buffer;
}

// ---------------------------------------------------------------- attributes

/** Rounds up to the 4-byte netlink alignment. */
export function align4(n: number): number {
  return (n + 3) & ~3;
}

/** One attribute: header, payload, padding. */
export function nla(type: number, payload: Uint8Array): Buffer {
  const len = NLA_HDRLEN + payload.length;
  const b = Buffer.alloc(align4(len));
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  b.set(payload, NLA_HDRLEN);
  return b;
}

/** A nested attribute. Sent without NLA_F_NESTED, as ipvsadm (libnl) does; IPVS accepts both. */
export function nlaNested(type: number, children: Buffer[]): Buffer {
  return nla(type, Buffer.concat(children));
}

/** The bytes an attribute with a `payload`-byte payload takes, padding included. */
export function nlaSize(payload: number): number {
  return align4(NLA_HDRLEN + payload);
}

/**
 * Writes attributes into one buffer sized in advance (with nlaSize): no allocation per attribute.
 * Encoding a plan of 100 000 ops with a Buffer per attribute and per payload cost about as much as
 * the kernel's own work for it. Padding and unwritten payload bytes are zero.
 */
export class NlaWriter {
  readonly buf: Buffer;
  private off: number;
  private readonly start: number;
  private readonly limit: number;

  /**
   * A writer of `size` bytes: into a buffer of its own, or into `into` from `at` (a datagram
   * holding many messages: no buffer per message), zeroed first there too unless `zeroed` says the
   * caller did (a datagram zeroed once for all its messages).
   */
  constructor(size: number, into?: Buffer, at = 0, zeroed = false) {
    // allocUnsafe takes small buffers from Node's pool; alloc would make a new ArrayBuffer for each.
    this.buf = into ?? Buffer.allocUnsafe(size);
    if (!zeroed || !into) this.buf.fill(0, at, at + size);
    this.start = at;
    this.off = at;
    this.limit = at + size;
  }

  /** Writes the netlink and generic netlink headers of a `len`-byte message (the first 20 bytes). */
  headers(
    len: number, type: number, flags: number, seq: number, port: number, cmd: number, version: number,
  ): void {
    const b = this.buf;
    const at = this.off;
    b.writeUInt32LE(len, at);
    b.writeUInt16LE(type, at + 4);
    b.writeUInt16LE(flags, at + 6);
    b.writeUInt32LE(seq >>> 0, at + 8);
    b.writeUInt32LE(port >>> 0, at + 12);
    b[at + 16] = cmd;
    b[at + 17] = version;
    this.off = at + NLMSG_HDRLEN + GENL_HDRLEN;
  }

  /** Writes an attribute header for a `len`-byte payload; returns the payload's offset. */
  private head(type: number, len: number): number {
    const at = this.off;
    this.buf.writeUInt16LE(NLA_HDRLEN + len, at);
    this.buf.writeUInt16LE(type, at + 2);
    this.off = at + align4(NLA_HDRLEN + len);
    return at + NLA_HDRLEN;
  }

  u8(type: number, v: number): void {
    this.buf[this.head(type, 1)] = v & 0xff;
  }
  u16(type: number, v: number): void {
    this.buf.writeUInt16LE(v & 0xffff, this.head(type, 2));
  }
  be16(type: number, v: number): void {
    this.buf.writeUInt16BE(v & 0xffff, this.head(type, 2));
  }
  u32(type: number, v: number): void {
    this.buf.writeUInt32LE(v >>> 0, this.head(type, 4));
  }
  be32(type: number, v: number): void {
    this.buf.writeUInt32BE(v >>> 0, this.head(type, 4));
  }
  /** A 16-byte address payload (union nf_inet_addr), the IPv4 address `v` in its first 4 bytes. */
  addr4(type: number, v: number): void {
    this.buf.writeUInt32BE(v >>> 0, this.head(type, 16));
  }
  /** Two u32 (host order) in one 8-byte payload: a struct such as IPVS's {flags, mask}. */
  u32pair(type: number, a: number, b: number): void {
    const at = this.head(type, 8);
    this.buf.writeUInt32LE(a >>> 0, at);
    this.buf.writeUInt32LE(b >>> 0, at + 4);
  }
  /** A payload of `len` bytes (default: all of `b`), starting with `b` and zero after it. */
  bytes(type: number, b: Uint8Array, len = b.length): void {
    this.buf.set(b, this.head(type, len));
  }
  /** A NUL-terminated UTF-8 string (size it with Buffer.byteLength + 1). */
  cstring(type: number, s: string, byteLength = Buffer.byteLength(s)): void {
    this.buf.write(s, this.head(type, byteLength + 1), 'utf8');
  }
  /** Opens a nested attribute (sent without NLA_F_NESTED, as nlaNested); close it with end(). */
  nest(type: number): number {
    const at = this.off;
    this.buf.writeUInt16LE(type, at + 2);
    this.off += NLA_HDRLEN;
    return at;
  }
  /** Closes the nested attribute opened at `at`. */
  end(at: number): void {
    this.buf.writeUInt16LE(this.off - at, at);
  }
  /** The buffer; throws when what was written does not fill its size (a sizing bug, never input). */
  done(): Buffer {
    const [wrote, size] = [this.off - this.start, this.limit - this.start];
    if (wrote !== size) throw new Error(`NlaWriter: wrote ${wrote} bytes of ${size}`);
    return this.buf;
  }
}

/** A u8 attribute payload. */
export function u8(v: number): Buffer {
  return Buffer.from([v & 0xff]);
}
/** A u16 (host order) attribute payload. */
export function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
}
/** A be16 (network order) attribute payload. */
export function be16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
}
/** A u32 (host order) attribute payload. */
export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return b;
}
/** A NUL-terminated string attribute payload. */
export function cstring(s: string): Buffer {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
}

// ---------------------------------------------------------------- messages

/** The controller request that resolves a family name to its id. */
export function encodeGetFamily(name: string, seq: number, port: number): Buffer {
  return encodeGenlMessage(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, NLM_F_REQUEST | NLM_F_ACK, seq, port,
    [nla(CTRL_ATTR_FAMILY_NAME, cstring(name))]);
}

/** nlmsghdr + genlmsghdr + attributes. */
export function encodeGenlMessage(
  type: number, cmd: number, version: number, flags: number, seq: number, port: number, attrs: Buffer[],
): Buffer {
  let len = NLMSG_HDRLEN + GENL_HDRLEN;
  for (const a of attrs) len += a.length;
  // Every byte is written below: the pool's unzeroed memory never shows.
  const b = Buffer.allocUnsafe(len);
  b.writeUInt32LE(len, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(seq >>> 0, 8);
  b.writeUInt32LE(port >>> 0, 12);
  b.writeUInt8(cmd, 16);
  b.writeUInt8(version, 17);
  b.writeUInt16LE(0, 18);
  let off = NLMSG_HDRLEN + GENL_HDRLEN;
  for (const a of attrs) off += a.copy(b, off);
  return b;
}

/** Splits a datagram into netlink messages. Throws E (default NetlinkError) on a bad length. */
export function decodeMessages(buf: Buffer, E: NetlinkErrorClass<NetlinkError> = NetlinkError): NlMessage[] {
  const out: NlMessage[] = [];
  let off = 0;
  while (off + NLMSG_HDRLEN <= buf.length) {
    const len = buf.readUInt32LE(off);
    if (len < NLMSG_HDRLEN || off + len > buf.length) {
      throw NetlinkError.malformed.call(E, 'decode', `netlink message length ${len} at offset ${off} of ${buf.length}`);
    }
    out.push({
      type: buf.readUInt16LE(off + 4),
      flags: buf.readUInt16LE(off + 6),
      seq: buf.readUInt32LE(off + 8),
      port: buf.readUInt32LE(off + 12),
      payload: buf.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += align4(len);
  }
  // The last message may lack its padding; anything else left over is a torn message.
  if (off < buf.length) {
    throw NetlinkError.malformed.call(E, 'decode', `${buf.length - off} trailing bytes after ${out.length} messages`);
  }
  return out;
}

/** The errno that ends a request, positive: NLMSG_ERROR's (0 = ACK) or a dump's NLMSG_DONE's (0 if it has none). */
export function decodeErrno(msg: NlMessage, E: NetlinkErrorClass<NetlinkError> = NetlinkError): number {
  if (msg.type === NLMSG_DONE && msg.payload.length < 4) return 0;
  if (msg.type !== NLMSG_ERROR && msg.type !== NLMSG_DONE) {
    throw NetlinkError.malformed.call(E, 'decode', `message type ${msg.type} is not NLMSG_ERROR or NLMSG_DONE`);
  }
  if (msg.payload.length < 4) throw NetlinkError.malformed.call(E, 'decode', 'NLMSG_ERROR shorter than its error code');
  return -msg.payload.readInt32LE(0) || 0; // an ACK is 0, not -0
}

/** The attributes of a generic netlink message (after its 4-byte genl header). */
export function genlAttrs(msg: NlMessage, E: NetlinkErrorClass<NetlinkError> = NetlinkError): Buffer {
  if (msg.payload.length < GENL_HDRLEN) {
    throw NetlinkError.malformed.call(E, 'decode', 'message shorter than a genl header');
  }
  return msg.payload.subarray(GENL_HDRLEN);
}

/** Attributes by type (NLA_F_NESTED / NET_BYTEORDER bits cleared). Throws E (default NetlinkError) on bad lengths. */
export function parseAttrs(buf: Buffer, E: NetlinkErrorClass<NetlinkError> = NetlinkError): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  let off = 0;
  while (off + NLA_HDRLEN <= buf.length) {
    const len = buf.readUInt16LE(off);
    const type = buf.readUInt16LE(off + 2) & NLA_TYPE_MASK;
    if (len < NLA_HDRLEN || off + len > buf.length) {
      throw NetlinkError.malformed.call(E, 'decode',
        `attribute ${type} length ${len} at offset ${off} of ${buf.length}`);
    }
    out.set(type, buf.subarray(off + NLA_HDRLEN, off + len));
    off += align4(len);
  }
  return out;
}

/**
 * Attributes in order with repeats kept (parseAttrs keeps the last of a type): a container holding
 * one nested attribute per item, as ipset's IPSET_ATTR_ADT. Types have the flag bits cleared.
 */
export function attrList(buf: Buffer, E: NetlinkErrorClass<NetlinkError> = NetlinkError): Array<[number, Buffer]> {
  const out: Array<[number, Buffer]> = [];
  let off = 0;
  while (off + NLA_HDRLEN <= buf.length) {
    const len = buf.readUInt16LE(off);
    if (len < NLA_HDRLEN || off + len > buf.length) {
      throw NetlinkError.malformed.call(E, 'decode', `attribute length ${len} at offset ${off} of ${buf.length}`);
    }
    out.push([buf.readUInt16LE(off + 2) & NLA_TYPE_MASK, buf.subarray(off + NLA_HDRLEN, off + len)]);
    off += align4(len);
  }
  return out;
}

/** CTRL_CMD_NEWFAMILY reply: the family id and version. */
export function decodeFamily(
  msg: NlMessage, E: NetlinkErrorClass<NetlinkError> = NetlinkError,
): { id: number; version: number } {
  const a = parseAttrs(genlAttrs(msg, E), E);
  const id = a.get(CTRL_ATTR_FAMILY_ID);
  if (!id) throw NetlinkError.malformed.call(E, 'decode', `family: attribute ${CTRL_ATTR_FAMILY_ID} missing`);
  if (id.length < 2) {
    throw NetlinkError.malformed.call(E, 'decode',
      `family: attribute ${CTRL_ATTR_FAMILY_ID} has ${id.length} bytes, needs 2`);
  }
  const v = a.get(CTRL_ATTR_VERSION);
  if (v && v.length < 4) {
    throw NetlinkError.malformed.call(E, 'decode',
      `family: attribute ${CTRL_ATTR_VERSION} has ${v.length} bytes, needs 4`);
  }
  return { id: id.readUInt16LE(0), version: v ? v.readUInt32LE(0) : 0 };
}
