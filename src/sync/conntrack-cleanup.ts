// The operator's conntrack step after a sync: list the families the targets are in, pick the stale
// entries (src/plan/conntrack.ts, pure), delete them. It never throws: a failure is returned, for
// the operator to log; a sync never fails because of conntrack.
import type { Family } from '../model/addr.js';
import { isNotFound } from '../netlink/errors.js';
import { type ConntrackTarget, selectStaleFlows } from '../plan/conntrack.js';
import type { ConntrackClient, ListStats } from '../conntrack/client.js';
import { IPPROTO_UDP } from '../conntrack/constants.js';
import { formatFlow } from '../conntrack/codec.js';

/** What one cleanup did. */
export interface CleanupResult {
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
export async function cleanStaleFlows(client: ConntrackClient, targets: readonly ConntrackTarget[]): Promise<CleanupResult> {
  const result: CleanupResult = { deleted: 0, gone: 0, errors: [], flows: [], lists: [] };
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
