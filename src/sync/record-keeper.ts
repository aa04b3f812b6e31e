// The ownership record as the sync loop keeps it between syncs: loaded from its store on the
// first sync, brought up to date after a sync that created or deleted virtual servers (or read the
// whole table), and saved only when it changed. What goes in it is plan/ownership.ts's
// updateRecord; where it is kept, record.ts's.
import type { Desired } from '../desired/types.js';
import { virtualServerKey } from '../model/ipvs.js';
import { updateRecord } from '../plan/index.js';
import type { SyncPlan } from '../plan/sync.js';
import type { Log } from '../util/log.js';
import type { OpFailure } from './executor.js';
import type { OwnershipRecord } from './record.js';

/** The loop's copy of the ownership record; a failed save is logged and retried next sync. */
export class RecordKeeper {
  /** As last loaded or saved; undefined before it is read, or when none exists. */
  private recorded: Set<string> | undefined;
  private read = false;
  /** The record in memory differs from the one saved (a save failed). */
  private dirty = false;

  constructor(private readonly store: OwnershipRecord, private readonly log: Log) {}

  /** The recorded keys (planSync's `recorded`); undefined before load() or when there is no record. */
  get keys(): ReadonlySet<string> | undefined {
    return this.recorded;
  }

  /** Reads the store once; later calls do nothing. A store that rejects rejects (the sync fails and is retried). */
  async load(): Promise<void> {
    if (this.read) return;
    this.recorded = await this.store.load();
    this.read = true;
    if (!this.recorded) this.log('info', 'no ownership record yet: until one is written, only virtual servers on the VIP link\'s addresses count as ours');
  }

  /**
   * Brings the record up to date after a sync that created or deleted virtual servers (or read
   * the whole table) and saves it when it changed; `present` is the kernel's keys after the sync.
   */
  async update(plan: SyncPlan, failures: readonly OpFailure[], desired: Desired, present: () => Iterable<string>): Promise<void> {
    const touches = plan.ops.some((op) => op.kind === 'add-service' || op.kind === 'delete-service');
    if (!plan.full && !touches && !this.dirty && this.recorded) return;
    const refused = new Set(failures.map((f) => f.op));
    const next = updateRecord(this.recorded ?? new Set(), {
      full: plan.full,
      applied: plan.ops.filter((op) => !refused.has(op)),
      desired: plan.full ? desired.table.keys() : plan.ops.map((op) => virtualServerKey(op.vs)).filter((k) => desired.table.has(k)),
      present: new Set(present()),
    });
    const same = this.recorded !== undefined && next.size === this.recorded.size && [...next].every((k) => this.recorded!.has(k));
    this.recorded = next;
    if (same && !this.dirty) return;
    try {
      await this.store.save(next);
      this.dirty = false;
    } catch (e) {
      this.dirty = true;
      this.log('warn', 'saving the ownership record failed; retrying next sync', { error: (e as Error).message });
    }
  }
}
