// Address adds and deletes sent from the helper thread (src/util/helper-thread.ts; the job is
// address-thread.ts). The kernel does an address's work inside sendmsg() (rtnetlink_rcv, under the
// RTNL lock; an IPv4 add walks the link's address list, __inet_insert_ifa): 47-124 s for 30 000
// VIPs in the lab VM. Sent from the event loop, that time was taken from the IPVS batch of the
// same sync, which needs none of those locks: from a thread, the binds run beside it, on another
// CPU where there is one.
import { NetlinkSocket } from '../netlink/socket.js';
import { HelperThread } from '../util/helper-thread.js';
import { type AddressBatch, type BatchAnswer, packMessages } from './address-batch.js';
import { RtnlError } from './errors.js';
import { NETLINK_ROUTE } from './socket.js';

/** The job the helper thread runs for a batch. */
export const ADDRESS_JOB = new URL('./address-thread.js', import.meta.url);

interface Waiting {
  resolve: (errnos: number[]) => void;
  reject: (e: RtnlError) => void;
}

/**
 * Route-netlink requests sent from the helper thread, acknowledged ones only. A thread that dies
 * (or a job that cannot run) fails every batch waiting and every later one: `failed` says why, and
 * the owner sends without it (Rtnl: the next large batch from the event loop, the one after through
 * a new AddressBatches, on the thread then running).
 */
export class AddressBatches {
  private readonly waiting = new Map<number, Waiting>();
  private lastId = 0;
  private failure: RtnlError | undefined;
  private thread: HelperThread;
  /** Whether the thread is the process's shared one, which is followed when it ends idle. */
  private readonly follows: boolean;

  /** `job`: the job's module (tests run a stand-in); `thread`: the thread that runs it (the shared one). */
  constructor(private readonly job: URL = ADDRESS_JOB, thread?: HelperThread) {
    this.follows = !thread;
    this.thread = thread ?? HelperThread.shared();
    this.prepare();
  }

  /** Has the thread import the job now (the thread then running, for a shared one that ended idle). */
  prepare(): void {
    this.follow();
    if (!this.failure) this.thread.load(this.job);
  }

  /** A shared thread that ended with no job left nothing behind: the batches go to the next one. */
  private follow(): void {
    if (this.follows && this.thread.retired && !this.failure) this.thread = HelperThread.shared();
  }

  /** Why the batches failed (they are then never sent again), or undefined while they work. */
  get failed(): RtnlError | undefined {
    return this.failure;
  }

  /**
   * Sends `messages` (complete requests asking for an ACK; the thread numbers them) many per
   * datagram and resolves with each one's errno (0 = ACK), in order. Rejects only when the socket,
   * the job or the thread fails.
   */
  exchange(messages: readonly Buffer[]): Promise<number[]> {
    this.follow();
    const dead = this.thread.failed;
    if (!this.failure && dead) this.fail(RtnlError.malformed('address-thread', dead.message));
    if (this.failure) return Promise.reject(this.failure);
    const { bytes, lengths } = packMessages(messages);
    const batch: AddressBatch = { id: ++this.lastId, bytes, lengths, record: NetlinkSocket.recorder !== undefined };
    return new Promise<number[]>((resolve, reject) => {
      let answered = false;
      const job = this.thread.start(this.job, batch, {
        message: (m) => {
          answered = true;
          this.answer(job, m as BatchAnswer);
        },
        end: (error) => {
          if (answered && !error) return;
          const why = error?.message ?? 'ended without an answer';
          this.fail(RtnlError.malformed('address-thread', why));
        },
      }, [bytes, lengths.buffer as ArrayBuffer]);
      this.waiting.set(job, { resolve, reject });
    });
  }

  /**
   * Rejects every batch waiting, now and later; the one being sent has its socket closed in the
   * thread (see address-thread.ts), which goes on with the other jobs it has.
   */
  close(): void {
    const ids = [...this.waiting.keys()];
    this.fail(RtnlError.malformed('close', 'socket closed'));
    for (const id of ids) this.thread.cancel(id);
  }

  private answer(id: number, m: BatchAnswer): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if ('error' in m) {
      const { op, errno, code, message } = m.error;
      w.reject(new RtnlError(op, errno, code, message.startsWith(`${op}: `) ? message.slice(op.length + 2) : message));
      return;
    }
    // The datagrams as the thread sent them, back to back: one call, its messages told by their headers.
    const r = m.recorded;
    if (r) NetlinkSocket.recorder?.(NETLINK_ROUTE, Buffer.from(r.buffer, r.byteOffset, r.byteLength));
    w.resolve(m.errnos);
  }

  private fail(err: RtnlError): void {
    this.failure ??= err;
    for (const [id, w] of [...this.waiting]) {
      this.waiting.delete(id);
      w.reject(this.failure);
    }
  }
}
