// Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// take the Lease when nobody holds it or its record stayed unchanged for leaseDuration on this
// node's own clock, renew every retry period, step down when renewing failed for renewDeadline;
// writes carry the resourceVersion read. With `watch`, a follower watches the one Lease instead
// of reading it every retry period. The rules and their costs: docs/balance.md, "How it runs"
// and "Cost when unused".
import type { KubeClient } from './client.js';
import { type Healing, describeError, httpStatus } from './informer.js';
import { Reflector } from './reflector.js';
import type { Log } from '../util/log.js';

export interface LeaseRecord {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** What a candidate knows of the Lease: its record and when (local clock) the record last changed. */
export interface Observed {
  record: LeaseRecord;
  resourceVersion: string;
  annotations: Record<string, string>;
  /** Local time (ms) at which this record (holder, renewTime or annotations) was first seen. */
  observedAt: number;
}

/** What to do with the Lease now. pure. */
export function leaseAction(observed: Observed | undefined, me: string, now: number,
  durationMs: number): 'create' | 'renew' | 'acquire' | 'wait' {
  if (!observed) return 'create';
  const holder = observed.record.holderIdentity ?? '';
  if (holder === me) return 'renew';
  if (holder === '' || now - observed.observedAt >= durationMs) return 'acquire';
  return 'wait';
}

/** MicroTime, as the API server writes it: 2006-01-02T15:04:05.000000Z. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export interface ElectorOptions {
  client: Pick<KubeClient, 'request'> & Partial<Pick<KubeClient, 'watchStream' | 'limits'>>;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  log: Log;
  now?: () => number;
  /** false: only read the Lease (observe the leader), never take it. Default true. */
  campaign?: boolean;
  /** Called on every change of leadership (true: this candidate leads). */
  onLeading?: (leading: boolean) => void;
  /** Called after every read of the Lease (leading or not), with what was observed. */
  onObserved?: (o: Observed | undefined) => void;
  /** Watch the Lease while following instead of reading it every retry period (the client must watch). */
  watch?: Healing;
}

/**
 * When a candidate should next read the Lease (ms, its clock). pure. The leader, and a candidate
 * without a watch, every retry period; a watching follower when the record it saw expires on its
 * own clock, or at once when there is none or nobody holds it.
 */
export function nextRead(observed: Observed | undefined, leading: boolean, watching: boolean, lastRead: number,
  retryPeriodMs: number, durationMs: number): number {
  if (leading || !watching) return lastRead + retryPeriodMs;
  if (!observed || !observed.record.holderIdentity) return lastRead;
  return observed.observedAt + durationMs;
}

/** A candidate's loop state between start() and stop(). */
interface ElectorRun {
  timer: NodeJS.Timeout | undefined;
  stopped: boolean;
  running: Promise<void> | undefined;
  wake: (() => void) | undefined;
  /** Aborted by stop(): a round waiting on a silent API server ends at once. */
  aborting: AbortController;
  reflector: Reflector<Record<string, unknown>> | undefined;
  lastRead: number;
}

/**
 * One candidate. `tick()` reads the Lease and, as leaseAction says, creates, renews or acquires it;
 * `run()` ticks every retry period until `stop()`. `annotations` are written with every renewal.
 */
export class LeaseElector {
  private observed: Observed | undefined;
  private leading = false;
  private lastRenew = -Infinity;
  /** What the leader stamps on the Lease (ipvs-operator.io/view-at, ...). */
  annotations: Record<string, string> = {};
  private readonly now: () => number;
  /** The loop's state between start() and stop(). */
  private readonly run: ElectorRun = {
    timer: undefined, stopped: false, running: undefined, wake: undefined, aborting: new AbortController(),
    reflector: undefined, lastRead: -Infinity,
  };

  constructor(private readonly o: ElectorOptions) {
    this.now = o.now ?? Date.now;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  get path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }

  /** What was last observed of the Lease. */
  get last(): Observed | undefined {
    return this.observed;
  }

  start(): void {
    if (this.run.running) return;
    this.run.stopped = false;
    this.run.aborting = new AbortController();
    const { watch } = this.o;
    const { watchStream, limits } = this.o.client;
    if (watch && watchStream && limits) {
      const client = {
        request: this.o.client.request.bind(this.o.client), watchStream: watchStream.bind(this.o.client), limits,
      };
      this.run.reflector = new Reflector<Record<string, unknown>>({
        name: 'leases', path: this.path, fieldSelector: `metadata.name=${this.o.name}`, pageSize: 10, client,
        log: this.o.log, healing: watch,
        handlers: { upsert: (obj) => this.seen(obj), delete: () => this.seen(undefined) },
      });
      this.run.reflector.start();
    }
    this.run.running = (async () => {
      while (!this.run.stopped) {
        const now = this.now();
        // At least a retry period between reads, whatever wakes the loop (events of a flapping API).
        const due = Math.max(this.due(), this.run.lastRead + this.o.retryPeriodMs);
        if (due <= now) {
          this.run.lastRead = now;
          await this.tick();
          continue;
        }
        await new Promise<void>((r) => { this.run.wake = r; this.run.timer = setTimeout(r, due - now); });
      }
    })();
  }

  private due(): number {
    return nextRead(this.observed, this.leading, this.run.reflector !== undefined, this.run.lastRead,
      this.o.retryPeriodMs, this.o.leaseDurationMs);
  }

  /** A watch event: what the Lease is now; the loop wakes to decide again. */
  private seen(obj: Record<string, unknown> | undefined): void {
    this.observe(obj, this.now());
    this.o.onObserved?.(this.observed);
    this.run.wake?.();
  }

  /**
   * Stops; a leader gives the Lease up (holder cleared) so another takes it at once, bounded by
   * `releaseMs` (0: keep it, as a crash would, until it expires).
   */
  async stop(releaseMs = 1000): Promise<void> {
    this.run.stopped = true;
    clearTimeout(this.run.timer);
    this.run.aborting.abort();
    this.run.wake?.();
    await this.run.running;
    this.run.running = undefined;
    await this.run.reflector?.stop();
    this.run.reflector = undefined;
    if (this.leading && this.observed && releaseMs > 0) {
      const body = this.body(this.observed, { ...this.observed.record, holderIdentity: '', leaseDurationSeconds: 1 });
      const signal = AbortSignal.timeout(releaseMs);
      await this.o.client.request('PUT', `${this.path}/${this.o.name}`, { body, signal }).catch(() => undefined);
    }
    this.setLeading(false);
  }

  /** One round: read, then create, renew or acquire as due. Never rejects. */
  async tick(): Promise<void> {
    const now = this.now();
    try {
      const got = await this.o.client.request<Record<string, unknown>>('GET', `${this.path}/${this.o.name}`,
        { signal: this.run.aborting.signal }).catch((e: unknown) => {
        if (httpStatus(e) === 404) return undefined;
        throw e;
      });
      this.observe(got, now);
      this.o.onObserved?.(this.observed);
      const action = leaseAction(this.observed, this.o.identity, now, this.o.leaseDurationMs);
      if (action === 'wait' || this.o.campaign === false) {
        this.setLeading(false);
        return;
      }
      const seconds = Math.ceil(this.o.leaseDurationMs / 1000);
      const rec = this.observed?.record ?? {};
      const record: LeaseRecord = action === 'renew'
        ? { ...rec, renewTime: microTime(now), leaseDurationSeconds: seconds }
        : { holderIdentity: this.o.identity, leaseDurationSeconds: seconds,
          acquireTime: microTime(now), renewTime: microTime(now),
          leaseTransitions: (rec.leaseTransitions ?? 0) + (action === 'acquire' && rec.holderIdentity ? 1 : 0) };
      const written = action === 'create'
        ? await this.o.client.request<Record<string, unknown>>('POST', this.path,
          { body: this.body(undefined, record), signal: this.run.aborting.signal })
        : await this.o.client.request<Record<string, unknown>>('PUT', `${this.path}/${this.o.name}`,
          { body: this.body(this.observed, record), signal: this.run.aborting.signal });
      this.observe(written, now);
      this.lastRenew = now;
      if (!this.leading) this.o.log('info', 'leading the cluster load view',
        { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
      this.setLeading(true);
    } catch (e) {
      // A 409 is another candidate's write between our read and ours: read again next round.
      if (httpStatus(e) !== 409) this.o.log('debug', 'lease round failed', { error: describeError(e) });
      if (this.leading && now - this.lastRenew >= this.o.renewDeadlineMs) {
        this.o.log('warn', 'could not renew the lease within the renew deadline; stepping down',
          { error: describeError(e) });
        this.setLeading(false);
      }
    }
  }

  private body(observed: Observed | undefined, record: LeaseRecord): Record<string, unknown> {
    return {
      apiVersion: 'coordination.k8s.io/v1', kind: 'Lease',
      metadata: {
        name: this.o.name, namespace: this.o.namespace,
        ...(observed ? { resourceVersion: observed.resourceVersion } : {}),
        annotations: record.holderIdentity === this.o.identity ? { ...this.annotations } : {},
      },
      spec: record,
    };
  }

  private observe(o: Record<string, unknown> | undefined, now: number): void {
    if (!o) {
      this.observed = undefined;
      return;
    }
    const meta = (o.metadata ?? {}) as { resourceVersion?: string; annotations?: Record<string, string> };
    const record = (o.spec ?? {}) as LeaseRecord;
    const annotations = { ...(meta.annotations ?? {}) };
    const prev = this.observed;
    const same = prev && prev.record.holderIdentity === record.holderIdentity
      && prev.record.renewTime === record.renewTime
      && JSON.stringify(prev.annotations) === JSON.stringify(annotations);
    this.observed = { record, resourceVersion: meta.resourceVersion ?? '', annotations,
      observedAt: same ? prev.observedAt : now };
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.o.onLeading?.(leading);
  }
}
