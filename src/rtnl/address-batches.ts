// Address adds and deletes sent from a thread of their own (address-thread.ts). The kernel does an
// address's work inside sendmsg() (rtnetlink_rcv, under the RTNL lock; an IPv4 add walks the link's
// address list, __inet_insert_ifa): 47-124 s for 30 000 VIPs in the lab VM. Sent from the event
// loop, that time was taken from the IPVS batch of the same sync, which needs none of those locks:
// from a thread, the binds run beside it, on another CPU where there is one.
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { NetlinkSocket } from '../netlink/socket.js';
import { type AddressBatch, type BatchAnswer, packMessages } from './address-batch.js';
import { RtnlError } from './errors.js';
import { NETLINK_ROUTE } from './socket.js';

const DEFAULT_SCRIPT = new URL('./address-thread.js', import.meta.url);
/** The thread's name, as `top -H` and /proc/PID/task/TID/comm show it. */
export const THREAD_NAME = 'vip-batches';

/** The threads started and not yet ended, for closeAll(). */
const live = new Set<AddressBatches>();

interface Waiting {
  resolve: (errnos: number[]) => void;
  reject: (e: RtnlError) => void;
}

/**
 * Route-netlink requests sent from a thread, acknowledged ones only. A thread that dies (or an
 * error it cannot post) fails every batch waiting and every later one: `failed` says why, and the
 * owner sends without it (Rtnl: the next large batch from the event loop, the one after from a new
 * thread). The thread keeps the process alive only while a batch waits.
 */
export class AddressBatches {
  private readonly thread: Worker;
  private readonly waiting = new Map<number, Waiting>();
  private lastId = 0;
  private failure: RtnlError | undefined;

  /** `script`: the thread's module (tests start a stand-in). */
  constructor(script: URL = DEFAULT_SCRIPT) {
    this.thread = new Worker(script, { name: THREAD_NAME });
    this.thread.unref();
    this.thread.on('message', (m: BatchAnswer) => this.answer(m));
    this.thread.on('error', (e) => this.fail(RtnlError.fromPackageError('address-thread', e)));
    this.thread.on('exit', (code) => {
      live.delete(this);
      this.fail(RtnlError.malformed('address-thread', `thread ended (exit code ${code})`));
    });
    live.add(this);
  }

  /**
   * Closes every thread still running, a batch in progress included, and resolves once each has
   * ended, or after `ms`: what an exit on an error waits for (src/cli/fatal.ts). It keeps the
   * process alive while it waits.
   */
  static async closeAll(ms: number): Promise<void> {
    const ending = [...live].map((b) => {
      const ended = new Promise<void>((resolve) => b.thread.once('exit', () => resolve()));
      b.thread.ref();
      b.close();
      return ended;
    });
    if (!ending.length) return;
    const bound = new AbortController();
    await Promise.race([Promise.all(ending), delay(ms, undefined, { signal: bound.signal }).catch(() => undefined)]);
    bound.abort();
  }

  /** Why the thread failed (it is then never used again), or undefined while it works. */
  get failed(): RtnlError | undefined {
    return this.failure;
  }

  /**
   * Sends `messages` (complete requests asking for an ACK; the thread numbers them) many per
   * datagram and resolves with each one's errno (0 = ACK), in order. Rejects only when the socket
   * or the thread fails.
   */
  exchange(messages: readonly Buffer[]): Promise<number[]> {
    if (this.failure) return Promise.reject(this.failure);
    const { bytes, lengths } = packMessages(messages);
    const batch: AddressBatch = { id: ++this.lastId, bytes, lengths, record: NetlinkSocket.recorder !== undefined };
    return new Promise<number[]>((resolve, reject) => {
      this.waiting.set(batch.id, { resolve, reject });
      this.thread.ref();
      this.thread.postMessage(batch, [bytes, lengths.buffer as ArrayBuffer]);
    });
  }

  /**
   * Ends the thread once the batch it sends, if any, is over (not terminate(): see address-thread.ts);
   * a batch waiting rejects now.
   */
  close(): void {
    this.fail(RtnlError.malformed('close', 'socket closed'));
    this.thread.postMessage('close');
  }

  private answer(m: BatchAnswer): void {
    const w = this.waiting.get(m.id);
    if (!w) return;
    this.settled(m.id);
    if ('error' in m) {
      const { op, errno, code, message } = m.error;
      w.reject(new RtnlError(op, errno, code, message.startsWith(`${op}: `) ? message.slice(op.length + 2) : message));
      return;
    }
    const recorder = NetlinkSocket.recorder;
    if (recorder && m.recorded) {
      const all = Buffer.from(m.recorded.buffer, m.recorded.byteOffset, m.recorded.byteLength);
      let at = 0;
      recorder(NETLINK_ROUTE, m.recordedLengths.map((n) => {
        const bytes = all.subarray(at, (at += n));
        return { seq: bytes.readUInt32LE(8), bytes, dump: false };
      }));
    }
    w.resolve(m.errnos);
  }

  private settled(id: number): void {
    this.waiting.delete(id);
    if (!this.waiting.size) this.thread.unref();
  }

  private fail(err: RtnlError): void {
    this.failure ??= err;
    for (const [id, w] of [...this.waiting]) {
      this.settled(id);
      w.reject(this.failure);
    }
  }
}
