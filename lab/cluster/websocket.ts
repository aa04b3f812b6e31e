// WebSocket framing (RFC 6455), pure: the handshake's accept key, frames encoded, and a decoder
// that turns a byte stream into whole messages and control frames. What the lab API server's
// `pods/exec` speaks to kubectl (exec.ts); no dependency beyond node:crypto's SHA-1.
//
//   0               1               2               3
//   0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//  +-+-+-+-+-------+-+-------------+-------------------------------+
//  |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//  |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//  |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//  | |1|2|3|       |K|             |                               |
//  +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//  |     Extended payload length continued, if payload len == 127  |
//  + - - - - - - - - - - - - - - - +-------------------------------+
//  |                               | Masking-key, if MASK set to 1 |
//  +-------------------------------+-------------------------------+
//  | Masking-key (continued)       |          Payload Data         |
//  +-------------------------------- - - - - - - - - - - - - - - - +
//
// A client masks every frame (section 5.1: a server closes on an unmasked one); a server never
// masks. Control frames (close, ping, pong) are at most 125 bytes, never fragmented, and may come
// between the fragments of a message. Not kept: extensions (no RSV bit may be set: nothing is
// negotiated), UTF-8 checking of text messages (the remote command protocols send binary only).
import { createHash } from 'node:crypto';

/** Frame opcodes. */
export const Opcode = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const;

/** Close codes this server sends (section 7.4.1). */
export const CloseCode = { normal: 1000, goingAway: 1001, protocolError: 1002, tooBig: 1009, internalError: 1011 } as const;

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** Sec-WebSocket-Accept for a client's Sec-WebSocket-Key. */
export function acceptKey(key: string): string {
  return createHash('sha1').update(key + GUID).digest('base64');
}

/** One frame: `mask` (4 bytes) masks the payload, as a client sends it; `fin` false: more fragments follow. */
export function encodeFrame(opcode: number, payload: Buffer = Buffer.alloc(0), o: { fin?: boolean; mask?: Buffer } = {}): Buffer {
  const len = payload.length;
  const ext = len < 126 ? 0 : len < 0x10000 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + (o.mask ? 4 : 0));
  head[0] = ((o.fin ?? true) ? 0x80 : 0) | (opcode & 0x0f);
  head[1] = (o.mask ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!o.mask) return Buffer.concat([head, payload]);
  o.mask.copy(head, 2 + ext, 0, 4);
  return Buffer.concat([head, unmask(payload, o.mask)]);
}

/** A close frame's payload: the code, then the reason (UTF-8; cut to fit the 125 bytes of a control frame). */
export function closePayload(code: number, reason = ''): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code, 0);
  return Buffer.concat([b, Buffer.from(reason, 'utf8')]).subarray(0, 125);
}

/** What the decoder hands out: a whole data message (fragments joined, unmasked) or a control frame. */
export type WsEvent =
  | { type: 'message'; binary: boolean; data: Buffer }
  | { type: 'ping' | 'pong'; data: Buffer }
  | { type: 'close'; code?: number; reason: string };

/** A broken stream: the peer is to get a close frame with `closeCode`, then the connection ends. */
export class WsProtocolError extends Error {
  constructor(readonly closeCode: number, message: string) {
    super(message);
  }
}

/**
 * Decodes frames from a byte stream in any cutting (push() as bytes arrive). `requireMask`: the
 * server's side (unmasked frames are an error); `maxMessage`: the largest message (a bigger one
 * is an error with code 1009, before its bytes are buffered). Throws WsProtocolError; after an
 * error the decoder is not to be used again.
 */
export class WsDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private fragmentBytes = 0;
  private fragmentBinary: boolean | undefined;

  constructor(private readonly o: { requireMask: boolean; maxMessage: number }) {}

  push(chunk: Buffer): WsEvent[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: WsEvent[] = [];
    for (;;) {
      const frame = this.nextFrame();
      if (!frame) return out;
      const ev = this.event(frame);
      if (ev) out.push(ev);
    }
  }

  /** The next whole frame at the front of the buffer (taken off it), or undefined when it is not all there yet. */
  private nextFrame(): { fin: boolean; opcode: number; payload: Buffer } | undefined {
    const b = this.buf;
    if (b.length < 2) return undefined;
    const fin = (b[0]! & 0x80) !== 0;
    if ((b[0]! & 0x70) !== 0) throw new WsProtocolError(CloseCode.protocolError, 'RSV bits set without a negotiated extension');
    const opcode = b[0]! & 0x0f;
    const masked = (b[1]! & 0x80) !== 0;
    if (this.o.requireMask && !masked) throw new WsProtocolError(CloseCode.protocolError, 'a client frame is not masked');
    let len = b[1]! & 0x7f;
    let at = 2;
    if (len === 126) {
      if (b.length < 4) return undefined;
      len = b.readUInt16BE(2);
      at = 4;
    } else if (len === 127) {
      if (b.length < 10) return undefined;
      const big = b.readBigUInt64BE(2);
      if (big >> 63n) throw new WsProtocolError(CloseCode.protocolError, 'the payload length has its most significant bit set');
      // Checked before the bytes are awaited: a huge length never makes the decoder buffer them.
      if (big > BigInt(this.o.maxMessage)) throw new WsProtocolError(CloseCode.tooBig, `a frame of ${big} bytes is larger than ${this.o.maxMessage}`);
      len = Number(big);
      at = 10;
    }
    const control = opcode >= 0x8;
    if (control && (!fin || len > 125)) throw new WsProtocolError(CloseCode.protocolError, 'a control frame is fragmented or longer than 125 bytes');
    if (!control && this.fragmentBytes + len > this.o.maxMessage) {
      throw new WsProtocolError(CloseCode.tooBig, `a message of more than ${this.o.maxMessage} bytes`);
    }
    const maskAt = at;
    if (masked) at += 4;
    if (b.length < at + len) return undefined;
    let payload = b.subarray(at, at + len);
    if (masked) payload = unmask(payload, b.subarray(maskAt, maskAt + 4));
    else payload = Buffer.from(payload); // a copy: the buffer it came from is kept no longer
    this.buf = b.subarray(at + len);
    return { fin, opcode, payload };
  }

  private event(f: { fin: boolean; opcode: number; payload: Buffer }): WsEvent | undefined {
    switch (f.opcode) {
      case Opcode.ping: return { type: 'ping', data: f.payload };
      case Opcode.pong: return { type: 'pong', data: f.payload };
      case Opcode.close: {
        if (f.payload.length === 1) throw new WsProtocolError(CloseCode.protocolError, 'a close frame with a one-byte payload');
        return f.payload.length ? { type: 'close', code: f.payload.readUInt16BE(0), reason: f.payload.subarray(2).toString('utf8') } : { type: 'close', reason: '' };
      }
      case Opcode.text:
      case Opcode.binary:
        if (this.fragmentBinary !== undefined) throw new WsProtocolError(CloseCode.protocolError, 'a new message began before the last one ended');
        if (f.fin) return { type: 'message', binary: f.opcode === Opcode.binary, data: f.payload };
        this.fragmentBinary = f.opcode === Opcode.binary;
        this.fragments = [f.payload];
        this.fragmentBytes = f.payload.length;
        return undefined;
      case Opcode.continuation: {
        if (this.fragmentBinary === undefined) throw new WsProtocolError(CloseCode.protocolError, 'a continuation frame without a message to continue');
        this.fragments.push(f.payload);
        this.fragmentBytes += f.payload.length;
        if (!f.fin) return undefined;
        const ev: WsEvent = { type: 'message', binary: this.fragmentBinary, data: Buffer.concat(this.fragments) };
        this.fragments = [];
        this.fragmentBytes = 0;
        this.fragmentBinary = undefined;
        return ev;
      }
      default: throw new WsProtocolError(CloseCode.protocolError, `unknown opcode ${f.opcode}`);
    }
  }
}

/** XOR with the 4-byte mask (masking and unmasking are the same); a new buffer. */
function unmask(data: Buffer, mask: Buffer): Buffer {
  const out = Buffer.allocUnsafe(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i]! ^ mask[i & 3]!;
  return out;
}
