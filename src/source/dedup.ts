// Deduplication of problems turned into Events or log lines: a problem is posted when it appears,
// not on every sync that still finds it; once it is gone it is forgotten, so if it comes back it
// is posted again. pure: no I/O.
import type { Problem } from '../desired/types.js';

/** The identity of a posted problem: the object it is about, its reason and its message. */
export function problemKey(p: Problem): string {
  return `${p.service}\u0000${p.reason}\u0000${p.message}`;
}

/** Remembers which problems were posted. */
export class ProblemDedup {
  private posted = new Set<string>();

  /**
   * The problems of `current` not posted yet (each once, in order); problems posted before and
   * absent from `current` are forgotten. Call `markPosted` for the ones that were delivered.
   */
  fresh(current: readonly Problem[]): Problem[] {
    const now = new Set(current.map(problemKey));
    for (const k of this.posted) if (!now.has(k)) this.posted.delete(k);
    const seen = new Set<string>();
    return current.filter((p) => {
      const k = problemKey(p);
      if (this.posted.has(k) || seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  }

  /** Records a problem as delivered (an undelivered one is offered again by the next `fresh`). */
  markPosted(p: Problem): void {
    this.posted.add(problemKey(p));
  }
}
