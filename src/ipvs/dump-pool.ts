// The dump sockets of a batched read: many GET_DEST dumps kept in flight over a few sockets. The
// kernel runs one dump per socket at a time (af_netlink.c __netlink_dump_start: a dump request on
// a socket whose dump is still running gets EBUSY), and a dump with data ends only after its
// first datagram is read (its DONE is written by the next recvmsg), so dumps cannot be pipelined on
// one socket; several sockets each keep one in flight, and one event-loop turn serves them all.
import { IpvsError } from './errors.js';
import { type IpvsRequest, encodeRequest } from './requests.js';
import type { OpenSocket } from './connection.js';
import type { GenlSocket, Reply } from './socket.js';

/**
 * Dump sockets of a batched read, each with one dump in flight: 36 000 dumps took 106, 83, 60 and
 * 35 s in the lab VM with 1, 4, 8 and 16 (docs/performance.md, "Reading the table").
 */
export const DUMP_SOCKETS = 16;
/** Dumps interrupted by a concurrent change (NLM_F_DUMP_INTR) are retried this many times. */
export const DUMP_RETRIES = 3;

/**
 * Up to `size` sockets, opened on the first batch and kept for the next (unreferenced, so they
 * hold no process open). A socket that fails closes them all: the batch rejects with its error and
 * the next batch opens new ones.
 */
export class DumpPool {
  private socks: GenlSocket[] = [];

  constructor(private readonly open: OpenSocket, private readonly size = DUMP_SOCKETS) {}

  /**
   * Runs the dump requests on the IPVS family `familyId`, `size` at a time; resolves with one Reply
   * per request, in order (an interrupted dump retried up to DUMP_RETRIES times, as a single dump
   * is). Rejects with the first socket failure (the pool is then closed; no reply is returned).
   */
  async dumps(familyId: number, reqs: readonly IpvsRequest[]): Promise<Reply[]> {
    const replies: Reply[] = new Array<Reply>(reqs.length);
    if (!reqs.length) return replies;
    const socks = this.sockets(Math.min(this.size, reqs.length));
    let next = 0;
    const worker = async (sock: GenlSocket): Promise<void> => {
      while (next < reqs.length) {
        const i = next++;
        const req = reqs[i]!;
        for (let attempt = 0; ; attempt++) {
          const seq = sock.nextSeq();
          const bytes = encodeRequest(familyId, req, seq, sock.port);
          const [reply] = await sock.exchange([{ seq, bytes, dump: true }]);
          if (!reply) throw IpvsError.malformed(req.what, 'no reply');
          if (!reply.interrupted || reply.errno || attempt >= DUMP_RETRIES) {
            replies[i] = reply;
            break;
          }
        }
      }
    };
    try {
      await Promise.all(socks.map(worker));
    } catch (e) {
      next = reqs.length; // the other workers stop after their dump in flight
      this.close();
      throw e;
    }
    return replies;
  }

  /** `n` working sockets: the pool's, with failed ones replaced. */
  private sockets(n: number): GenlSocket[] {
    this.socks = this.socks.filter((s) => {
      if (s.failed) s.close();
      return !s.failed;
    });
    try {
      while (this.socks.length < n) this.socks.push(this.open());
    } catch (e) {
      this.close();
      throw IpvsError.fromPackageError('socket', e);
    }
    return this.socks.slice(0, n);
  }

  /** Closes every socket (a later batch opens new ones). */
  close(): void {
    for (const s of this.socks) s.close();
    this.socks = [];
  }
}
