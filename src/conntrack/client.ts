// The conntrack edge: the one place that speaks ctnetlink to the kernel (a NETLINK_NETFILTER
// socket on the project's pipelined netlink socket, src/netlink/socket.ts). It lists a family's
// entries and deletes given ones; what to delete is decided elsewhere (src/plan/conntrack.ts).
// The socket is opened on first use and replaced after it failed. The kernel loads
// nf_conntrack_netlink on the first ctnetlink message (nfnetlink's subsystem autoload), also for an
// unprivileged container: the module request runs in the kernel, not with the caller's caps.
import type { Family } from '../model/ipvs.js';
import { NetlinkSocket } from '../netlink/socket.js';
import { type Flow, decodeFlow, encodeDelete, encodeDump } from './codec.js';
import { NETLINK_NETFILTER } from './constants.js';
import { ConntrackError } from './errors.js';

/** What the operator needs of conntrack. */
export interface ConntrackClient {
  /** Every entry of `family` in this network namespace. Rejects with ConntrackError. */
  list(family: Family): Promise<Flow[]>;
  /**
   * Deletes each entry (by its original tuple, zone and id); resolves with one result per flow:
   * undefined when deleted, a ConntrackError otherwise (ENOENT: it was gone already, or its tuple
   * now belongs to a newer entry). Rejects only when the socket fails.
   */
  delete(flows: readonly Flow[]): Promise<Array<ConntrackError | undefined>>;
  close(): void;
}

/** ctnetlink over a netlink socket. */
export class NetlinkConntrack implements ConntrackClient {
  private sock: NetlinkSocket | undefined;

  private socket(): NetlinkSocket {
    if (!this.sock || this.sock.failed) {
      this.sock?.close();
      this.sock = new NetlinkSocket(NETLINK_NETFILTER, ConntrackError);
    }
    return this.sock;
  }

  async list(family: Family): Promise<Flow[]> {
    const s = this.socket();
    const seq = s.nextSeq();
    const [r] = await s.exchange([{ seq, bytes: encodeDump(family, seq, s.port), dump: true }]);
    if (r!.errno) throw ConntrackError.fromErrno(`list ${family}`, r!.errno);
    return r!.messages.map(decodeFlow);
  }

  async delete(flows: readonly Flow[]): Promise<Array<ConntrackError | undefined>> {
    const s = this.socket();
    const out: Array<ConntrackError | undefined> = new Array(flows.length);
    const sent: Array<{ i: number; seq: number; bytes: Buffer; dump: false }> = [];
    flows.forEach((f, i) => {
      try {
        const seq = s.nextSeq();
        sent.push({ i, seq, bytes: encodeDelete(f, seq, s.port), dump: false });
      } catch (e) {
        out[i] = e as ConntrackError;
      }
    });
    const replies = await s.exchange(sent);
    replies.forEach((r, k) => {
      const { i } = sent[k]!;
      out[i] = r.errno ? ConntrackError.fromErrno('delete', r.errno) : undefined;
    });
    return out;
  }

  close(): void {
    this.sock?.close();
    this.sock = undefined;
  }
}
