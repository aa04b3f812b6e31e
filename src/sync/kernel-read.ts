// The read step of a sync: what the plan needs from the kernel, into the loop's copy of it (the
// table cache and the VIP link's addresses). The whole table on full syncs (start, config change,
// after a failed sync); on periodic syncs a drift check whose cost per period does not grow with
// the cluster (one dump of the virtual servers, or where that dump is past its share of the budget
// a lookup of each in turn, then real servers in turn, the whole check with the VIP listing kept to
// a tenth of syncPeriod, the iptables check running beside it: TableCache.verify; a change
// arriving meanwhile ends the reading in turn); else only the real servers whose connection
// counters decide a drain (read now, whatever the cache holds), and the virtual servers due for a
// retry.
import type { Desired } from '../desired/types.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { ListingReader } from '../ipvs/proc.js';
import { realServerKey } from '../model/ipvs.js';
import type { DrainState } from '../plan/index.js';
import type { VipLink } from '../rtnl/vips.js';
import type { Clock } from './runner.js';
import { TableCache } from './table-cache.js';
import { closeListing } from './full-read.js';
import { settledAll } from '../util/settled.js';
import type { Log } from '../util/log.js';
import { PROC_IPVS } from '../ipvs/proc-read.js';

/**
 * The share of syncPeriod a periodic drift check may spend in all (10%); what is left of it after
 * the rest goes to real servers in turn.
 */
const DRIFT_BUDGET = 0.1;

/** What one sync asks to read. */
export interface ReadRequest {
  full: boolean;
  periodic: boolean;
  /** Keys whose desired value changed, and keys due for a retry. */
  changed: ReadonlySet<string>;
  due: ReadonlySet<string>;
  draining: DrainState;
  table: Desired['table'];
  /** When the sync started (ms), the VIP link's name and syncPeriod (ms). */
  t0: number;
  link: string;
  syncPeriodMs: number;
  /** Whether a change is waiting: a drift check then stops reading real servers in turn. */
  changeWaiting: () => boolean;
}

/** The loop's copy of the kernel and the reading that keeps it (see the file comment). */
export class KernelReader {
  readonly cache = new TableCache();
  /** The VIP link's addresses as last read or written; re-read on every full sync, like the table. */
  vipsNow: Set<string> | undefined;
  /**
   * How long the last periodic sync took after its read (ms: what outlasted the read of the
   * iptables check beside it, planning what it re-read, applying): the next drift check's budget
   * keeps room for it. The loop sets it.
   */
  periodicTailMs = 0;
  /** The kernel's listing opened ahead of a full read (openListing), for that read to take. */
  private early: Promise<ListingReader | undefined> | undefined;

  constructor(
    private readonly ipvs: IpvsClient, private readonly vips: VipLink, private readonly clock: Clock,
    private readonly log: Log = () => {},
  ) {}

  /**
   * Opens the kernel's listing for the next full read, so that its thread reads the kernel while
   * this one builds the desired state. One left by a sync that failed before its read is closed.
   */
  openListing(): void {
    void closeListing(this.takeListing());
    this.early = this.ipvs.listing?.().catch(() => undefined);
  }

  /** The listing openListing opened, now the caller's to read and close. */
  private takeListing(): Promise<ListingReader | undefined> | undefined {
    const early = this.early;
    this.early = undefined;
    return early;
  }

  /** Reads what the request needs; resolves with the keys re-read beyond what changed (retries, drift), to plan too. */
  async read(r: ReadRequest): Promise<Set<string>> {
    if (r.full) {
      // The link's addresses are listed while the table is read (another socket, another family).
      const [, vips] = await settledAll([
        this.cache.readAll(this.ipvs, () => this.clock.now(), r.table, this.takeListing()), this.vips.list(r.link),
      ]);
      this.vipsNow = new Set(vips);
      const how = this.cache.lastFullRead;
      this.log('info', 'read the whole IPVS table', {
        virtualServers: this.cache.view.size, realServers: this.cache.realServers,
        realServersFrom: !this.cache.view.size ? 'none: no virtual server'
          : how?.listing ? `${PROC_IPVS} and GET_DEST dumps` : 'GET_DEST dumps',
        ...(how ? { listed: how.listed, dumped: how.dumped } : {}),
      });
      return new Set();
    }
    void closeListing(this.takeListing()); // not a full read after all
    if (r.periodic || !this.vipsNow) this.vipsNow = new Set(await this.vips.list(r.link));
    const reread = new Set(r.due);
    await this.cache.refresh(this.ipvs, r.due, r.table);
    if (r.periodic) {
      // The whole check keeps to the budget: what this sync spent before (the VIP link's listing)
      // and what the last periodic sync spent after its read come off the share for real servers.
      const budget = DRIFT_BUDGET * r.syncPeriodMs - (this.clock.now() - r.t0) - this.periodicTailMs;
      const { reread: checked } = await this.cache.verify(
        this.ipvs, Math.max(0, budget), () => this.clock.now(), r.changeWaiting, r.table,
      );
      for (const key of checked) reread.add(key);
    }
    // Draining real servers, and real servers about to go: whether one is drained or deleted
    // depends on the connections the kernel counts now. The cache cannot tell: it holds what we
    // wrote (no counters) or what an earlier read saw, maybe before the traffic came. So they are
    // read, and one that carries no connections is deleted at once rather than drained a sync later.
    const going = [...r.changed].filter((k) => !reread.has(k) && this.losesRealServer(k, r.table));
    await this.cache.readSome(this.ipvs, new Set([...r.draining.keys(), ...going]));
    return reread;
  }

  /** Whether the cache has a real server of `key` that is not desired any more. */
  private losesRealServer(key: string, table: Desired['table']): boolean {
    const have = this.cache.view.get(key);
    const want = table.get(key);
    if (!have || !want || have.dests.size === 0) return false;
    const wanted = new Set(want.dests.map(realServerKey));
    for (const rkey of have.dests.keys()) if (!wanted.has(rkey)) return true;
    return false;
  }
}
