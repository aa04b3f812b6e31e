// A bounded-frequency runner, after kube-proxy's BoundedFrequencyRunner: it decides when the sync
// function runs; the sync itself is someone else's. Its whole contract is stated on the class.

/** Time and timers; `realClock` in production, a fake in tests. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process's clock. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** What the sync function is told about why it runs. */
export interface SyncReason {
  /** True when the periodic timer, not a request, caused this sync. */
  periodic: boolean;
  /** True when this is a retry after a failed sync. */
  retry: boolean;
}

export interface RunnerOptions {
  minIntervalMs: number;
  maxIntervalMs: number;
  retryIntervalMs: number;
  clock?: Clock;
  /** Called with a sync's error (the runner retries; it does not rethrow). */
  onError?: (err: unknown) => void;
}

function checkIntervals(o: Pick<RunnerOptions, 'minIntervalMs' | 'maxIntervalMs' | 'retryIntervalMs'>): void {
  if (!(o.minIntervalMs >= 0 && o.maxIntervalMs >= o.minIntervalMs && o.retryIntervalMs >= 0)) {
    throw new Error(`runner: need 0 <= minInterval <= maxInterval and retryInterval >= 0, got ${JSON.stringify(o)}`);
  }
}

/**
 * Runs `fn` under this contract:
 *   1. run() asks for a sync. Requests coalesce: any number of them before the next sync start
 *      cause one sync.
 *   2. Two syncs never start less than `minIntervalMs` apart, and never overlap.
 *   3. At most `maxIntervalMs` passes between the end of one sync and the start of the next,
 *      even without requests (the periodic full resync repairs drift).
 *   4. A sync that throws is retried after `retryIntervalMs` (still subject to 2), however many
 *      requests came meanwhile.
 * The clock is injected, so tests drive time explicitly.
 */
export class BoundedFrequencyRunner {
  private readonly clock: Clock;
  private timer: unknown;
  private timerAt = Infinity;
  private lastStart = -Infinity;
  private running = false;
  private requested = false;
  private retrying = false;
  /** After a failure: no sync before this time (contract 4). */
  private notBefore = -Infinity;
  private stopped = true;
  private idle: Promise<void> = Promise.resolve();

  private opts: RunnerOptions;

  constructor(private readonly fn: (why: SyncReason) => Promise<void>, opts: RunnerOptions) {
    checkIntervals(opts);
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
  }

  /** New intervals (a configuration change); the next periodic sync is re-armed with them. */
  setIntervals(i: Pick<RunnerOptions, 'minIntervalMs' | 'maxIntervalMs' | 'retryIntervalMs'>): void {
    checkIntervals(i);
    this.opts = { ...this.opts, ...i };
    if (this.stopped || this.running) return;
    this.cancel();
    const now = this.clock.now();
    if (this.requested || this.retrying) this.schedule(Math.max(now, this.lastStart + i.minIntervalMs, this.notBefore));
    this.schedule(Math.max(now, this.lastStart + i.maxIntervalMs));
  }

  /** Starts the periodic timer and runs a first sync as soon as allowed. */
  start(): void {
    this.stopped = false;
    this.run();
  }

  /** Asks for a sync (contract 1 and 2). */
  run(): void {
    if (this.stopped) return;
    this.requested = true;
    if (!this.running) {
      this.schedule(Math.max(this.clock.now(), this.lastStart + this.opts.minIntervalMs, this.notBefore));
    }
  }

  /** Stops timers; resolves when a sync in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancel();
    await this.idle;
  }

  private cancel(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  /** Arms the timer for `at` unless it already fires earlier. */
  private schedule(at: number): void {
    if (this.stopped || at >= this.timerAt) return;
    this.cancel();
    this.timerAt = at;
    this.timer = this.clock.setTimeout(() => this.fire(), Math.max(0, at - this.clock.now()));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.stopped || this.running) return;
    const why: SyncReason = { periodic: !this.requested && !this.retrying, retry: this.retrying };
    this.requested = false;
    this.retrying = false;
    this.notBefore = -Infinity;
    this.running = true;
    this.lastStart = this.clock.now();
    this.idle = this.fn(why).then(
      () => this.finish(false),
      (err: unknown) => {
        this.opts.onError?.(err);
        this.finish(true);
      },
    );
  }

  private finish(failed: boolean): void {
    this.running = false;
    if (this.stopped) return;
    const now = this.clock.now();
    const earliest = this.lastStart + this.opts.minIntervalMs;
    if (failed) {
      this.retrying = true;
      this.notBefore = Math.max(now + this.opts.retryIntervalMs, earliest);
      this.schedule(this.notBefore);
    } else if (this.requested) {
      this.schedule(Math.max(now, earliest));
    }
    this.schedule(Math.max(now + this.opts.maxIntervalMs, this.notBefore));
  }
}
