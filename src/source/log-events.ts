// The EventSink of the files mode: there is no API server to post Events to, so problems become
// log lines, deduplicated like Events are.
import type { Problem } from '../desired/types.js';
import { ProblemDedup } from './dedup.js';
import type { Log } from '../util/log.js';
import type { EventSink, ServiceRef } from './types.js';

/** Logs each problem once (at warn) while it persists; a problem that goes away and comes back is logged again. */
export class LogEventSink implements EventSink {
  private readonly dedup = new ProblemDedup();

  constructor(private readonly log: Log) {}

  async report(problems: readonly Problem[], _services: ReadonlyMap<string, ServiceRef>): Promise<void> {
    for (const p of this.dedup.fresh(problems)) {
      this.log('warn', p.message, { reason: p.reason, object: p.service ? `Service ${p.service}` : 'configuration' });
      this.dedup.markPosted(p);
    }
  }
}
