// The conntrack step at the end of a sync: list the families the targets are in, pick the stale
// entries (src/plan/conntrack.ts, pure), delete them. It never throws: a failure is returned, and
// reportCleanup logs and counts it; a sync never fails because of conntrack.
import type { Family } from '../model/addr.js';
import { isNotFound } from '../netlink/errors.js';
import { type ConntrackTarget, selectStaleFlows } from '../plan/conntrack.js';
import type { ConntrackClient, ListStats } from '../conntrack/client.js';
import { IPPROTO_UDP } from '../conntrack/constants.js';
import { formatFlow } from '../conntrack/codec.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Log } from '../util/log.js';

/** What one cleanup did. */
export interface CleanupResult {
  /** The virtual servers looked at. */
  targets: number;
  /** Entries deleted. */
  deleted: number;
  /** Stale entries that were gone before their delete arrived (ENOENT): nothing left to do. */
  gone: number;
  /** What failed (a list, or a delete other than ENOENT), one line each. */
  errors: string[];
  /** The deleted entries, formatFlow lines (for the debug log). */
  flows: string[];
  /** How each family's list ran (kernel-filtered or a full dump) and what it cost. */
  lists: ListStats[];
}

/** Deletes the conntrack entries that still lead the targets' clients to removed real servers. */
export async function cleanStaleFlows(
  client: ConntrackClient, targets: readonly ConntrackTarget[],
): Promise<CleanupResult> {
  const result: CleanupResult = { targets: targets.length, deleted: 0, gone: 0, errors: [], flows: [], lists: [] };
  const families = [...new Set(targets.map((t) => t.family))].sort() as Family[];
  for (const family of families) {
    try {
      // Only UDP entries can be stale here (plan/conntrack.ts): the kernel filters where it can.
      const flows = await client.list(family, IPPROTO_UDP);
      if (client.lastList) result.lists.push(client.lastList);
      const stale = selectStaleFlows(targets, flows);
      if (stale.length === 0) continue;
      const answers = await client.delete(stale);
      answers.forEach((e, i) => {
        if (!e) {
          result.deleted++;
          result.flows.push(formatFlow(stale[i]!));
        } else if (isNotFound(e)) result.gone++;
        else result.errors.push(`${formatFlow(stale[i]!)}: ${e.message}`);
      });
    } catch (e) {
      result.errors.push(`${family}: ${(e as Error).message}`);
    }
  }
  return result;
}

/** Logs and counts what a cleanup did: deletions at info, failures at warn, each list's path and cost at debug. */
export function reportCleanup(r: CleanupResult, log: Log, metrics: Metrics | undefined): void {
  metrics?.kernel.conntrackDeleted.inc(r.deleted);
  // Which path each family's list took (the kernel's CTA_FILTER, or a full dump) and its cost.
  log('debug', 'conntrack listed',
    { lists: r.lists.map((l) => `${l.family} ${l.path}: ${l.messages} entries, ${l.bytes} bytes, ${l.kept} UDP`) });
  if (r.deleted || r.gone) {
    log('info', 'deleted stale UDP conntrack entries',
      { deleted: r.deleted, alreadyGone: r.gone, virtualServers: r.targets, flows: r.flows.slice(0, 10) });
  }
  if (r.errors.length) {
    metrics?.kernel.conntrackFailures.inc(r.errors.length);
    log('warn', 'conntrack cleanup failed; the kernel moves those flows on their next datagram instead',
      { failures: r.errors.length, errors: r.errors.slice(0, 5) });
  }
}
