// An informer that does not stay down and does not drift. client-node's ListWatch (1.4.0,
// cache.js) lists, then watches from the list's resourceVersion, and on its own:
// - reconnects the watch from the last resourceVersion seen when the server ends the stream;
// - relists on 410 Gone, both as an HTTP 410 answer to the watch and as a watch ERROR event
//   with code 410 (the real server's way), emitting deletes for objects the new list lacks;
// - drops a watch line that is not JSON without a word (watch.js), so that event is lost;
// - but on any other failure (connection refused or reset, 401/403/429/5xx, a failed list) emits
//   'error' and stops for good.
// So here:
// - an 'error' schedules `start()` again with exponential backoff (a 429's Retry-After is
//   honoured when longer). Restarting keeps the last resourceVersion: the watch resumes where it
//   was, replaying what happened meanwhile (deletes included); when that history is gone the
//   server answers 410 and a fresh list is diffed against the cache. While down nothing is emitted.
// - HealingWatch (a Watch, passed to ListWatch) asks the server to end each watch after
//   `watchTimeoutSeconds` with bookmarks on, and ends a watch that sent nothing for `idleMs`
//   (a stalled connection) as an error, so it is restarted.
// - every `relistMs` (jittered) the open watch is ended the way client-node's Watch reports an
//   HTTP 410, so ListWatch relists and diffs its cache: an event lost to a malformed line (or any
//   other drift) is repaired, with adds/updates/deletes only for what really differs.
import { STATUS_CODES } from 'node:http';
// Watch from its own module: client-node's index (and its generated API classes) is not loaded.
import { Watch } from '@kubernetes/client-node/dist/watch.js';
import type { Informer, KubeConfig, KubernetesListObject, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { FetchConfig } from './client.js';
import type { LogFn } from '../source/log.js';
import { trimsEvent } from './trim.js';

/** Delays between restarts: initialMs, doubling up to maxMs, each varied by ±jitter/2 (spreads many nodes' reconnects). */
export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** 0..1; 0 for exact delays. */
  jitter: number;
}

export const defaultBackoff: Backoff = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };

/** How an informer heals itself; production defaults in `defaultHealing`. */
export interface Healing {
  backoff: Backoff;
  /** Periodic relist interval (varied by ±backoff.jitter/2); 0 turns it off. */
  relistMs: number;
  /** A watch that sends nothing (no event, no bookmark) for this long is ended and restarted; 0 turns it off. */
  idleMs: number;
  /** Asked of the server (timeoutSeconds): it ends each watch cleanly after this, and ListWatch re-watches. */
  watchTimeoutSeconds: number;
  /** A 429's Retry-After is honoured up to this. */
  maxRetryAfterMs: number;
}

/** Relist every 5 min (±10 %), restart a watch silent for 6 min, ask the server to end watches after 5 min, Retry-After up to 5 min. */
export const defaultHealing: Healing = { backoff: defaultBackoff, relistMs: 300_000, idleMs: 360_000, watchTimeoutSeconds: 300, maxRetryAfterMs: 300_000 };

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

/** A 429/503 answer's Retry-After in ms (client-node's ApiException keeps the headers), if any. */
export function retryAfterMs(e: unknown): number | undefined {
  const headers = (e as { headers?: unknown } | undefined)?.headers;
  if (!headers || typeof headers !== 'object') return undefined;
  const entry = Object.entries(headers as Record<string, unknown>).find(([k]) => k.toLowerCase() === 'retry-after');
  const seconds = Number(entry?.[1]);
  return entry && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** "403 Forbidden: <the Status message>" for API errors, the first line of the message otherwise. */
export function describeError(e: unknown): string {
  const status = httpStatus(e);
  if (status === undefined) return firstLine(e);
  const body = (e as { body?: unknown }).body;
  let message: unknown;
  try {
    message = (typeof body === 'string' ? (JSON.parse(body) as { message?: unknown }) : (body as { message?: unknown } | undefined))?.message;
  } catch { /* a body that is not JSON */ }
  return `${status} ${STATUS_CODES[status] ?? 'Error'}${typeof message === 'string' && message ? `: ${message}` : ''}`;
}

/** The first line of an error's message (client-node's ApiException messages carry headers after it). */
export function firstLine(e: unknown): string {
  return ((e as Error)?.message ?? String(e)).split('\n')[0] ?? '';
}

/** `p`, or a rejection "<what> did not answer within N s" after `ms` (the request itself is not cancelled). */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} did not answer within ${ms / 1000} s`), { timedOut: true })), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
    p.catch(() => undefined); // a failure after the timeout is not an unhandled rejection
  }
}

/** What kind of failure an API call met, to log each kind once: the HTTP status, "timeout", or the network error code. */
export function failureKind(e: unknown): string {
  const status = httpStatus(e);
  if (status !== undefined) return String(status);
  if ((e as { timedOut?: unknown })?.timedOut) return 'timeout';
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' ? code : firstLine(e);
}

/** Logs a failure once per kind (warn), repeats at debug, and one info line when calls succeed again. */
export class FailureLog {
  private readonly seen = new Set<string>();

  constructor(private readonly log: LogFn, private readonly what: string) {}

  failed(e: unknown, fields: Record<string, unknown> = {}): void {
    const kind = failureKind(e);
    const first = !this.seen.has(kind);
    this.seen.add(kind);
    this.log(first ? 'warn' : 'debug', `${this.what} failed: ${describeError(e)}; will retry`, { ...fields, error: describeError(e), kind });
  }

  succeeded(): void {
    if (this.seen.size === 0) return;
    this.seen.clear();
    this.log('info', `${this.what} works again`);
  }
}

/** A watch that sent nothing for the idle timeout: the connection is presumed dead. */
export class WatchStalledError extends Error {
  constructor(readonly idleMs: number) {
    super(`watch stalled (no data for ${idleMs} ms)`);
  }
}

type WatchCallback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;
type DoneCallback = (err: unknown) => void;

/**
 * client-node's Watch with an idle timeout, a server-side timeout and bookmarks, and a way to end
 * the open watch as if the server had answered 410 (ListWatch then relists). `trim` (trim.ts)
 * replaces each event's object before ListWatch caches it.
 */
export class HealingWatch extends Watch {
  private active: ((err: unknown) => void) | undefined;
  private readonly live = new Set<AbortController>();

  constructor(kc: FetchConfig, private readonly idleMs: number, private readonly timeoutSeconds: number,
    private readonly trim?: (o: unknown) => unknown) {
    super(kc as KubeConfig); // Watch calls only getCurrentCluster and applyToFetchOptions
  }

  override async watch(path: string, queryParams: Record<string, unknown>, callback: WatchCallback, done: DoneCallback): Promise<AbortController> {
    let finished = false;
    let idle: NodeJS.Timeout | undefined;
    const open: { controller?: AbortController } = {};
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      clearTimeout(idle);
      if (this.active === finish) this.active = undefined;
      if (open.controller) {
        this.live.delete(open.controller);
        open.controller.abort();
      }
      done(err);
    };
    const arm = () => {
      if (this.idleMs <= 0) return;
      clearTimeout(idle);
      idle = setTimeout(() => finish(new WatchStalledError(this.idleMs)), this.idleMs);
      idle.unref?.(); // never what keeps a stopping process alive
    };
    this.active = finish;
    arm();
    const query = { ...queryParams, allowWatchBookmarks: true, ...(this.timeoutSeconds > 0 ? { timeoutSeconds: this.timeoutSeconds } : {}) };
    const controller = await super.watch(path, query, (phase, obj, raw) => {
      if (finished) return;
      arm();
      callback(phase, this.trim && trimsEvent(phase) ? this.trim(obj) : obj, raw);
    }, finish);
    open.controller = controller;
    if (finished) controller.abort();
    else this.live.add(controller);
    return controller;
  }

  /** Ends the open watch as an HTTP 410 would (ListWatch relists); false when none is open. */
  relist(): boolean {
    const finish = this.active;
    if (!finish) return false;
    finish(Object.assign(new Error('periodic relist'), { statusCode: 410 }));
    return true;
  }

  /** Aborts every watch still open (a stop racing a reconnect can leave ListWatch holding an older one). */
  abortAll(): void {
    this.active = undefined;
    for (const c of this.live) c.abort();
    this.live.clear();
  }
}

/**
 * Lists every page (`limit` per request, following `continue`): the items of all pages with the
 * first page's resourceVersion (a continued list is a snapshot at it).
 */
export async function listAllPages<T extends KubernetesObject>(
  page: (cont: string | undefined) => Promise<KubernetesListObject<T>>,
): Promise<KubernetesListObject<T>> {
  // Plain JSON lists (client.ts): the token is `continue` (client-node's typed lists called it `_continue`).
  const next = (l: KubernetesListObject<T>) => (l.metadata as { continue?: string } | undefined)?.continue;
  const first = await page(undefined);
  const items = [...first.items];
  let cont = next(first);
  for (let n = 0; cont && n < 100_000; n++) {
    const more = await page(cont);
    items.push(...more.items);
    cont = next(more);
  }
  const { continue: _c, ...metadata } = (first.metadata ?? {}) as Record<string, unknown>;
  return { ...first, metadata, items };
}

export interface InformerHandlers<T> {
  upsert(obj: T): void;
  delete(obj: T): void;
}

export interface RestartingInformerOptions {
  log: LogFn;
  healing: Healing;
  /** The Watch the ListWatch was built with: relists and stalls go through it. */
  watch?: HealingWatch;
  /**
   * A 404 from the server counts as "no objects" for `synced`/`up` (retrying at the longest
   * backoff in case the resource appears), instead of as the informer being down.
   */
  optional?: boolean;
  /** Called whenever `up` or `reason` changes. */
  onChange?: () => void;
  random?: () => number;
}

/** A ListWatch kept running: restarted with backoff whenever it stops on an error, relisted periodically. */
export class RestartingInformer<T extends KubernetesObject> {
  private isUp = false;
  /** The resource does not exist on the server (404, e.g. a CRD not installed); see `optional`. */
  private isAbsent = false;
  private failures = 0;
  private failedNow = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private relistTimer: NodeJS.Timeout | undefined;
  private lastError: string | undefined;
  /** The last failure's description as logged at warn/error (repeats of it go to debug). */
  private lastLogged: string | undefined;
  private readonly firstSync: { promise: Promise<void>; resolve: () => void; done: boolean };
  private readonly log: LogFn;
  private readonly random: () => number;

  constructor(readonly name: string, private readonly informer: Informer<T> & ObjectCache<T>, handlers: InformerHandlers<T>,
    private readonly opts: RestartingInformerOptions) {
    this.log = opts.log;
    this.random = opts.random ?? Math.random;
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.firstSync = { promise, resolve: () => { this.firstSync.done = true; resolve(); }, done: false };
    informer.on('add', (o) => this.stopped || handlers.upsert(o));
    informer.on('update', (o) => this.stopped || handlers.upsert(o));
    informer.on('delete', (o) => this.stopped || handlers.delete(o));
    informer.on('error', (e) => this.failed(e));
  }

  /** Listing and watching (or, when optional, known to be absent). */
  get up(): boolean {
    return this.isUp || this.isAbsent;
  }

  /** The first list arrived (or the optional resource was found absent). */
  get hasSynced(): boolean {
    return this.firstSync.done && !this.stopped;
  }

  /** Why not up: "<name>: <the last error>"; undefined while up. */
  get reason(): string | undefined {
    if (this.up) return undefined;
    return `${this.name}: ${this.lastError ?? 'no answer yet'}`;
  }

  /** Starts; `synced()` resolves after the first successful list. */
  start(): void {
    this.stopped = false;
    this.scheduleRelist();
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
    clearTimeout(this.relistTimer);
    this.firstSync.resolve(); // a start() waiting for the first list returns
    await this.informer.stop();
    this.opts.watch?.abortAll();
  }

  /** Relists now (as the periodic relist does); false when no watch is open. */
  relistNow(): boolean {
    return this.opts.watch?.relist() ?? false;
  }

  private scheduleRelist(): void {
    const every = this.opts.healing.relistMs;
    if (every <= 0 || !this.opts.watch) return;
    clearTimeout(this.relistTimer);
    const jitter = this.opts.healing.backoff.jitter;
    this.relistTimer = setTimeout(() => {
      if (this.stopped) return;
      if (this.relistNow()) this.log('debug', 'periodic relist', { informer: this.name });
      this.scheduleRelist();
    }, Math.round(every * (1 + jitter * (this.random() - 0.5))));
    this.relistTimer.unref?.();
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
    if (this.failures > 0 || this.isAbsent) this.log('info', 'watching again', { informer: this.name, after: this.lastError });
    const changed = !this.isUp || this.isAbsent;
    this.isUp = true;
    this.isAbsent = false;
    this.failures = 0;
    this.lastError = undefined;
    this.lastLogged = undefined;
    this.firstSync.resolve();
    if (changed) this.opts.onChange?.();
  }

  private failed(e: unknown): void {
    if (this.stopped) return; // stop() aborts the watch request, which ends in an error
    this.failedNow = true;
    this.isUp = false;
    const status = httpStatus(e);
    if (this.opts.optional && status === 404) {
      if (!this.isAbsent) this.log('warn', 'resource not served (CRD not installed?); retrying', { informer: this.name });
      this.isAbsent = true;
      this.lastError = undefined;
      this.firstSync.resolve();
      this.opts.onChange?.();
      this.retryIn(this.opts.healing.backoff.maxMs);
      return;
    }
    const error = describeError(e);
    this.lastError = error;
    const backoff = backoffDelay(this.opts.healing.backoff, this.failures++, this.random);
    const after = retryAfterMs(e);
    const delay = after === undefined ? backoff : Math.max(backoff, Math.min(after, this.opts.healing.maxRetryAfterMs));
    const level = status === 401 || status === 403 ? 'error' : e instanceof WatchStalledError || this.lastLogged !== error ? 'warn' : 'debug';
    const hint = status === 401 ? ' (credentials refused)' : status === 403 ? ' (forbidden: check the RBAC rules)' : '';
    this.log(this.lastLogged === error && !(e instanceof WatchStalledError) ? 'debug' : level, `list/watch of ${this.name} failed: ${error}${hint}; retrying`, {
      informer: this.name, error, status, retryInMs: delay, ...(after !== undefined ? { retryAfterMs: after } : {}), attempt: this.failures,
    });
    this.lastLogged = error;
    this.opts.onChange?.();
    this.retryIn(delay);
  }

  private retryIn(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.attempt(), ms);
  }
}
