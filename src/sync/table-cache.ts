// The operator's copy of the kernel's IPVS table, for the virtual servers it looks at: read in full
// at start and on every full sync, checked for drift on periodic syncs (verify), re-read per
// virtual server where counters or a failure make the copy doubtful, and otherwise kept in step by
// recording each op that succeeded (applyOp, the function FakeIpvs applies ops with). Real servers
// the operator wrote carry no connection counters (undefined), and those read carry the counters
// of that read, which traffic has moved since: before deciding a drain the sync reads them again
// (kernel-read.ts).
import { type MutableIpvsTable, applyOp } from '../ipvs/table.js';
import { readDestMaps, readTable } from '../ipvs/read.js';
import type { IpvsClient } from '../ipvs/types.js';
import {
  type IpvsOp, type IpvsTable, type VirtualServer, realServerKey, virtualServerEqual, virtualServerKey,
} from '../model/ipvs.js';

/**
 * The most real server dumps per batched read in the drift check's reading in turn: between two
 * batches it looks at its budget and at a waiting change (a change waits at most one batch).
 */
const IN_TURN_BATCH = 32;

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
    const table = await readTable(ipvs);
    let n = 0;
    for (const e of table.values()) n += e.dests.size;
    this.table = table;
    this.dests = n;
  }

  /** Re-reads the real servers (with their connection counters) of these cached virtual servers. */
  async readSome(ipvs: IpvsClient, keys: Iterable<string>): Promise<void> {
    const entries = [...keys].map((k) => this.table.get(k)).filter((e) => e !== undefined);
    const read = await readDestMaps(ipvs, entries.map((e) => e.vs));
    entries.forEach((e, i) => {
      this.dests += read[i]!.size - e.dests.size;
      e.dests = read[i]!;
    });
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
    await this.rereadMany(ipvs, [...keys], present);
  }

  /**
   * The periodic drift check, at a cost per period bounded in time, not by the cluster's size:
   * one dump of every virtual server, compared with the copy (a missing, extra or changed one is
   * re-read with its real servers), then the real servers of the virtual servers in turn, in
   * batched reads (the first of one dump, then as many as the budget left holds at the last
   * batch's cost, at most IN_TURN_BATCH), until `budgetMs` (measured on `now`) is spent, at least
   * one dump per check; the next
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
    await this.rereadMany(ipvs, [...doubtful], seen);
    const keys = [...seen.keys()];
    let inTurn = 0;
    if (this.cursor >= keys.length) this.cursor = 0;
    // A change waiting for this sync ends the reading in turn early (the cursor keeps its place, so
    // the next period goes on from there): the drift check never holds a change up for its budget
    // longer than one batch of IN_TURN_BATCH dumps.
    // Batches grow from one dump to what the budget left holds at the last batch's cost per dump.
    let size = 1;
    while (inTurn < keys.length && (inTurn === 0 || (now() - t0 < budgetMs && !yieldNow()))) {
      const batch: string[] = [];
      const t = now();
      while (batch.length < size && inTurn < keys.length) {
        const key = keys[this.cursor]!;
        this.cursor = (this.cursor + 1) % keys.length;
        inTurn++;
        if (!doubtful.has(key)) batch.push(key);
      }
      await this.rereadMany(ipvs, batch, seen);
      for (const key of batch) doubtful.add(key);
      const perDump = (now() - t) / Math.max(1, batch.length);
      const left = budgetMs - (now() - t0);
      size = Math.max(1, Math.min(IN_TURN_BATCH, perDump > 0 ? Math.floor(left / perDump) : IN_TURN_BATCH));
    }
    return { reread: doubtful, inTurn };
  }

  /** Reads these virtual servers' real servers into the copy in one batch (absent from `vss`: gone). */
  private async rereadMany(ipvs: IpvsClient, keys: readonly string[], vss: ReadonlyMap<string, VirtualServer>):
  Promise<void> {
    const present = keys.filter((k) => vss.has(k));
    const read = await readDestMaps(ipvs, present.map((k) => vss.get(k)!));
    for (const key of keys) {
      this.dests -= this.table.get(key)?.dests.size ?? 0;
      if (!vss.has(key)) this.table.delete(key);
    }
    present.forEach((key, i) => {
      this.dests += read[i]!.size;
      this.table.set(key, { vs: vss.get(key)!, dests: read[i]! });
    });
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
