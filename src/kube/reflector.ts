// One resource listed and watched, kept in a cache, with every failure owned: client-go's
// Reflector and its informer in one awaited loop on the project's own client (client.ts):
// list every page (the first list emits each page as it comes) → diff against the cache → emit →
// watch from the list's resourceVersion →
// re-watch; list again on 410 or periodically; back off on anything else. Bad input is
// skipped and counted, never ends the loop. The loop's rules and bounds: docs/kube-client.md.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { KubeClient } from './client.js';
import { type Healing, httpStatus } from './informer.js';
import { ReflectorHealth } from './reflector-health.js';
import type { Log } from '../util/log.js';
import { keyOf, parseWatchLine, rvOf, watchError } from './watch-events.js';
import { listPages } from './list-pages.js';

export interface ReflectorHandlers<T> {
  upsert(obj: T): void;
  delete(obj: T): void;
}

export interface ReflectorOptions<T> {
  name: string;
  /** Collection path, e.g. /api/v1/services. */
  path: string;
  fieldSelector?: string;
  pageSize: number;
  client: Pick<KubeClient, 'request' | 'watchStream' | 'limits'>;
  handlers: ReflectorHandlers<T>;
  /** Applied to each object before it is cached (src/source/trim.ts). */
  trim?: (o: T) => T;
  log: Log;
  healing: Healing;
  /** A 404 counts as "no objects" (a CRD not installed): retried at the longest backoff. */
  optional?: boolean;
  onChange?: () => void;
  /** A skipped watch line or list item, by reason. */
  onMalformed?: (resource: string, reason: string) => void;
  random?: () => number;
  now?: () => number;
}

/** A watch ERROR event or an answer that asks for a fresh list. */
class GoneError extends Error {
  readonly code = 410;
}

/** The loop's state between start() and stop(). */
interface ReflectorRun {
  running: Promise<void> | undefined;
  stopped: boolean;
  watch: { abort(err?: Error): void } | undefined;
  wake: (() => void) | undefined;
  relistTimer: NodeJS.Timeout | undefined;
  readonly stopping: AbortController;
}

export class Reflector<T extends KubernetesObject> {
  readonly name: string;
  private readonly cache = new Map<string, T>();
  /** Where the next watch starts, and whether a list must come first. */
  private readonly at: { resourceVersion: string | undefined; needList: boolean } = {
    resourceVersion: undefined, needList: true,
  };
  private readonly run: ReflectorRun = {
    running: undefined, stopped: true, watch: undefined, wake: undefined, relistTimer: undefined,
    stopping: new AbortController(),
  };
  private readonly firstSync: { promise: Promise<void>; resolve: () => void; done: boolean };
  private readonly random: () => number;
  private readonly health: ReflectorHealth;

  constructor(private readonly o: ReflectorOptions<T>) {
    this.name = o.name;
    this.random = o.random ?? Math.random;
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.firstSync = { promise, resolve: () => { this.firstSync.done = true; resolve(); }, done: false };
    const firstSynced = () => this.firstSync.resolve();
    this.health = new ReflectorHealth(o, { random: this.random, now: o.now ?? Date.now, firstSynced });
  }

  /** Listing and watching (or, when optional, known to be absent). */
  get up(): boolean {
    return this.health.up;
  }

  get hasSynced(): boolean {
    return this.firstSync.done && !this.run.stopped;
  }

  /** Why not up: "<name>: <the last error>"; undefined while up. */
  get reason(): string | undefined {
    return this.health.reason;
  }

  start(): void {
    if (!this.run.stopped || this.run.stopping.signal.aborted) return;
    this.run.stopped = false;
    this.scheduleRelist();
    this.run.running = this.loop();
  }

  synced(): Promise<void> {
    return this.firstSync.promise;
  }

  async stop(): Promise<void> {
    this.run.stopped = true;
    this.health.stopped();
    clearTimeout(this.run.relistTimer);
    this.firstSync.resolve();
    this.run.stopping.abort();
    this.run.watch?.abort();
    this.run.wake?.();
    await this.run.running;
  }

  /** Lists again now (ends the open watch); false when no watch is open. */
  relistNow(): boolean {
    this.at.needList = true;
    if (!this.run.watch) return false;
    this.run.watch.abort();
    return true;
  }

  private scheduleRelist(): void {
    const every = this.o.healing.relistMs;
    if (every <= 0) return;
    clearTimeout(this.run.relistTimer);
    const jitter = this.o.healing.backoff.jitter;
    this.run.relistTimer = setTimeout(() => {
      if (this.run.stopped) return;
      if (this.relistNow()) this.o.log('debug', 'periodic relist', { informer: this.name });
      this.scheduleRelist();
    }, Math.round(every * (1 + jitter * (this.random() - 0.5))));
    this.run.relistTimer.unref?.();
  }

  /** The resource's one loop: its only awaited owner of every request. */
  private async loop(): Promise<void> {
    while (!this.run.stopped) {
      try {
        if (this.at.needList) await this.list();
        if (this.run.stopped) break;
        await this.watchOnce();
      } catch (e) {
        if (this.run.stopped) break;
        if (e instanceof GoneError || httpStatus(e) === 410) {
          this.at.needList = true;
          this.o.log('debug', 'resourceVersion gone: listing again', { informer: this.name });
          continue;
        }
        await this.sleep(this.health.failed(e));
      }
    }
  }

  private async list(): Promise<void> {
    // An empty cache (the first list) has nothing the list could delete: each page is emitted as it
    // arrives, so the consumer works while the rest is listed. The informer counts as synced only
    // once the whole list has come (the operator's first sync waits for that).
    const early = this.cache.size === 0;
    const listed = await listPages<T>({
      path: this.o.path, limits: this.o.client.limits, trim: this.o.trim,
      page: (cont) => {
        const query = { limit: this.o.pageSize, fieldSelector: this.o.fieldSelector, continue: cont };
        return this.o.client.request<unknown>('GET', this.o.path, { query, signal: this.run.stopping.signal });
      },
      stopped: () => this.run.stopped,
      malformed: (why) => this.health.malformed(`list item: ${why}`),
      ...(early ? { onPage: (objs: readonly T[]) => this.emitPage(objs) } : {}),
    });
    if (!listed) return;
    const { items, rv } = listed;
    if (this.run.stopped) return;
    // Deletes for what the list lacks, then upserts of what is new or changed.
    for (const [k, old] of this.cache) {
      if (!items.has(k)) {
        this.cache.delete(k);
        this.o.handlers.delete(old);
      }
    }
    for (const [k, obj] of items) {
      const old = this.cache.get(k);
      if (old && rvOf(old) !== undefined && rvOf(old) === rvOf(obj)) continue;
      this.cache.set(k, obj);
      this.o.handlers.upsert(obj);
    }
    this.at.resourceVersion = rv;
    this.at.needList = false;
    this.health.progressed();
    this.firstSync.resolve();
  }

  /** Upserts one page of the first list, unless stopped; the list's diff later skips them (same resourceVersion). */
  private emitPage(objs: readonly T[]): void {
    if (this.run.stopped) return;
    for (const obj of objs) {
      this.cache.set(keyOf(obj), obj);
      this.o.handlers.upsert(obj);
    }
  }

  private async watchOnce(): Promise<void> {
    const h = this.o.healing;
    const query = {
      watch: true, allowWatchBookmarks: true, fieldSelector: this.o.fieldSelector,
      resourceVersion: this.at.resourceVersion,
      ...(h.watchTimeoutSeconds > 0 ? { timeoutSeconds: h.watchTimeoutSeconds } : {}),
    };
    let gone: GoneError | undefined;
    let failure: Error | undefined;
    const w = this.o.client.watchStream(this.o.path, query, (line) => {
      if (gone || failure) return;
      const ev = parseWatchLine(line);
      if ('malformed' in ev) {
        this.health.malformed(`watch line: ${ev.malformed}`);
        return;
      }
      if (ev.type === 'ERROR') {
        const code = ev.object.code;
        if (code === 410) gone = new GoneError(`watch: ${String(ev.object.message ?? 'resourceVersion too old')}`);
        else failure = watchError(ev.object);
        w.abort(gone ?? failure);
        return;
      }
      const rv = rvOf(ev.object);
      if (rv) this.at.resourceVersion = rv;
      this.health.progressed();
      if (ev.type === 'BOOKMARK') return;
      const raw = ev.object as unknown as T;
      const obj = this.o.trim ? this.o.trim(raw) : raw;
      const k = keyOf(obj);
      if (ev.type === 'DELETED') {
        const old = this.cache.get(k);
        this.cache.delete(k);
        this.o.handlers.delete(old ?? obj);
      } else {
        this.cache.set(k, obj);
        this.o.handlers.upsert(obj);
      }
    }, h.idleMs, () => this.health.progressed());
    this.run.watch = w;
    try {
      await w.done;
    } finally {
      this.run.watch = undefined;
    }
    if (gone) throw gone;
    if (failure) throw failure;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.run.wake = undefined; resolve(); }, ms);
      this.run.wake = () => { clearTimeout(t); this.run.wake = undefined; resolve(); };
    });
  }
}
