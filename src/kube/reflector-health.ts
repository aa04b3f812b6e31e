// One reflector's health: up, absent (an optional resource not served) or down with its last
// error; how long to wait after a failure (capped backoff with jitter, a 429's Retry-After); each
// failure logged once until it changes, malformed input once a minute per reason. The Reflector
// (reflector.ts) reports each step of its loop here.
import type { Log } from '../util/log.js';
import { type Backoff, type Healing, backoffDelay, describeError, httpStatus, retryAfterMs } from './informer.js';
import { WatchStalledError } from './watch-stream.js';

const MALFORMED_LOG_MS = 60_000;

/** The reflector's options the health reads (read on each use, as the reflector did). */
export interface HealthOptions {
  name: string;
  log: Log;
  healing: Healing;
  optional?: boolean;
  onChange?: () => void;
  onMalformed?: (resource: string, reason: string) => void;
}

/** What else the health needs from its reflector. */
export interface HealthHooks {
  random: () => number;
  now: () => number;
  /** An absent optional resource counts as synced. */
  firstSynced: () => void;
}

/** Tracks and logs one reflector's health (see the file comment). */
export class ReflectorHealth {
  private isUp = false;
  private isAbsent = false;
  private lastError: string | undefined;
  private lastLogged: string | undefined;
  private failures = 0;
  private readonly malformedLogged = new Map<string, number>();

  constructor(private readonly o: HealthOptions, private readonly h: HealthHooks) {}

  /** Listing and watching (or, when optional, known to be absent). */
  get up(): boolean {
    return this.isUp || this.isAbsent;
  }

  /** Why not up: "<name>: <the last error>"; undefined while up. */
  get reason(): string | undefined {
    return this.up ? undefined : `${this.o.name}: ${this.lastError ?? 'no answer yet'}`;
  }

  /** The reflector stopped: not up any more. */
  stopped(): void {
    this.isUp = false;
  }

  /** Progress (a list, a watch event or bookmark): up again. */
  progressed(): void {
    if (this.isUp && !this.isAbsent) return;
    if (this.failures > 0 || this.isAbsent) {
      this.o.log('info', 'watching again', { informer: this.o.name, after: this.lastError });
    }
    this.isUp = true;
    this.isAbsent = false;
    this.failures = 0;
    this.lastError = undefined;
    this.lastLogged = undefined;
    this.o.onChange?.();
  }

  /** Marks the resource down, logs, and returns how long to wait. */
  failed(e: unknown): number {
    const status = httpStatus(e);
    if (this.o.optional && status === 404) {
      if (!this.isAbsent) {
        this.o.log('warn', 'resource not served (CRD not installed?); retrying', { informer: this.o.name });
      }
      this.isAbsent = true;
      this.isUp = false;
      this.lastError = undefined;
      this.h.firstSynced();
      this.o.onChange?.();
      return this.o.healing.backoff.maxMs;
    }
    this.isUp = false;
    this.isAbsent = false;
    const error = describeError(e);
    this.lastError = error;
    const b: Backoff = this.o.healing.backoff;
    const backoff = backoffDelay(b, this.failures++, this.h.random);
    const after = retryAfterMs(e);
    const delay = after === undefined ? backoff : Math.max(backoff, Math.min(after, this.o.healing.maxRetryAfterMs));
    const hint = status === 401 ? ' (credentials refused)' : status === 403 ? ' (forbidden: check the RBAC rules)' : '';
    const repeat = this.lastLogged === error && !(e instanceof WatchStalledError);
    const level = repeat ? 'debug' : status === 401 || status === 403 ? 'error' : 'warn';
    this.o.log(level, `list/watch of ${this.o.name} failed: ${error}${hint}; retrying`, {
      informer: this.o.name, error, status, retryInMs: delay, ...(after !== undefined ? { retryAfterMs: after } : {}),
      attempt: this.failures,
    });
    this.lastLogged = error;
    this.o.onChange?.();
    return delay;
  }

  /** A skipped watch line or list item: counted, and logged once a minute per reason. */
  malformed(reason: string): void {
    this.o.onMalformed?.(this.o.name, reason);
    const now = this.h.now();
    const last = this.malformedLogged.get(reason);
    if (last !== undefined && now - last < MALFORMED_LOG_MS) return;
    this.malformedLogged.set(reason, now);
    this.o.log('warn', `skipped a malformed ${reason} from the API server`, { informer: this.o.name, reason });
  }
}
