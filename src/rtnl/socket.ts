// A NETLINK_ROUTE socket for batches of acknowledged requests (address adds and deletes): many
// messages per datagram, each ACK matched to its request by sequence number — the approach of
// src/ipvs/socket.ts, for rtnetlink. Why not the `netlink` package's RtNetlinkSocket: it sends one
// datagram per request, so 10 000 VIPs cost 10 000 sendmsg() calls and 10 000 receive callbacks
// (about 155 s at 10 000 Services in the TCG lab VM, one at a time); rtnetlink_rcv() processes every
// message of one datagram in order inside sendmsg() and queues one NLMSG_ERROR per message.
// CHUNK messages per datagram and one chunk in flight keep the queued ACKs (about 1 KiB of
// SO_RCVBUF truesize each) well inside the receive buffer.
import { RawNetlinkSocket } from 'netlink';
import { NLMSG_DONE, NLMSG_ERROR, NLMSG_OVERRUN } from '../ipvs/constants.js';
import { type NlMessage, decodeErrno, decodeMessages } from '../netlink/framing.js';
import { RtnlError } from './errors.js';

const NETLINK_ROUTE = 0;
/** Messages per datagram (and in flight). */
export const CHUNK = 128;
const BUFFER_BYTES = 4 << 20;
const REPLY_TIMEOUT_MS = 30_000;

/** A request to send: its bytes, numbered with `seq` (from nextSeq) and asking for an ACK. */
export interface RouteRequest {
  seq: number;
  bytes: Buffer;
}

/** A route-netlink socket with pipelined, sequence-matched acknowledged requests. */
export class RouteSocket {
  private readonly raw: RawNetlinkSocket;
  private readonly pending = new Map<number, (errno: number) => void>();
  private seq = Math.floor(Math.random() * 0x7fffffff) + 1;
  private failure: RtnlError | undefined;
  private onFailure: ((err: RtnlError) => void) | undefined;
  private closed = false;
  /** The socket's netlink port id, read once at open. */
  readonly port: number;

  constructor() {
    this.raw = new RawNetlinkSocket(NETLINK_ROUTE, { recvBufferSize: BUFFER_BYTES, sendBufferSize: BUFFER_BYTES });
    this.raw.on('message', (buf) => this.receive(buf));
    this.raw.on('truncatedMessage', () => this.fail(RtnlError.malformed('receive', 'truncated netlink datagram')));
    this.raw.on('error', (err) => this.fail(RtnlError.fromPackageError('socket', err)));
    this.raw.unref();
    this.port = this.raw.address().port;
  }

  /** A fresh sequence number. */
  nextSeq(): number {
    this.seq = (this.seq % 0xfffffffe) + 1;
    return this.seq;
  }

  /**
   * Sends the requests CHUNK per datagram and resolves with each one's errno (0 = ACK), in order.
   * Rejects only when the socket itself fails (closed, ENOBUFS, no answer in 30 s).
   */
  async exchange(out: readonly RouteRequest[]): Promise<number[]> {
    const errnos: number[] = [];
    for (let i = 0; i < out.length; i += CHUNK) errnos.push(...(await this.exchangeChunk(out.slice(i, i + CHUNK))));
    return errnos;
  }

  private exchangeChunk(chunk: readonly RouteRequest[]): Promise<number[]> {
    if (this.closed) return Promise.reject(RtnlError.malformed('send', 'socket closed'));
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<number[]>((resolve, reject) => {
      const errnos: number[] = new Array(chunk.length);
      let left = chunk.length;
      const timer = setTimeout(() => this.fail(RtnlError.malformed('receive', `no reply in ${REPLY_TIMEOUT_MS} ms`)), REPLY_TIMEOUT_MS);
      const finish = (err?: RtnlError) => {
        clearTimeout(timer);
        this.onFailure = undefined;
        for (const o of chunk) this.pending.delete(o.seq);
        if (this.pending.size === 0) this.rawCall(() => this.raw.unref());
        if (err) reject(err); else resolve(errnos);
      };
      chunk.forEach((o, i) => this.pending.set(o.seq, (errno) => {
        errnos[i] = errno;
        if (--left === 0) finish();
      }));
      this.onFailure = finish;
      this.rawCall(() => {
        this.raw.ref();
        this.raw.send(Buffer.concat(chunk.map((o) => o.bytes)), { port: 0 }, (error) => {
          if (error) this.fail(RtnlError.fromPackageError('send', error));
        });
      });
    });
  }

  /** Calls into the raw socket; what it throws fails this socket with an RtnlError instead. */
  private rawCall(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (!this.failure) this.fail(RtnlError.fromPackageError('socket', e));
    }
  }

  private fail(err: RtnlError): void {
    this.failure ??= err;
    const cb = this.onFailure;
    this.onFailure = undefined;
    cb?.(err);
  }

  private receive(buf: Buffer): void {
    let msgs: NlMessage[];
    try {
      msgs = decodeMessages(buf, RtnlError);
      for (const m of msgs) {
        if (m.type === NLMSG_OVERRUN) throw RtnlError.malformed('receive', 'netlink overrun');
        const done = this.pending.get(m.seq);
        if (!done) continue; // a late reply to a request that already failed
        if (m.type === NLMSG_ERROR) {
          this.pending.delete(m.seq);
          done(decodeErrno(m, RtnlError));
        } else if (m.type === NLMSG_DONE) {
          this.pending.delete(m.seq);
          done(m.payload.length >= 4 ? -m.payload.readInt32LE(0) : 0);
        }
      }
    } catch (e) {
      this.fail(e instanceof RtnlError ? e : RtnlError.malformed('receive', String(e)));
    }
  }

  /** Closes the socket; a pending exchange rejects. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.fail(RtnlError.malformed('close', 'socket closed'));
    this.rawCall(() => this.raw.close());
  }
}
