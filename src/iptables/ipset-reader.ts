// Reading our ipsets: the names of the host's sets, and some sets' headers and members, as
// SavedSets. Two readers: over netlink (the kernel's own answer, decoded in ipset-netlink.ts; what
// a node uses), and through the `ipset` binary on a Runner (what fakes and dry runs supply, every
// host access going through their runner). Both read only; neither writes a set.
import { NETLINK_NETFILTER } from '../netlink/constants.js';
import { DUMP_RECEIVE_BYTES, NetlinkSocket } from '../netlink/socket.js';
import { type Runner, runChecked } from './exec.js';
import { listSetNames, saveSets } from './ipset.js';
import { parseSetCounts } from './drift.js';
import { IpsetError, decodeCounts, decodeNames, decodeSet, encodeList } from './ipset-netlink.js';
import { type SavedSets, parseIpsetSave } from './ipset-save.js';

/** Reads sets; rejects when a named set is gone (destroyed since it was listed) or the read fails. */
export interface SetReader {
  /** Every set name on the host, ours and foreign. */
  names(): Promise<Set<string>>;
  /** The named sets' headers and members. */
  read(names: readonly string[]): Promise<SavedSets>;
  /** Members per set, every set on the host, from the headers alone (the periodic check's read). */
  counts(signal?: AbortSignal): Promise<Map<string, number>>;
}

/** Through `ipset list -n` and `ipset restore` of `save <name>` lines, on `run`. */
export function toolSetReader(run: Runner): SetReader {
  return {
    names: () => listSetNames(run),
    read: async (names) => parseIpsetSave(await saveSets(run, names)),
    counts: async (signal) => parseSetCounts(await runChecked(run, 'ipset', ['list', '-t'], undefined, signal)),
  };
}

/**
 * Over an nfnetlink socket: one dump of every name, then one dump per named set, one at a time
 * (the kernel runs one dump per socket). The socket opens on first use and again after it failed.
 */
export class NetlinkSetReader implements SetReader {
  private sock: NetlinkSocket | undefined;

  async names(): Promise<Set<string>> {
    return new Set(decodeNames((await this.dump('list-sets', 'names')).messages));
  }

  async read(names: readonly string[]): Promise<SavedSets> {
    const out: SavedSets = { sets: new Map(), garbage: [] };
    for (const set of names) decodeSet((await this.dump(`list-set ${set}`, { set })).messages, out);
    return out;
  }

  /** One dump of every set's header, no members (`signal` is not taken: nothing long runs). */
  async counts(): Promise<Map<string, number>> {
    return decodeCounts((await this.dump('list-headers', 'headers')).messages);
  }

  private async dump(op: string, what: Parameters<typeof encodeList>[2]) {
    const s = this.socket();
    const seq = s.nextSeq();
    const [reply] = await s.exchange([{ seq, bytes: encodeList(seq, s.port, what), dump: true }]);
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
