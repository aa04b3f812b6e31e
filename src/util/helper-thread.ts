// The process's one helper thread (helper-main.ts): it runs jobs whose work would stall the event
// loop, each a function of a job module named by its URL (the kernel's listing read in turn,
// ipvs/proc-thread.ts; the large VIP batches, rtnl/address-thread.ts). One thread for all, started
// on first use and kept while used: under TCG a new worker took 1.6-2.5 s from its start to its first
// answer, which the first large VIP batch of a first sync paid after the listing's own worker had
// paid it once (docs/performance.md, "One helper thread"). A thread left with no job for IDLE_MS
// ends, and the next job starts another: its heap and its modules are not kept for the hours
// between two full syncs (docs/performance.md, "The helper thread ends when idle").
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';

const MAIN = new URL('./helper-main.js', import.meta.url);
/** The thread's name, as `top -H` and /proc/PID/task/TID/comm show it. */
export const THREAD_NAME = 'ipvsop-helper';
/**
 * How long a thread with no job lives on. Longer than the gaps inside one full sync (its listing
 * is read while the desired state is built; its VIP batch starts after the plan), so that a sync
 * starts one thread; short beside the time between two full syncs (start, a configuration
 * change, a failed sync).
 */
export const IDLE_MS = 30_000;

/** What the event loop posts the thread. */
export type ToHelper =
  | { job: number; module: string; data: unknown }
  | { cancel: number }
  | { load: string }
  | 'close';
/** What the thread posts back: a job's message, or its end (with the error that ended it). */
export type FromHelper = { job: number; message: unknown } | { job: number; done: true; error?: string };

/** The owner's side of one job. */
export interface JobHandlers {
  /** Each message the job posted, in order. */
  message(m: unknown): void;
  /** Once: the job's function returned (no error), threw (its message), or the thread failed. */
  end(error?: Error): void;
}

/** The threads started and not yet ended, for closeAll(). */
const live = new Set<HelperThread>();
let shared: HelperThread | undefined;

/**
 * A worker running job modules. A module exports `run(data, post, signal)` (async or not; its
 * end is the job's end) and may export `close()`, called when the thread is closed. A thread that
 * dies ends every job with `failed`, and is never used again: shared() then starts another. The
 * thread keeps the process alive only while a job runs.
 */
export class HelperThread {
  private readonly thread: Worker;
  private readonly jobs = new Map<number, JobHandlers>();
  private lastId = 0;
  private failure: Error | undefined;
  private idle: NodeJS.Timeout | undefined;
  private idleEnded = false;
  /** How long threads started from now on live with no job (IDLE_MS; tests shorten it). */
  static idleMs = IDLE_MS;

  /** `script`: the thread's entry (tests start a stand-in); `idleMs`: how long it lives with no job. */
  constructor(script: URL = MAIN, private readonly idleMs = HelperThread.idleMs) {
    this.thread = new Worker(script, { name: THREAD_NAME });
    this.thread.on('message', (m: FromHelper) => this.received(m));
    this.thread.on('error', (e) => this.fail(e instanceof Error ? e : new Error(String(e))));
    this.thread.on('exit', (code) => {
      live.delete(this);
      if (shared === this) shared = undefined;
      this.fail(new Error(`thread ended (exit code ${code})`));
    });
    // After the listeners: a 'message' listener refs the thread again.
    this.thread.unref();
    live.add(this);
    this.armIdle();
  }

  /** The process's helper thread: the one running, else a new one. */
  static shared(): HelperThread {
    if (!shared || shared.failure) shared = new HelperThread();
    return shared;
  }

  /**
   * Closes every thread still running, a job in progress included, and resolves once each has
   * ended, or after `ms`: what an exit on an error waits for (src/cli/fatal.ts). It keeps the
   * process alive while it waits.
   */
  static async closeAll(ms: number): Promise<void> {
    const ending = [...live].map((t) => {
      const ended = new Promise<void>((resolve) => t.thread.once('exit', () => resolve()));
      t.thread.ref();
      t.close();
      return ended;
    });
    if (!ending.length) return;
    const bound = new AbortController();
    await Promise.race([Promise.all(ending), delay(ms, undefined, { signal: bound.signal }).catch(() => undefined)]);
    bound.abort();
  }

  /** Why the thread failed (it is then never used again), or undefined while it works. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** Whether the thread ended for want of jobs (then failed too): an owner takes shared() again. */
  get retired(): boolean {
    return this.idleEnded;
  }

  /** Has the thread import `module` now, so that its first job does not wait for it. */
  load(module: URL): void {
    if (this.failure) return;
    this.post({ load: module.href });
    if (!this.jobs.size) this.armIdle(); // the job it readies is on its way
  }

  /**
   * Starts a job: `module`'s run() with `data` (`transfer`: buffers handed over). Returns its id,
   * for cancel(). On a failed thread, `handlers.end` is called at once with the failure.
   */
  start(module: URL, data: unknown, handlers: JobHandlers, transfer: ArrayBuffer[] = []): number {
    const id = ++this.lastId;
    if (this.failure) {
      handlers.end(this.failure);
      return id;
    }
    this.jobs.set(id, handlers);
    clearTimeout(this.idle);
    this.thread.ref();
    this.post({ job: id, module: module.href, data }, transfer);
    return id;
  }

  /** Aborts a job's signal in the thread; the job still ends as its module says. */
  cancel(id: number): void {
    if (this.jobs.has(id)) this.post({ cancel: id });
  }

  /**
   * Ends the thread once its jobs have let go (each module's close() runs first: see
   * rtnl/address-thread.ts for why a socket must not be open when it ends); every job still
   * running ends with `why` ("closed") now.
   */
  close(why = 'closed'): void {
    this.fail(new Error(why));
    this.post('close');
  }

  private post(m: ToHelper, transfer: ArrayBuffer[] = []): void {
    this.thread.postMessage(m, transfer);
  }

  private received(m: FromHelper): void {
    const h = this.jobs.get(m.job);
    if (!h) return;
    if (!('done' in m)) {
      h.message(m.message);
      return;
    }
    this.settled(m.job);
    h.end(m.error === undefined ? undefined : new Error(m.error));
  }

  private settled(id: number): void {
    this.jobs.delete(id);
    if (this.jobs.size) return;
    this.thread.unref();
    this.armIdle();
  }

  /** (Re)starts the idle timer; it keeps no process alive. */
  private armIdle(): void {
    clearTimeout(this.idle);
    if (this.failure) return;
    this.idle = setTimeout(() => {
      if (this.jobs.size || this.failure) return;
      this.idleEnded = true;
      if (shared === this) shared = undefined;
      this.close(`ended after ${this.idleMs} ms with no job`);
    }, this.idleMs);
    this.idle.unref();
  }

  private fail(err: Error): void {
    clearTimeout(this.idle);
    this.failure ??= err;
    for (const [id, h] of [...this.jobs]) {
      this.settled(id);
      h.end(this.failure);
    }
  }
}
