// src/netlink/framing.ts on its own: what every netlink family shares. Its decoders throw a plain
// NetlinkError unless the caller names its family's kind (IpvsError, RtnlError).
import { describe, expect, it } from '@jest/globals';
import {
  NlaWriter, align4, be16, cstring, decodeErrno, decodeFamily, decodeMessages, encodeGenlMessage, genlAttrs, nla, nlaNested,
  nlaSize, parseAttrs, u16, u32, u8,
} from '../../../src/netlink/framing.js';
import { Errno, NetlinkError, isExists, isNotFound } from '../../../src/netlink/errors.js';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { RtnlError } from '../../../src/rtnl/errors.js';

/** Each decoder with an input it must refuse as malformed. */
const refusals: Array<[string, (E?: typeof NetlinkError) => unknown]> = [
  ['decodeMessages: length beyond the buffer', (E) => decodeMessages(Buffer.from([40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), E)],
  ['decodeMessages: torn trailing bytes', (E) => decodeMessages(Buffer.concat([encodeGenlMessage(0x20, 1, 1, 0, 1, 0, []), Buffer.alloc(5)]), E)],
  ['parseAttrs: attribute longer than its buffer', (E) => parseAttrs(Buffer.from([12, 0, 1, 0, 0, 0, 0, 0]), E)],
  ['parseAttrs: attribute length below its header', (E) => parseAttrs(Buffer.from([2, 0, 1, 0]), E)],
  ['genlAttrs: no genl header', (E) => genlAttrs({ type: 0x20, flags: 0, seq: 0, port: 0, payload: Buffer.alloc(2) }, E)],
  ['decodeErrno: neither NLMSG_ERROR nor NLMSG_DONE', (E) => decodeErrno({ type: 0x20, flags: 0, seq: 0, port: 0, payload: Buffer.alloc(4) }, E)],
  ['decodeFamily: no family id', (E) => decodeFamily(decodeMessages(encodeGenlMessage(0x10, 1, 1, 0, 1, 0, [nla(2, Buffer.from('IPVS\0'))]))[0]!, E)],
];

describe('framing decoders refuse garbage with the caller\'s error kind', () => {
  it.each(refusals)('%s: a plain NetlinkError by default, malformed', (_n, decode) => {
    let err: unknown;
    try { decode(); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(NetlinkError);
    expect(err).not.toBeInstanceOf(IpvsError);
    expect(err).not.toBeInstanceOf(RtnlError);
    expect((err as NetlinkError).code).toBe('EMALFORMED');
  });

  it.each(refusals)('%s: the kind passed (IpvsError, RtnlError)', (_n, decode) => {
    expect(() => decode(IpvsError)).toThrow(IpvsError);
    let err: unknown;
    try { decode(RtnlError); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(RtnlError);
    expect(err).not.toBeInstanceOf(IpvsError);
  });
});

describe('framing round trips', () => {
  it('a generic netlink message with nested attributes splits back into its parts, 4-byte aligned', () => {
    const attrs = [nla(1, u16(0x22)), nlaNested(2, [nla(1, u32(7)), nla(2, Buffer.from('rr\0'))])];
    const buf = Buffer.concat([encodeGenlMessage(0x22, 3, 1, 0x5, 9, 1234, attrs), encodeGenlMessage(0x22, 4, 1, 0x5, 10, 1234, [])]);
    const [m1, m2] = decodeMessages(buf);
    expect(m1).toMatchObject({ type: 0x22, flags: 0x5, seq: 9, port: 1234 });
    expect(m2).toMatchObject({ seq: 10 });
    expect(m1!.payload[0]).toBe(3); // genl cmd
    const a = parseAttrs(genlAttrs(m1!));
    expect(a.get(1)!.readUInt16LE(0)).toBe(0x22);
    const inner = parseAttrs(a.get(2)!);
    expect(inner.get(1)!.readUInt32LE(0)).toBe(7);
    expect(inner.get(2)!.toString()).toBe('rr\0');
    expect(buf.length % 4).toBe(0);
    expect([0, 1, 4, 5, 8].map(align4)).toEqual([0, 4, 4, 8, 8]);
  });

  it('NLMSG_ERROR: errno from -errno; the predicates work on every kind', () => {
    const b = Buffer.alloc(36);
    b.writeUInt32LE(36, 0); b.writeUInt16LE(2, 4); b.writeInt32LE(-Errno.EEXIST, 16);
    expect(decodeErrno(decodeMessages(b)[0]!)).toBe(Errno.EEXIST);
    const msg = (type: number, payload: Buffer) => ({ type, flags: 0, seq: 0, port: 0, payload });
    expect(Object.is(decodeErrno(msg(2, Buffer.alloc(20))), 0)).toBe(true); // an ACK is 0, not -0
    expect(Object.is(decodeErrno(msg(3, Buffer.alloc(4))), 0)).toBe(true); // a dump's DONE: 0
    expect(decodeErrno(msg(3, Buffer.alloc(0)))).toBe(0); // a DONE without its int32
    const dumpErr = Buffer.alloc(4); dumpErr.writeInt32LE(-Errno.ENOBUFS, 0);
    expect(decodeErrno(msg(3, dumpErr))).toBe(Errno.ENOBUFS);
    expect(() => decodeErrno(msg(2, Buffer.alloc(2)))).toThrow(/shorter than its error code/);
    expect(isExists(RtnlError.fromErrno('add-address', Errno.EEXIST))).toBe(true);
    expect(isNotFound(IpvsError.fromErrno('delete-service', -Errno.ESRCH))).toBe(true);
    expect(isNotFound(NetlinkError.fromErrno('x', Errno.ENODEV))).toBe(false);
  });
});

describe('NlaWriter', () => {
  it('writes the bytes nla/nlaNested build, padding zeroed, into one buffer', () => {
    // Pool memory is reused: dirty it first, so unzeroed padding would show.
    Buffer.allocUnsafe(256).fill(0xaa);
    const addr = Uint8Array.from([10, 1, 2, 3]);
    const w = new NlaWriter(4 + nlaSize(1) + nlaSize(2) + nlaSize(2) + nlaSize(4) + nlaSize(16) + nlaSize(3));
    const at = w.nest(7);
    w.u8(1, 0x1ff);
    w.u16(2, 0x1234);
    w.be16(3, 8080);
    w.u32(4, -1);
    w.bytes(5, addr, 16);
    w.cstring(6, 'rr');
    w.end(at);
    const padded = Buffer.alloc(16);
    padded.set(addr);
    expect(w.done()).toEqual(nlaNested(7, [nla(1, u8(0xff)), nla(2, u16(0x1234)), nla(3, be16(8080)), nla(4, u32(0xffffffff)), nla(5, padded), nla(6, cstring('rr'))]));
  });

  it('done() refuses a buffer sized other than what was written', () => {
    const w = new NlaWriter(nlaSize(4) + 4);
    w.u32(1, 1);
    expect(() => w.done()).toThrow('wrote 8 bytes of 12');
  });
});
