// The one pipelined netlink socket, for every family the project speaks (IPVS over generic
// netlink: src/ipvs/socket.ts; addresses over rtnetlink: src/rtnl/socket.ts). It sends pre-encoded
// messages, many per datagram, and matches replies to requests by sequence number; what the
// messages say is the family's business. Errors are of the kind the family names (IpvsError,
// RtnlError). Why not the `netlink` package's request(), and why only the last message of a chunk
// asks for an ACK: docs/ipvs-client.md ("The pipelined socket").
import { RawNetlinkSocket } from 'netlink';
import { NLMSG_DONE, NLMSG_ERROR, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP_INTR } from './constants.js';
import { type NlMessage, decodeErrno, decodeMessages } from './framing.js';
import { NetlinkError, type NetlinkErrorClass } from './errors.js';

/** Messages per datagram (and in flight): their ACKs fit SO_RCVBUF with room to spare. */
export const CHUNK = 128;
const BUFFER_BYTES = 4 << 20;
const REPLY_TIMEOUT_MS = 30_000;
const WATCH_MS = 2_000;

/**
 * The receive buffer of sockets that read long dumps. The kernel sizes a dump's datagrams by the
 * largest buffer recvmsg() was given on the socket (af_netlink.c: netlink_recvmsg records
 * max_recvmsg_len, capped at 32 KiB less the skb overhead; netlink_dump allocates that, at least
 * NLMSG_GOODSIZE). The `netlink` package by default peeks at each datagram with a 1-byte buffer and
 * then reads exactly its size, so dumps stay at NLMSG_GOODSIZE: 3.5 KB datagrams (measured). For
 * IPVS that is quadratic: ip_vs_genl_dump_services walks the service table from its start again
 * for every datagram, skipping the services already sent. At 36 000 virtual servers, 3 274
 * datagrams of 3.5 KB took 51-61 s of kernel time in the loaded lab VM, 358 of 32 KB 4-7 s
 * (docs/performance.md, "Reading the table"). Every IPVS reply fits: a datagram is one skb.
 */
export const DUMP_RECEIVE_BYTES = 32 << 10;

/** The answer to one request: the data messages, and the errno of its ACK or DONE (0 = ok). */
export interface Reply {
  errno: number;
  messages: NlMessage[];
  /** Set when a dump was interrupted by a concurrent change (NLM_F_DUMP_INTR): retry it. */
  interrupted: boolean;
}

interface Pending {
  dump: boolean;
  reply: Reply;
  done: (r: Reply) => void;
}

/**
 * The request bookkeeping: the last sequence number handed out, the requests awaiting replies by
 * it, and how many watchdog ticks passed with requests waiting since the last datagram or send (a
 * long dump is not a silent kernel). A counter, not a clock: the lab VM's clock source is the
 * HPET, where each read of the clock is a system call.
 */
interface Requests {
  seq: number;
  readonly pending: Map<number, Pending>;
  quietTicks: number;
  /** The watchdog interval (see watch()), started with the first exchange. */
  watchdog?: NodeJS.Timeout;
}

/** A message to send: its bytes, numbered with `seq`, and whether it is a dump. */
export interface OutgoingBytes {
  seq: number;
  bytes: Buffer;
  dump: boolean;
}

/**
 * A message to send that writes itself into the datagram (`size` bytes at `at`, which the datagram
 * holds zeroed): a plan's op (ipvs/requests.ts opMessage), with no buffer of its own.
 */
export interface OutgoingWriter {
  seq: number;
  size: number;
  write(buf: Buffer, at: number): void;
  dump: boolean;
}

/** A message to send, numbered with `seq`. */
export type Outgoing = OutgoingBytes | OutgoingWriter;

function sizeOf(o: Outgoing): number {
  return 'bytes' in o ? o.bytes.length : o.size;
}

/**
 * One datagram holding `chunk`'s messages in order; throws what a writer throws. It is zeroed once
 * for all its writers: a fill per message was 4% of a first sync's time in the lab VM.
 */
function datagramOf(chunk: readonly Outgoing[]): Buffer {
  const only = chunk.length === 1 ? chunk[0]! : undefined;
  if (only && 'bytes' in only) return only.bytes; // a dump request: sent as it is, no copy
  let len = 0;
  for (const o of chunk) len += sizeOf(o);
  const datagram = Buffer.alloc(len);
  let at = 0;
  for (const o of chunk) {
    if ('bytes' in o) o.bytes.copy(datagram, at);
    else o.write(datagram, at);
    at += sizeOf(o);
  }
  return datagram;
}

/**
 * Sees every datagram with no dump in it (a dump is a read) a NetlinkSocket sends, as sent: its
 * messages back to back, each told by its own header. The bench's recording of a sync
 * (bench/replay.ts). The datagram is the socket's: copy what is kept.
 */
export type SendRecorder = (protocol: number, datagram: Buffer) => void;

/** A netlink socket with pipelined, sequence-matched request/reply. */
export class NetlinkSocket {
  /**
   * When set, called with each chunk before it is sent, on every socket of the process. Only the
   * bench sets it (to replay the operator's exact messages as a kernel floor); unset, the send
   * path pays one property read per chunk.
   */
  static recorder: SendRecorder | undefined;

  private readonly raw: RawNetlinkSocket;
  private readonly requests: Requests =
    { seq: Math.floor(Math.random() * 0x7fffffff) + 1, pending: new Map(), quietTicks: 0 };
  private failure: NetlinkError | undefined;
  private readonly onFailure = new Set<(err: NetlinkError) => void>();
  private closed = false;

  /**
   * `protocol`: NETLINK_GENERIC (16), NETLINK_ROUTE (0), ...; `E`: the kind of error it fails with;
   * `receiveBytes`: read every datagram into a buffer of this size instead of peeking at its size
   * first (see DUMP_RECEIVE_BYTES); a larger datagram fails the socket (truncated).
   */
  constructor(
    private readonly protocol: number, private readonly E: NetlinkErrorClass<NetlinkError>, receiveBytes?: number,
  ) {
    this.raw = new RawNetlinkSocket(protocol, {
      recvBufferSize: BUFFER_BYTES, sendBufferSize: BUFFER_BYTES,
      ...(receiveBytes ? { messagePeeking: false, msgBufferSize: receiveBytes } : {}),
    });
    this.raw.on('message', (buf) => this.receive(buf));
    this.raw.on('truncatedMessage', () => this.fail(this.malformed('receive', 'truncated netlink datagram')));
    this.raw.on('error', (err) => this.fail(this.fromPackage('socket', err)));
    this.raw.unref();
    this.port = this.raw.address().port;
  }

  /** Why the socket failed (it is then never used again), or undefined while it works. */
  get failed(): NetlinkError | undefined {
    return this.failure;
  }

  /** The socket's netlink port id (what the kernel addresses replies to), read once at open. */
  readonly port: number;

  /** A fresh sequence number. */
  nextSeq(): number {
    this.requests.seq = (this.requests.seq % 0xfffffffe) + 1;
    return this.requests.seq;
  }

  /**
   * Sends the messages in chunks of CHUNK per datagram and resolves with one Reply per message,
   * in order. Rejects only when the socket itself fails (ENOBUFS, close, no answer in 30 s). The
   * messages must ask for an ACK (NLM_F_ACK); the socket clears it where a later one answers for
   * them (see the file comment).
   */
  async exchange(out: readonly Outgoing[]): Promise<Reply[]> {
    const replies: Reply[] = [];
    for (let i = 0; i < out.length; i += CHUNK) {
      replies.push(...(await this.exchangeChunk(out.slice(i, i + CHUNK))));
    }
    return replies;
  }

  private exchangeChunk(chunk: readonly Outgoing[]): Promise<Reply[]> {
    if (this.closed) return Promise.reject(this.malformed('send', 'socket closed'));
    if (this.failure) return Promise.reject(this.failure);
    let datagram: Buffer;
    try {
      datagram = datagramOf(chunk);
    } catch (e) {
      return Promise.reject(e); // a message that cannot be written: nothing was sent
    }
    return new Promise<Reply[]>((resolve, reject) => {
      const replies: Reply[] = chunk.map(() => ({ errno: 0, messages: [], interrupted: false }));
      const lastIndex = chunk.length - 1;
      // What the chunk waits for: the last message's ACK, and every dump's DONE (a dump in the middle
      // of a datagram may end after the messages behind it). Others answer only when they fail.
      let left = 0;
      this.requests.quietTicks = 0;
      this.requests.watchdog ??= setInterval(() => this.watch(), WATCH_MS).unref();
      const finish = (err?: NetlinkError) => {
        this.onFailure.delete(finish);
        for (const o of chunk) this.requests.pending.delete(o.seq);
        if (this.requests.pending.size === 0) this.rawCall(() => this.raw.unref());
        if (err) reject(err); else resolve(replies);
      };
      const awaited = () => {
        if (--left === 0) finish();
      };
      const silent = () => undefined;
      chunk.forEach((o, i) => {
        const waits = o.dump || i === lastIndex;
        if (waits) left++;
        this.requests.pending.set(o.seq, { dump: o.dump, reply: replies[i]!, done: waits ? awaited : silent });
      });
      let off = 0;
      chunk.forEach((o, i) => {
        if (!o.dump && i < lastIndex) datagram.writeUInt16LE(datagram.readUInt16LE(off + 6) & ~NLM_F_ACK, off + 6);
        off += sizeOf(o);
      });
      this.onFailure.add(finish);
      const recorder = NetlinkSocket.recorder;
      if (recorder && !chunk.some((o) => o.dump)) recorder(this.protocol, datagram);
      // A descriptor closed under us makes the package throw synchronously: a socket failure too.
      this.rawCall(() => {
        this.raw.ref();
        this.raw.send(datagram, { port: 0 }, (error) => {
          if (error) this.fail(this.fromPackage('send', error));
        });
      });
    });
  }

  /**
   * Fails the socket when requests wait and nothing arrived for REPLY_TIMEOUT_MS (a long dump that
   * still sends is alive). One unreferenced interval per socket, not a timer per exchange: a
   * table read makes 36 000 exchanges, and their timers cost 6% of it (docs/performance.md).
   */
  private watch(): void {
    if (!this.requests.pending.size) this.requests.quietTicks = 0;
    else if (++this.requests.quietTicks * WATCH_MS >= REPLY_TIMEOUT_MS) {
      this.fail(this.malformed('receive', `no reply in ${REPLY_TIMEOUT_MS} ms`));
    }
  }

  /** Calls into the raw socket; what it throws fails this socket with an NetlinkError instead. */
  private rawCall(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (!this.failure) this.fail(this.fromPackage('socket', e));
    }
  }

  private fail(err: NetlinkError): void {
    this.failure = err;
    const waiting = [...this.onFailure];
    this.onFailure.clear();
    for (const finish of waiting) finish(err);
  }

  private receive(buf: Buffer): void {
    this.requests.quietTicks = 0;
    let msgs: NlMessage[];
    try {
      msgs = decodeMessages(buf, this.E);
    } catch (e) {
      this.fail(e as NetlinkError);
      return;
    }
    try {
      for (const m of msgs) this.dispatch(m);
    } catch (e) {
      this.fail(e instanceof NetlinkError ? e : this.malformed('receive', String(e)));
    }
  }

  private dispatch(m: NlMessage): void {
    const p = this.requests.pending.get(m.seq);
    if (!p) return; // a late reply to a request that already failed, or someone else's
    if (m.flags & NLM_F_DUMP_INTR) p.reply.interrupted = true;
    if (m.type === NLMSG_ERROR || m.type === NLMSG_DONE) {
      // NLMSG_ERROR ends a request (error 0 = ACK); DONE ends a dump and carries an int32 error too.
      p.reply.errno = decodeErrno(m, this.E);
      this.requests.pending.delete(m.seq);
      p.done(p.reply);
    } else if (m.type === NLMSG_OVERRUN) {
      this.fail(this.malformed('receive', 'netlink overrun'));
    } else {
      p.reply.messages.push(m);
    }
  }

  private malformed(op: string, message: string): NetlinkError {
    return NetlinkError.malformed.call(this.E, op, message);
  }

  private fromPackage(op: string, err: unknown): NetlinkError {
    return NetlinkError.fromPackageError.call(this.E, op, err);
  }

  /** Closes the socket; pending requests reject. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.requests.watchdog);
    this.fail(this.malformed('close', 'socket closed'));
    this.rawCall(() => this.raw.close());
  }
}
