// Reading our ipsets: the names of the host's sets, and some sets' headers and members, as
// SavedSets. Two readers: over netlink (the kernel's own answer, decoded in ipset-netlink.ts; what
// a node uses), and through the `ipset` binary on a Runner (what fakes and dry runs supply, every
// host access going through their runner). Both read only; neither writes a set.
import { DUMP_RECEIVE_BYTES, NetlinkSocket } from '../netlink/socket.js';
import { type Runner } from './exec.js';
import { listSetNames, saveSets } from './ipset.js';
import { IpsetError, decodeNames, decodeSet, encodeList } from './ipset-netlink.js';
import { type SavedSets, parseIpsetSave } from './ipset-save.js';

const NETLINK_NETFILTER = 12;

/** Reads sets; rejects when a named set is gone (destroyed since it was listed) or the read fails. */
export interface SetReader {
  /** Every set name on the host, ours and foreign. */
  names(): Promise<Set<string>>;
  /** The named sets' headers and members. */
  read(names: readonly string[]): Promise<SavedSets>;
}

/** Through `ipset list -n` and `ipset restore` of `save <name>` lines, on `run`. */
export function toolSetReader(run: Runner): SetReader {
  return {
    names: () => listSetNames(run),
    read: async (names) => parseIpsetSave(await saveSets(run, names)),
  };
}

/**
 * Over an nfnetlink socket: one dump of every name, then one dump per named set, one at a time
 * (the kernel runs one dump per socket). The socket opens on first use and again after it failed.
 */
export class NetlinkSetReader implements SetReader {
  private sock: NetlinkSocket | undefined;

  async names(): Promise<Set<string>> {
    return new Set(decodeNames((await this.dump('list-sets')).messages));
  }

  async read(names: readonly string[]): Promise<SavedSets> {
    const out: SavedSets = { sets: new Map(), garbage: [] };
    for (const name of names) decodeSet((await this.dump(`list-set ${name}`, name)).messages, out);
    return out;
  }

  private async dump(op: string, name?: string) {
    const s = this.socket();
    const seq = s.nextSeq();
    const [reply] = await s.exchange([{ seq, bytes: encodeList(seq, s.port, name), dump: true }]);
    if (reply!.errno) throw IpsetError.fromErrno(op, reply!.errno);
    return reply!;
  }

  private socket(): NetlinkSocket {
    if (!this.sock || this.sock.failed) {
      this.sock?.close();
      this.sock = new NetlinkSocket(NETLINK_NETFILTER, IpsetError, DUMP_RECEIVE_BYTES);
    }
    return this.sock;
  }

  /** Closes the socket (a later read opens another). */
  close(): void {
    this.sock?.close();
    this.sock = undefined;
  }
}
