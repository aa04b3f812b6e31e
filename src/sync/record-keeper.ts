// The ownership record as the sync loop keeps it between syncs: loaded from its store on the
// first sync, replaced by what a sync settled (plan/settle.ts: the plan's record delta applied to
// the kernel's answers), and saved only when it changed. What goes in it is plan/ownership.ts's
// planRecord; where it is kept, record.ts's.
import type { Log } from '../util/log.js';
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
    if (!this.recorded) {
      this.log('info', 'no ownership record yet: until one is written, only virtual servers on the VIP link\'s '
        + 'addresses count as ours');
    }
  }

  /**
   * Takes the record a sync settled (undefined: unchanged) and saves it when it differs from the
   * last one saved, or when the last save failed.
   */
  async update(next: Set<string> | undefined): Promise<void> {
    const record = next ?? this.recorded;
    if (!record) return;
    const before = this.recorded;
    const same = !next || (before !== undefined && next.size === before.size && [...next].every((k) => before.has(k)));
    this.recorded = record;
    if (same && !this.dirty) return;
    try {
      await this.store.save(record);
      this.dirty = false;
    } catch (e) {
      this.dirty = true;
      this.log('warn', 'saving the ownership record failed; retrying next sync', { error: (e as Error).message });
    }
  }
}
