// The operator's copy of the kernel's IPVS table, for the virtual servers it looks at: read in full
// at start and on every full sync, checked for drift on periodic syncs (verify), re-read per
// virtual server where counters or a failure make the copy doubtful, and otherwise kept in step by
// recording each op that succeeded (applyOp, the function FakeIpvs applies ops with). Real servers
// the operator wrote carry no connection counters (undefined), and those read carry the counters
// of that read, which traffic has moved since: before deciding a drain the sync reads them again
// (kernel-read.ts).
import { IpvsError } from '../ipvs/errors.js';
import { type MutableIpvsTable, applyOp } from '../ipvs/table.js';
import { readDestMaps } from '../ipvs/read.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { ListingReader } from '../ipvs/proc.js';
import {
  type IpvsOp, type IpvsTable, type VirtualServer, realServerKey, virtualServerEqual,
  virtualServerKey,
} from '../model/ipvs.js';
import type { DesiredTable } from '../model/desired.js';
import { COPY_READ, type FullReadCount, closeListing, readFullDests } from './full-read.js';

/**
 * The most real server dumps per batched read in the drift check's reading in turn: between two
 * batches it looks at its budget and at a waiting change (a change waits at most one batch).
 */
const IN_TURN_BATCH = 32;

/**
 * The longest a batch of the reading in turn should take (ms), at the dearest cost per entry seen:
 * a change that arrives during a batch waits for it (guest target for a change: 50 ms in all).
 */
const IN_TURN_BATCH_MS = 20;

/**
 * The drift check dumps every virtual server while that dump, at the last one's cost per virtual
 * server, would take at most this share of the check's budget; past it, it looks the virtual
 * servers up in turn instead (TableCache.verify).
 */
const WHOLE_DUMP_SHARE = 0.5;

/** How a drift check read the virtual servers: one dump of all, or a lookup of each in turn. */
export type DriftMode = 'whole' | 'in-turn';

/** The cached table and its real server count (the node status reports it every sync). */
export class TableCache {
  private table: MutableIpvsTable = new Map();
  private dests = 0;
  /** Where the next drift check's real server reads start. */
  private cursor = 0;
  /**
   * How the last full read got its real servers: from the listing for how many virtual servers,
   * dumped for how many, and whether the kernel's listing was read at all.
   */
  lastFullRead: FullReadCount | undefined;
  /** What one virtual server of the last timed dump of them all cost (ms); unknown until one listed any. */
  private dumpMsPerVs: number | undefined;

  /** The cached table (live view, no copy). */
  get view(): IpvsTable {
    return this.table;
  }

  /** Real servers in the cache. */
  get realServers(): number {
    return this.dests;
  }

  /**
   * Replaces the cache with the kernel's whole table; `now` times its dump of the virtual servers.
   * With `desired`, real servers come from the kernel's listing where it shows them in full
   * (full-read.ts).
   */
  async readAll(
    ipvs: IpvsClient, now?: () => number, desired?: DesiredTable, listing?: Promise<ListingReader | undefined>,
  ): Promise<void> {
    let vss: VirtualServer[];
    try {
      vss = await this.dumpAll(ipvs, now);
    } catch (e) {
      await closeListing(listing);
      throw e;
    }
    const { dests, count } = await readFullDests(ipvs, vss, desired, undefined, listing);
    const table: MutableIpvsTable = new Map();
    let n = 0;
    vss.forEach((vs, i) => {
      table.set(virtualServerKey(vs), { vs, dests: dests[i]! });
      n += dests[i]!.size;
    });
    this.table = table;
    this.dests = n;
    this.lastFullRead = count;
  }

  /** One dump of every virtual server, timed on `now` when given (the drift check's estimate). */
  private async dumpAll(ipvs: IpvsClient, now?: () => number): Promise<VirtualServer[]> {
    const t = now?.();
    const vss = await ipvs.listVirtualServers(COPY_READ);
    if (now && t !== undefined && vss.length > 0) this.dumpMsPerVs = (now() - t) / vss.length;
    return vss;
  }

  /** Re-reads the real servers (with their connection counters) of these cached virtual servers. */
  async readSome(ipvs: IpvsClient, keys: Iterable<string>): Promise<void> {
    const entries = [...keys].map((k) => this.table.get(k)).filter((e) => e !== undefined);
    const read = await readDestMaps(ipvs, entries.map((e) => e.vs), COPY_READ);
    entries.forEach((e, i) => {
      this.dests += read[i]!.size - e.dests.size;
      e.dests = read[i]!;
    });
  }

  /**
   * Re-reads these virtual servers whether cached or not (after their ops failed, the copy is
   * doubtful): each looked up by key (GET_SERVICE) when the copy or `desired` knows it, else one
   * dump of the virtual servers; then the real servers of those present.
   */
  async refresh(
    ipvs: IpvsClient, keys: ReadonlySet<string>, desired?: ReadonlyMap<string, { vs: VirtualServer }>,
  ): Promise<void> {
    if (keys.size === 0) return;
    const wanted = [...keys];
    const asked = wanted.map((key) => (this.table.get(key) ?? desired?.get(key))?.vs);
    const present = asked.every((vs) => vs !== undefined)
      ? await this.lookUp(ipvs, wanted, asked as VirtualServer[])
      : new Map((await ipvs.listVirtualServers(COPY_READ)).map((vs) => [virtualServerKey(vs), vs] as const)
        .filter(([key]) => keys.has(key)));
    await this.rereadMany(ipvs, wanted, present);
  }

  /** GET_SERVICE of each key's virtual server: those present, by key (ESRCH: absent; other errors throw). */
  private async lookUp(ipvs: IpvsClient, keys: readonly string[], vss: readonly VirtualServer[]):
  Promise<Map<string, VirtualServer>> {
    const seen = new Map<string, VirtualServer>();
    (await ipvs.getVirtualServers(vss, COPY_READ)).forEach((r, i) => {
      if (!(r instanceof IpvsError)) seen.set(keys[i]!, r);
      else if (r.code !== 'ESRCH') throw r;
    });
    return seen;
  }

  /**
   * The periodic drift check, at a cost per period bounded in time, not by the cluster's size.
   * While one dump of every virtual server fits in WHOLE_DUMP_SHARE of `budgetMs` (at the last
   * dump's cost per virtual server; untimed: assumed to fit), mode 'whole': that dump, compared with
   * the copy (a missing, extra or changed one is re-read with its real servers), then the real
   * servers of the virtual servers in turn. Past it (the kernel walks its service table from the
   * start for every datagram of that dump: 36 000 virtual servers took 4-7 s of the kernel's time
   * under the lab's TCG), mode 'in-turn': the virtual servers of the copy and of `desired` are looked
   * up in turn (GET_SERVICE, a hash lookup each) with their real servers, so a changed or missing
   * one is found when its turn comes, and one at a key neither holds is not looked for. Either way
   * the reading in turn goes in batched reads (the first of one virtual server, then as many as the
   * budget left holds at the dearest batch's cost per entry, at most IN_TURN_BATCH and
   * IN_TURN_BATCH_MS's worth), while one more entry at that cost fits in `budgetMs` (measured on
   * `now`), at least one per check; the next check goes on where this one stopped. So every real
   * server is verified within about (virtual servers x one's cost) / budget periods.
   * Resolves with the keys it re-read (plan them: their copy may have changed), how many it read in
   * turn, and the mode.
   */
  async verify(
    ipvs: IpvsClient, budgetMs: number, now: () => number, yieldNow: () => boolean = () => false,
    desired?: ReadonlyMap<string, { vs: VirtualServer }>,
  ): Promise<{ reread: Set<string>; inTurn: number; mode: DriftMode }> {
    const t0 = now();
    const size = Math.max(this.table.size, desired?.size ?? 0);
    const whole = this.dumpMsPerVs === undefined || this.dumpMsPerVs * size <= WHOLE_DUMP_SHARE * budgetMs;
    const doubtful = new Set<string>();
    let keys: string[];
    // What the reading in turn looks at: the dump's virtual servers, or each key's looked up.
    let vsOf: (batch: readonly string[]) => Promise<ReadonlyMap<string, VirtualServer>>;
    if (whole) {
      const seen = new Map<string, VirtualServer>();
      for (const vs of await this.dumpAll(ipvs, now)) seen.set(virtualServerKey(vs), vs);
      for (const [key, vs] of seen) {
        const have = this.table.get(key);
        if (!have || !virtualServerEqual(have.vs, vs)) doubtful.add(key);
      }
      for (const key of this.table.keys()) if (!seen.has(key)) doubtful.add(key);
      await this.rereadMany(ipvs, [...doubtful], seen);
      keys = [...seen.keys()];
      vsOf = async () => seen;
    } else {
      keys = [...this.table.keys()];
      if (desired) for (const key of desired.keys()) if (!this.table.has(key)) keys.push(key);
      vsOf = (batch) => this.lookUp(ipvs, batch, batch.map((key) => (this.table.get(key) ?? desired!.get(key)!).vs));
    }
    let inTurn = 0;
    if (this.cursor >= keys.length) this.cursor = 0;
    // A change waiting for this sync ends the reading in turn early (the cursor keeps its place, so
    // the next period goes on from there): the drift check never holds a change up for its budget
    // longer than one batch. Batches grow from one to what the budget left, and IN_TURN_BATCH_MS,
    // hold at the dearest batch's cost per entry so far (a batch of cheap entries, a missing
    // virtual server's, does not make the next one overrun); the next batch starts only while one
    // more entry, at that cost, fits in what is left.
    let batchSize = 1;
    let perEntry = 0;
    const fits = () => budgetMs - (now() - t0) >= Math.max(perEntry, Number.MIN_VALUE);
    while (inTurn < keys.length && (inTurn === 0 || (fits() && !yieldNow()))) {
      const batch: string[] = [];
      const t = now();
      while (batch.length < batchSize && inTurn < keys.length) {
        const key = keys[this.cursor]!;
        this.cursor = (this.cursor + 1) % keys.length;
        inTurn++;
        if (!doubtful.has(key)) batch.push(key);
      }
      await this.rereadMany(ipvs, batch, await vsOf(batch));
      for (const key of batch) doubtful.add(key);
      perEntry = Math.max(perEntry, (now() - t) / Math.max(1, batch.length));
      const left = Math.min(budgetMs - (now() - t0), IN_TURN_BATCH_MS);
      batchSize = Math.max(1, Math.min(IN_TURN_BATCH, perEntry > 0 ? Math.floor(left / perEntry) : IN_TURN_BATCH));
    }
    return { reread: doubtful, inTurn, mode: whole ? 'whole' : 'in-turn' };
  }

  /** Reads these virtual servers' real servers into the copy in one batch (absent from `vss`: gone). */
  private async rereadMany(ipvs: IpvsClient, keys: readonly string[], vss: ReadonlyMap<string, VirtualServer>):
  Promise<void> {
    const present = keys.filter((k) => vss.has(k));
    const read = await readDestMaps(ipvs, present.map((k) => vss.get(k)!), COPY_READ);
    for (const key of keys) {
      this.dests -= this.table.get(key)?.dests.size ?? 0;
      if (!vss.has(key)) this.table.delete(key);
    }
    present.forEach((key, i) => {
      this.dests += read[i]!.size;
      this.table.set(key, { vs: vss.get(key)!, dests: read[i]! });
    });
  }

  /** Records an op the kernel accepted; `key`: its virtual server's (virtualServerKey), when the caller has it. */
  record(op: IpvsOp, key = virtualServerKey(op.vs)): void {
    const before = this.table.get(key)?.dests.size ?? 0;
    // A service update keeps the kernel's real servers; SET_SERVICE does not touch them.
    if (applyOp(this.table, op, undefined, key) !== undefined) {
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
