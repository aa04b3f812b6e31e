// The sync loop's clock, runner and the two timers that ask it for a sync: a drain's deadline and
// the next retry of refused ops.
import type { ProxyConfig } from '../config/types.js';
import { BoundedFrequencyRunner, type Clock, type RunnerOptions, type SyncReason } from './runner.js';

/** The runner's intervals for a configuration (a failed sync is retried after minSyncPeriod, at least 1 s). */
export function intervals(c: ProxyConfig): { minIntervalMs: number; maxIntervalMs: number; retryIntervalMs: number } {
  const min = c.minSyncPeriod * 1000;
  return { minIntervalMs: min, maxIntervalMs: c.syncPeriod * 1000, retryIntervalMs: Math.max(1000, min) };
}

/** The runner and the timers that poke it. */
export class SyncTimers {
  readonly runner: BoundedFrequencyRunner;
  private deadlineTimer: unknown;
  private retryTimer: unknown;

  constructor(sync: (why: SyncReason) => Promise<void>, options: RunnerOptions, readonly clock: Clock) {
    this.runner = new BoundedFrequencyRunner(sync, options);
  }

  /** Asks for a sync at the earliest of `deadlines`: a drain's grace period, a ramp's next step, a cluster view. */
  armDeadline(...deadlines: Array<number | undefined>): void {
    if (this.deadlineTimer !== undefined) this.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    const set = deadlines.filter((d): d is number => d !== undefined);
    if (!set.length) return;
    const deadline = Math.min(...set);
    this.deadlineTimer = this.clock.setTimeout(() => this.runner.run(), Math.max(0, deadline - this.clock.now()));
  }

  /** Asks for a sync when the next refused op is due again; none: no timer. */
  armRetry(next: number | undefined): void {
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = next === undefined
      ? undefined
      : this.clock.setTimeout(() => this.runner.run(), Math.max(0, next - this.clock.now()));
  }

  /** Clears both timers and stops the runner; resolves when a sync in progress ended. */
  async stop(): Promise<void> {
    for (const t of [this.deadlineTimer, this.retryTimer]) if (t !== undefined) this.clock.clearTimeout(t);
    await this.runner.stop();
  }
}
