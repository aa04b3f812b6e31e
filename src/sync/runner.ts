// A bounded-frequency runner, after kube-proxy's BoundedFrequencyRunner: it decides when the sync
// function runs; the sync itself is someone else's. Its whole contract is stated on the class.

/** Time and timers; `realClock` in production, a fake in tests. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The process's clock. A timer due now runs on the loop's next turn (setImmediate), not after
 * setTimeout's 1 ms floor: every sync a change asks for outside minSyncPeriod is due now, and in
 * the lab VM a 0 ms setTimeout took 2.4 ms, a turn 0.3 ms (docs/performance.md). That immediate
 * stays ref'd: an unref'd one does not keep the loop's poll from blocking, so a sync asked for from
 * a timer's callback (a drain's deadline, a retry, a ramp) waited for whatever woke the loop next.
 * It holds the process for one turn at most. Later timers are unref'd (the daemon's servers keep
 * it alive) and still wake the loop when due. The handle is its own cancel.
 */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    if (ms > 0) {
      const t = setTimeout(fn, ms).unref();
      return () => clearTimeout(t);
    }
    const i = setImmediate(fn);
    return () => clearImmediate(i);
  },
  clearTimeout: (h) => (h as () => void)(),
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

/** The runner's one timer: its handle from the clock, and the time it fires at. */
interface TimerSlot {
  handle: unknown;
  at: number;
}

/** The runner's state between calls: what the contract's decisions read. */
interface RunState {
  /** When the last sync started (contract 2 and 3). */
  lastStart: number;
  /** A sync is in progress (contract 2: never two at once). */
  running: boolean;
  /** A sync was asked for since the last one started (contract 1). */
  requested: boolean;
  /** The last sync failed; the next one is its retry (contract 4). */
  retrying: boolean;
  /** After a failure: no sync before this time (contract 4). */
  notBefore: number;
  stopped: boolean;
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
  /** The options with the clock resolved; setIntervals() replaces the intervals. */
  private opts: RunnerOptions & { clock: Clock };
  /** The one armed timer, and when it fires (Infinity: none). */
  private readonly timer: TimerSlot = { handle: undefined, at: Infinity };
  /** Where the runner is between syncs. */
  private readonly state: RunState = {
    lastStart: -Infinity,
    running: false,
    requested: false,
    retrying: false,
    notBefore: -Infinity,
    stopped: true,
  };
  private idle: Promise<void> = Promise.resolve();

  constructor(private readonly fn: (why: SyncReason) => Promise<void>, opts: RunnerOptions) {
    checkIntervals(opts);
    this.opts = { ...opts, clock: opts.clock ?? realClock };
  }

  /** New intervals (a configuration change); the next periodic sync is re-armed with them. */
  setIntervals(i: Pick<RunnerOptions, 'minIntervalMs' | 'maxIntervalMs' | 'retryIntervalMs'>): void {
    checkIntervals(i);
    this.opts = { ...this.opts, ...i };
    const st = this.state;
    if (st.stopped || st.running) return;
    this.cancel();
    const now = this.opts.clock.now();
    if (st.requested || st.retrying) this.schedule(Math.max(now, st.lastStart + i.minIntervalMs, st.notBefore));
    this.schedule(Math.max(now, st.lastStart + i.maxIntervalMs));
  }

  /** Starts the periodic timer and runs a first sync as soon as allowed. */
  start(): void {
    this.state.stopped = false;
    this.run();
  }

  /** Asks for a sync (contract 1 and 2). */
  run(): void {
    const st = this.state;
    if (st.stopped) return;
    st.requested = true;
    if (!st.running) {
      this.schedule(Math.max(this.opts.clock.now(), st.lastStart + this.opts.minIntervalMs, st.notBefore));
    }
  }

  /** Stops timers; resolves when a sync in progress has ended. */
  async stop(): Promise<void> {
    this.state.stopped = true;
    this.cancel();
    await this.idle;
  }

  private cancel(): void {
    if (this.timer.handle !== undefined) this.opts.clock.clearTimeout(this.timer.handle);
    this.timer.handle = undefined;
    this.timer.at = Infinity;
  }

  /** Arms the timer for `at` unless it already fires earlier. */
  private schedule(at: number): void {
    if (this.state.stopped || at >= this.timer.at) return;
    this.cancel();
    this.timer.at = at;
    this.timer.handle = this.opts.clock.setTimeout(() => this.fire(), Math.max(0, at - this.opts.clock.now()));
  }

  private fire(): void {
    const st = this.state;
    this.timer.handle = undefined;
    this.timer.at = Infinity;
    if (st.stopped || st.running) return;
    const why: SyncReason = { periodic: !st.requested && !st.retrying, retry: st.retrying };
    st.requested = false;
    st.retrying = false;
    st.notBefore = -Infinity;
    st.running = true;
    st.lastStart = this.opts.clock.now();
    this.idle = this.fn(why).then(
      () => this.finish(false),
      (err: unknown) => {
        this.opts.onError?.(err);
        this.finish(true);
      },
    );
  }

  private finish(failed: boolean): void {
    const st = this.state;
    st.running = false;
    if (st.stopped) return;
    const now = this.opts.clock.now();
    const earliest = st.lastStart + this.opts.minIntervalMs;
    if (failed) {
      st.retrying = true;
      st.notBefore = Math.max(now + this.opts.retryIntervalMs, earliest);
      this.schedule(st.notBefore);
    } else if (st.requested) {
      this.schedule(Math.max(now, earliest));
    }
    this.schedule(Math.max(now + this.opts.maxIntervalMs, st.notBefore));
  }
}
