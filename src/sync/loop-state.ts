// What the sync loop keeps between syncs, grouped: what a sync carries to the next (SyncCarry) and
// how the syncs went (SyncProgress, for health, status and metrics).
import type { Problem } from '../desired/types.js';
import type { DrainState } from '../plan/index.js';
import type { RetryState } from '../plan/retry.js';
import type { OwnershipRecord } from './record.js';
import { RecordKeeper } from './record-keeper.js';
import { PeriodicIptablesCheck, PeriodicVipCheck } from './iptables-check.js';
import type { Applied, SyncReport } from './operator-types.js';
import type { KernelReader } from './kernel-read.js';
import type { SyncInput } from '../plan/sync.js';
import type { Log } from '../util/log.js';

/** What one sync hands the next: drains, applied paths, retries, the record, edge problems. */
export class SyncCarry {
  draining: DrainState = new Map();
  applied: Applied = {};
  retries: RetryState = new Map();
  /** The periodic iptables check, and how many were put off in a row (iptables-check.ts). */
  readonly iptablesCheck = new PeriodicIptablesCheck();
  /** Whether a periodic sync compares the VIP link, and how many were put off in a row. */
  readonly vipCheck = new PeriodicVipCheck();
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

/**
 * planSync's input: what the caller says this plan is for, the rest from what the loop carries
 * and its copy of the kernel. One builder for the sync and its rehearsal (rehearsal.ts), so a
 * field added to the carry reaches both.
 */
export function syncInput(
  carry: SyncCarry, copy: Pick<KernelReader, 'cache' | 'vipsNow'>,
  what: Pick<SyncInput, 'now' | 'full' | 'changed' | 'reread' | 'desired' | 'versions' | 'config'>,
): SyncInput {
  return {
    ...what, actual: copy.cache.view, vipsNow: copy.vipsNow!, draining: carry.draining, applied: carry.applied,
    ...(carry.record.keys ? { recorded: carry.record.keys } : {}), retries: carry.retries,
  };
}
