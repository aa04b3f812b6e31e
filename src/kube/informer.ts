// An informer that does not stay down. client-node's ListWatch (1.4.0, cache.js) lists, then
// watches from the list's resourceVersion, and on its own:
// - reconnects the watch from the last resourceVersion seen when the server ends the stream;
// - relists on 410 Gone, both as an HTTP 410 answer to the watch and as a watch ERROR event
//   with code 410 (the real server's way), emitting deletes for objects the new list lacks;
// - but on any other failure (connection refused or reset, 5xx, a failed list) emits 'error'
//   and stops for good.
// So here an 'error' schedules `start()` again with exponential backoff. Restarting keeps the
// last resourceVersion: the watch resumes where it was, replaying what happened meanwhile
// (deletes included); when that history is gone the server answers 410 and a fresh list is
// diffed against the cache. While down nothing is emitted, so the kernel stays as it is.
import type { Informer, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { LogFn } from '../source/log.js';

/** Delays between restarts: initialMs, doubling up to maxMs, each varied by ±jitter/2 (spreads many nodes' reconnects). */
export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** 0..1; 0 for exact delays. */
  jitter: number;
}

export const defaultBackoff: Backoff = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };

/** The n-th (0-based) delay of a backoff. */
export function backoffDelay(b: Backoff, n: number, random: () => number = Math.random): number {
  const base = Math.min(b.maxMs, b.initialMs * 2 ** Math.min(n, 30));
  return Math.round(base * (1 + b.jitter * (random() - 0.5)));
}

/** The HTTP status of a client-node error (ApiException.code, Watch's statusCode), if any. */
export function httpStatus(e: unknown): number | undefined {
  const o = e as { code?: unknown; statusCode?: unknown } | undefined;
  if (typeof o?.code === 'number') return o.code;
  if (typeof o?.statusCode === 'number') return o.statusCode;
  return undefined;
}

export interface InformerHandlers<T> {
  upsert(obj: T): void;
  delete(obj: T): void;
}

/** A ListWatch kept running: restarted with backoff whenever it stops on an error. */
export class RestartingInformer<T extends KubernetesObject> {
  private isUp = false;
  /** The resource does not exist on the server (404, e.g. a CRD not installed); see `optional`. */
  private isAbsent = false;
  private failures = 0;
  private failedNow = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private firstSync: { promise: Promise<void>; resolve: () => void };

  /**
   * `optional`: a 404 from the server counts as "no objects" for `synced`/`up` (retrying at the
   * longest backoff in case the resource appears), instead of as the informer being down.
   */
  constructor(
    readonly name: string,
    private readonly informer: Informer<T> & ObjectCache<T>,
    handlers: InformerHandlers<T>,
    private readonly log: LogFn,
    private readonly backoff: Backoff,
    private readonly optional = false,
  ) {
    let resolve!: () => void;
    this.firstSync = { promise: new Promise<void>((r) => (resolve = r)), resolve };
    informer.on('add', (o) => this.stopped || handlers.upsert(o));
    informer.on('update', (o) => this.stopped || handlers.upsert(o));
    informer.on('delete', (o) => this.stopped || handlers.delete(o));
    informer.on('error', (e) => this.failed(e));
  }

  /** Listing and watching (or, when optional, known to be absent). */
  get up(): boolean {
    return this.isUp || this.isAbsent;
  }

  /** Starts; `synced()` resolves after the first successful list. */
  start(): void {
    this.stopped = false;
    void this.attempt();
  }

  /** Resolves once the first list was delivered (or the optional resource was found absent). */
  synced(): Promise<void> {
    return this.firstSync.promise;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.isUp = false;
    clearTimeout(this.timer);
    this.firstSync.resolve(); // a start() waiting for the first list returns
    await this.informer.stop();
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    this.failedNow = false;
    // ListWatch.start resolves once the watch request is answered; a failure on the way has
    // already called the 'error' handler by then.
    try {
      await this.informer.start();
    } catch (e) {
      this.failed(e);
    }
    if (this.failedNow || this.stopped) return;
    if (this.failures > 0 || this.isAbsent) this.log('info', 'watching again', { informer: this.name });
    this.isUp = true;
    this.isAbsent = false;
    this.failures = 0;
    this.firstSync.resolve();
  }

  private failed(e: unknown): void {
    if (this.stopped) return; // stop() aborts the watch request, which ends in an error
    this.failedNow = true;
    this.isUp = false;
    const status = httpStatus(e);
    if (this.optional && status === 404) {
      if (!this.isAbsent) this.log('warn', 'resource not served (CRD not installed?); retrying', { informer: this.name });
      this.isAbsent = true;
      this.firstSync.resolve();
      this.retryIn(this.backoff.maxMs);
      return;
    }
    const delay = backoffDelay(this.backoff, this.failures++);
    this.log(this.failures === 1 ? 'warn' : 'debug', 'list/watch failed; retrying', {
      informer: this.name, error: (e as Error)?.message?.split('\n')[0] ?? String(e), status, retryInMs: delay, attempt: this.failures,
    });
    this.retryIn(delay);
  }

  private retryIn(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.attempt(), ms);
  }
}
