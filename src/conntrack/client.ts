// The conntrack edge: the one place that speaks ctnetlink to the kernel (a NETLINK_NETFILTER
// socket on the project's pipelined netlink socket, src/netlink/socket.ts). It lists a family's
// entries and deletes given ones; what to delete is decided elsewhere (src/plan/conntrack.ts).
// The socket is opened on first use and replaced after it failed. The kernel loads
// nf_conntrack_netlink on the first ctnetlink message (nfnetlink's subsystem autoload), also for an
// unprivileged container: the module request runs in the kernel, not with the caller's caps.
import type { Family } from '../model/addr.js';
import { NetlinkSocket } from '../netlink/socket.js';
import { type Flow, decodeFlow, encodeDelete, encodeDump } from './codec.js';
import { NLMSG_HDRLEN } from '../netlink/constants.js';
import { Errno } from '../netlink/errors.js';
import { NETLINK_NETFILTER } from './constants.js';
import { ConntrackError } from './errors.js';

/**
 * How a list for one protocol ran: `kernel-filter` (the kernel sent only that protocol),
 * `kernel-ignored-filter` (a kernel before 5.8 skipped CTA_FILTER and sent everything; filtered
 * here), `full-dump` (the kernel refused the filter, or none was asked: everything was sent).
 */
export type ListPath = 'kernel-filter' | 'kernel-ignored-filter' | 'full-dump';

/** What the last list() cost: the path, and the entries and bytes the kernel sent. */
export interface ListStats {
  family: Family;
  path: ListPath;
  /** Entries received from the kernel (before any filtering here). */
  messages: number;
  /** Their netlink bytes, headers included. */
  bytes: number;
  /** Entries returned. */
  kept: number;
}

/** What the operator needs of conntrack. */
export interface ConntrackClient {
  /**
   * Every entry of `family` in this network namespace; with `proto`, only that IP protocol's
   * (filtered by the kernel where it can). Rejects with ConntrackError.
   */
  list(family: Family, proto?: number): Promise<Flow[]>;
  /** What the last list() cost and which path it took; undefined before the first. */
  readonly lastList: ListStats | undefined;
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
  /** False once the kernel refused CTA_FILTER: later lists dump everything without asking. */
  private filterWorks = true;
  lastList: ListStats | undefined;

  private socket(): NetlinkSocket {
    if (!this.sock || this.sock.failed) {
      this.sock?.close();
      this.sock = new NetlinkSocket(NETLINK_NETFILTER, ConntrackError);
    }
    return this.sock;
  }

  async list(family: Family, proto?: number): Promise<Flow[]> {
    const filtered = proto !== undefined && this.filterWorks;
    let r = await this.dump(family, filtered ? proto : undefined);
    // A kernel with CTA_FILTER refuses flags or attributes it does not know with EINVAL or
    // EOPNOTSUPP: then dump everything, now and from here on.
    if (filtered && (r.errno === Errno.EINVAL || r.errno === Errno.EOPNOTSUPP)) {
      this.filterWorks = false;
      r = await this.dump(family, undefined);
    }
    if (r.errno) throw ConntrackError.fromErrno(`list ${family}`, r.errno);
    const all = r.messages.map(decodeFlow);
    const flows = proto === undefined ? all : all.filter((f) => f.proto === proto);
    const path: ListPath = !filtered ? 'full-dump' : flows.length === all.length
      ? 'kernel-filter' : 'kernel-ignored-filter';
    const bytes = r.messages.reduce((n, m) => n + NLMSG_HDRLEN + m.payload.length, 0);
    this.lastList = { family, path, messages: all.length, bytes, kept: flows.length };
    return flows;
  }

  private async dump(family: Family, proto: number | undefined) {
    const s = this.socket();
    const seq = s.nextSeq();
    const [r] = await s.exchange([{ seq, bytes: encodeDump(family, seq, s.port, proto), dump: true }]);
    return r!;
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
