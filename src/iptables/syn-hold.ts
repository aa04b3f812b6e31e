// The SYN hold: members of our HOLD set (hash:ip,port), added while the IPVS edits that swap a
// virtual server's scheduler run and deleted after. The mangle rule render.ts writes drops a new
// TCP connection's SYN to a member before IPVS sees it: the kernel's ip_vs_edit_service unbinds the
// old scheduler and waits an RCU grace period before binding the new one, and a SYN scheduled in
// that gap is answered port unreachable (docs/semantics.md, "A scheduler changed live"); a dropped
// SYN is sent again by the client (after 1 s) and meets the new scheduler. Two writers: over
// netlink (a node), and `ipset restore -exist` on a Runner (fakes and dry runs).
import { NETLINK_NETFILTER } from '../netlink/constants.js';
import { NetlinkSocket } from '../netlink/socket.js';
import { type Runner } from './exec.js';
import { restoreSets } from './ipset.js';
import { IPSET_ADD, IPSET_DEL, type IpPortMember, IpsetError, encodeMember } from './ipset-netlink.js';

/** Adds members to a set and deletes them; either is no error when already done. */
export interface SetMembers {
  add(set: (m: IpPortMember) => string, members: readonly IpPortMember[]): Promise<void>;
  del(set: (m: IpPortMember) => string, members: readonly IpPortMember[]): Promise<void>;
}

/** What a hold did around its swap. */
export interface HoldOutcome<T> {
  value: T;
  /** The members could not be added: the swap ran unheld. */
  error?: unknown;
}

/** The member as ipset prints it. */
export const memberText = (m: IpPortMember) => `${m.address},${m.protocol}:${m.port}`;

/** One netlink message per member, sent together, each acknowledged; rejects with the first refusal. */
export class NetlinkSetMembers implements SetMembers {
  private sock: NetlinkSocket | undefined;

  add(set: (m: IpPortMember) => string, members: readonly IpPortMember[]): Promise<void> {
    return this.send(IPSET_ADD, set, members);
  }

  del(set: (m: IpPortMember) => string, members: readonly IpPortMember[]): Promise<void> {
    return this.send(IPSET_DEL, set, members);
  }

  private async send(
    type: typeof IPSET_ADD | typeof IPSET_DEL, set: (m: IpPortMember) => string, members: readonly IpPortMember[],
  ): Promise<void> {
    if (!members.length) return;
    const s = this.socket();
    const out = members.map((m) => {
      const seq = s.nextSeq();
      return { seq, bytes: encodeMember(type, seq, s.port, set(m), m), dump: false };
    });
    const replies = await s.exchange(out);
    const i = replies.findIndex((r) => r.errno);
    if (i >= 0) {
      const op = `${type === IPSET_ADD ? 'add' : 'del'} ${set(members[i]!)} ${memberText(members[i]!)}`;
      throw IpsetError.fromErrno(op, replies[i]!.errno);
    }
  }

  private socket(): NetlinkSocket {
    if (!this.sock || this.sock.failed) {
      this.sock?.close();
      this.sock = new NetlinkSocket(NETLINK_NETFILTER, IpsetError);
    }
    return this.sock;
  }

  close(): void {
    this.sock?.close();
    this.sock = undefined;
  }
}

/** Through `ipset restore -exist` on `run`: one process for the members. */
export function toolSetMembers(run: Runner): SetMembers {
  const lines = (verb: string, set: (m: IpPortMember) => string, members: readonly IpPortMember[]) =>
    members.map((m) => `${verb} ${set(m)} ${memberText(m)}\n`).join('');
  return {
    add: (set, members) => restoreSets(run, lines('add', set, members)),
    del: (set, members) => restoreSets(run, lines('del', set, members)),
  };
}

/**
 * Runs `swap` with `members` held. A hold that cannot be set is reported with the swap's value
 * (the swap is never held back: it is what the user asked for), and what of it was set is deleted
 * as far as it can be. After a hold that was set, the members are deleted whatever the swap did,
 * once more if the first try fails; a release that fails twice rejects, so the sync fails and the
 * next one reads our sets again (and deletes the member).
 */
export async function holdDuring<T>(
  writer: SetMembers, set: (m: IpPortMember) => string, members: readonly IpPortMember[], swap: () => Promise<T>,
): Promise<HoldOutcome<T>> {
  let error: unknown;
  try {
    await writer.add(set, members);
  } catch (e) {
    error = e;
  }
  let value: T;
  try {
    value = await swap();
  } finally {
    const release = () => writer.del(set, members);
    if (error === undefined) await release().catch(release);
    else await release().catch(() => undefined);
  }
  return error === undefined ? { value } : { value, error };
}
