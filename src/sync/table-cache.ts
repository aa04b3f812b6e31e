// The operator's copy of the kernel's IPVS table, for the virtual servers it looks at: read in full
// at start and on every full sync, checked for drift on periodic syncs (verify), re-read per
// virtual server where counters or a failure make the copy doubtful, and otherwise kept in step by
// recording each op that succeeded (applyOp, the function FakeIpvs applies ops with). Real servers
// the operator wrote carry no connection counters (undefined), and those read carry the counters
// of that read, which traffic has moved since: before deciding a drain the sync reads them again
// (kernel-read.ts).
import { type MutableIpvsTable, applyOp } from '../ipvs/table.js';
import type { IpvsClient } from '../ipvs/types.js';
import {
  type IpvsOp, type IpvsTable, type RealServer, type VirtualServer, realServerKey, virtualServerEqual, virtualServerKey,
} from '../model/ipvs.js';

/** The cached table and its real server count (the node status reports it every sync). */
export class TableCache {
  private table: MutableIpvsTable = new Map();
  private dests = 0;
  /** Where the next drift check's real server reads start. */
  private cursor = 0;

  /** The cached table (live view, no copy). */
  get view(): IpvsTable {
    return this.table;
  }

  /** Real servers in the cache. */
  get realServers(): number {
    return this.dests;
  }

  /** Replaces the cache with the kernel's whole table. */
  async readAll(ipvs: IpvsClient): Promise<void> {
    const table: MutableIpvsTable = new Map();
    let n = 0;
    for (const vs of await ipvs.listVirtualServers()) {
      const dests = await readDests(ipvs, vs);
      n += dests.size;
      table.set(virtualServerKey(vs), { vs, dests });
    }
    this.table = table;
    this.dests = n;
  }

  /** Re-reads the real servers (with their connection counters) of these cached virtual servers. */
  async readSome(ipvs: IpvsClient, keys: Iterable<string>): Promise<void> {
    for (const key of keys) {
      const e = this.table.get(key);
      if (!e) continue;
      const dests = await readDests(ipvs, e.vs);
      this.dests += dests.size - e.dests.size;
      e.dests = dests;
    }
  }

  /**
   * Re-reads these virtual servers whether cached or not (after their ops failed, the copy is
   * doubtful): one dump of the virtual servers, then the real servers of those present.
   */
  async refresh(ipvs: IpvsClient, keys: ReadonlySet<string>): Promise<void> {
    if (keys.size === 0) return;
    const present = new Map<string, IpvsOp['vs']>();
    for (const vs of await ipvs.listVirtualServers()) {
      const key = virtualServerKey(vs);
      if (keys.has(key)) present.set(key, vs);
    }
    for (const key of keys) {
      const vs = present.get(key);
      const old = this.table.get(key);
      this.dests -= old?.dests.size ?? 0;
      if (!vs) {
        this.table.delete(key);
        continue;
      }
      const dests = await readDests(ipvs, vs);
      this.dests += dests.size;
      this.table.set(key, { vs, dests });
    }
  }

  /**
   * The periodic drift check, at a cost per period bounded in time, not by the cluster's size:
   * one dump of every virtual server, compared with the copy (a missing, extra or changed one is
   * re-read with its real servers), then the real servers of the virtual servers in turn, one
   * dump each, until `budgetMs` (measured on `now`) is spent, at least one per check; the next
   * check goes on where this one stopped. So every real server is verified within about
   * (virtual servers x one dump's time) / budget periods. Resolves with the keys it re-read (plan
   * them: their copy may have changed) and how many it read in turn.
   */
  async verify(
    ipvs: IpvsClient, budgetMs: number, now: () => number, yieldNow: () => boolean = () => false,
  ): Promise<{ reread: Set<string>; inTurn: number }> {
    const t0 = now();
    const seen = new Map<string, IpvsOp['vs']>();
    for (const vs of await ipvs.listVirtualServers()) seen.set(virtualServerKey(vs), vs);
    const doubtful = new Set<string>();
    for (const [key, vs] of seen) {
      const have = this.table.get(key);
      if (!have || !virtualServerEqual(have.vs, vs)) doubtful.add(key);
    }
    for (const key of this.table.keys()) if (!seen.has(key)) doubtful.add(key);
    for (const key of doubtful) await this.reread(ipvs, key, seen.get(key));
    const keys = [...seen.keys()];
    let inTurn = 0;
    if (this.cursor >= keys.length) this.cursor = 0;
    // A change waiting for this sync ends the reading in turn early (the cursor keeps its place, so
    // the next period goes on from there): the drift check never holds a change up for its budget.
    while (inTurn < keys.length && (inTurn === 0 || (now() - t0 < budgetMs && !yieldNow()))) {
      const key = keys[this.cursor]!;
      this.cursor = (this.cursor + 1) % keys.length;
      inTurn++;
      if (doubtful.has(key)) continue;
      await this.reread(ipvs, key, seen.get(key));
      doubtful.add(key);
    }
    return { reread: doubtful, inTurn };
  }

  /** Reads one virtual server's real servers into the copy (`vs` undefined: it is gone). */
  private async reread(ipvs: IpvsClient, key: string, vs: VirtualServer | undefined): Promise<void> {
    this.dests -= this.table.get(key)?.dests.size ?? 0;
    if (!vs) {
      this.table.delete(key);
      return;
    }
    const dests = await readDests(ipvs, vs);
    this.dests += dests.size;
    this.table.set(key, { vs, dests });
  }

  /** Records an op the kernel accepted. */
  record(op: IpvsOp): void {
    const key = virtualServerKey(op.vs);
    const before = this.table.get(key)?.dests.size ?? 0;
    // A service update keeps the kernel's real servers; SET_SERVICE does not touch them.
    if (applyOp(this.table, op) !== undefined) {
      // The kernel accepted what the copy would refuse: the copy was wrong. Make it agree.
      if (op.kind === 'add-service' || op.kind === 'update-service') {
        this.table.set(key, { vs: op.vs, dests: this.table.get(key)?.dests ?? new Map() });
      } else if (op.kind === 'add-dest' || op.kind === 'update-dest') {
        this.table.get(key)?.dests.set(realServerKey(op.rs), op.rs);
      }
    }
    this.dests += (this.table.get(key)?.dests.size ?? 0) - before;
  }
}

async function readDests(ipvs: IpvsClient, vs: IpvsOp['vs']): Promise<Map<string, RealServer>> {
  const dests = new Map<string, RealServer>();
  for (const rs of await ipvs.listRealServers(vs)) dests.set(realServerKey(rs), rs);
  return dests;
}
