// What the sync loop keeps between syncs, grouped: what a sync carries to the next (SyncCarry) and
// how the syncs went (SyncProgress, for health, status and metrics).
import type { Problem } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { DrainState } from '../plan/index.js';
import type { RetryState } from '../plan/retry.js';
import type { OwnershipRecord } from './record.js';
import { RecordKeeper } from './record-keeper.js';
import type { SyncReport } from './operator-types.js';
import type { Log } from '../util/log.js';

/** What the VIP link and the iptables path were last made to match (planSync's `applied`). */
export interface Applied {
  vips?: number;
  iptables?: { sets: number; config: ProxyConfig };
}

/** What one sync hands the next: drains, applied paths, retries, the record, edge problems. */
export class SyncCarry {
  draining: DrainState = new Map();
  applied: Applied = {};
  retries: RetryState = new Map();
  /** Periodic iptables checks put off in a row because a change was waiting (iptables-check.ts). */
  checksDeferred = 0;
  /** Problems afterSync returned last. */
  edgeProblems: readonly Problem[] = [];
  /** The ownership record (record-keeper.ts). */
  readonly record: RecordKeeper;

  constructor(record: OwnershipRecord, log: Log) {
    this.record = new RecordKeeper(record, log);
  }
}

/** How the syncs went: what is pending, failing, and the last report. */
export class SyncProgress {
  /** Whether the next sync reads the kernel in full. */
  needFull = true;
  pendingSince: number | undefined;
  failingSince: number | undefined;
  everSynced = false;
  failedInARow = 0;
  /** Report of the last sync; undefined before the first. */
  last: SyncReport | undefined;
}
