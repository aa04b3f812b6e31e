// The cluster load view's API edge (issue 27): each node writes its IPVSLoadReport, one node
// elected on a Lease (lease.ts) aggregates them into IPVSServiceWeights, and every node applies
// those through the ClusterWeights tracker the sync loop reads. This file holds the loop, the
// timers and the API calls; the decisions are in cluster-view-steps.ts and src/balance/. What
// it does when, and why: docs/balance.md. Nothing here can fail a sync: every failure is logged
// (once per kind) and retried next period.
import { REPORTS_PATH, WEIGHTS_PATH, parseWeightsObject } from '../balance/cluster-view.js';
import { DEFAULT_LIMITS, type ReportLimits } from '../balance/estimate.js';
import type { KubeClient } from './client.js';
import { ViewLeader } from './cluster-view-leader.js';
import {
  type ClusterViewOptions, LEASE_NAME, type PutObject, VIEW_AT_ANNOTATION, VIEW_DAMPING,
} from './cluster-view-options.js';
import { LoadReporter } from './cluster-view-report.js';
import { defaultHealing, httpStatus } from './informer.js';
import { ViewLiveness } from './cluster-view-liveness.js';
import { LeaseElector } from './lease.js';
import { Reflector } from './reflector.js';

/** A published IPVSServiceWeights, before it is checked. */
type WeightsObject = Record<string, unknown> & { metadata?: { name?: string; namespace?: string } };
/** An object's metadata.resourceVersion, as a write answers it. */
type Versioned = { metadata?: { resourceVersion?: string } };

export class ClusterView {
  private readonly periodMs: number;
  private readonly now: () => number;
  private readonly elector: LeaseElector;
  private readonly weightsReflector: Reflector<WeightsObject>;
  private readonly reporter: LoadReporter;
  private readonly leader: ViewLeader;
  private readonly readsPerPeriod: number;
  private readonly liveness: ViewLiveness;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private campaigning = false;
  /** Aborted by stop(): a request in flight to a silent API server does not hold SIGTERM up. */
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly o: ClusterViewOptions) {
    this.periodMs = o.periodMs ?? 10_000;
    this.readsPerPeriod = Math.max(1, Math.round(o.readsPerPeriod ?? 10));
    const limits: ReportLimits = { ...DEFAULT_LIMITS, periodMs: this.periodMs, ...o.limits };
    const staleMs = limits.stalePeriods * this.periodMs;
    this.now = o.now ?? Date.now;
    const put: PutObject = (collection, name, body, rv) => this.put(collection, name, body, rv);
    this.reporter = new LoadReporter(o, this.periodMs, this.now, put);
    this.leader = new ViewLeader(o, { limits, staleMs, now: this.now, put });
    this.liveness = new ViewLiveness(o, staleMs, this.now);
    this.elector = new LeaseElector({
      client: o.client, namespace: o.namespace, name: LEASE_NAME, identity: o.nodeName,
      leaseDurationMs: o.leaseDurationMs ?? 15_000, renewDeadlineMs: o.renewDeadlineMs ?? 10_000,
      retryPeriodMs: o.retryPeriodMs ?? 2_000,
      log: o.log, now: this.now, campaign: o.elect !== false,
      onLeading: (leading) => this.leader.leadingChanged(leading),
      onObserved: (obs) => this.liveness.observed(obs),
      watch: o.healing ?? defaultHealing,
    });
    const healing = o.healing ?? defaultHealing;
    this.weightsReflector = new Reflector({
      name: 'ipvsserviceweights', path: WEIGHTS_PATH, pageSize: 500, client: o.client, log: o.log, healing,
      optional: true,
      handlers: {
        upsert: (obj) => {
          const service = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
          const parsed = parseWeightsObject(obj, o.damping ?? VIEW_DAMPING);
          if ('error' in parsed) {
            o.log('warn', 'refusing a published IPVSServiceWeights; local weights', { service, error: parsed.error });
            o.weights.refuse(service, parsed.error);
          } else {
            o.weights.publish(service, parsed.views, parsed.firstChoices, parsed.reporters);
          }
          o.poke();
        },
        delete: (obj) => {
          o.weights.forget(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`);
          o.poke();
        },
      },
    });
  }

  /**
   * Resolves once the published weights were listed (or after `ms`): the sync loop's first sync
   * waits for it, so a restarted node programs the weights in force, not local ones first.
   */
  async weightsListed(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.weightsReflector.synced(), new Promise<void>((r) => { timer = setTimeout(r, ms); })]);
    clearTimeout(timer);
  }

  /** The leader's Lease as last observed, and whether this node leads (status, tests). */
  get leading(): boolean {
    return this.elector.isLeader;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.weightsReflector.start();
    this.running = this.loop();
  }

  /**
   * Stops every loop; a leader releases the Lease (bounded; `release: false` keeps it until it
   * expires, as a crash).
   */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stopping.abort();
    this.wake?.();
    await this.running;
    await Promise.all([this.weightsReflector.stop(), this.leader.stopReports(), this.elector.stop(release ? 1000 : 0)]);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await this.campaignWhileNeeded();
      for (let i = 1; i <= this.readsPerPeriod && !this.stopped; i++) {
        await new Promise<void>((r) => {
          this.wake = r;
          this.timer = setTimeout(r, this.periodMs / this.readsPerPeriod);
        });
        if (i < this.readsPerPeriod && !this.stopped) await this.reporter.sample();
      }
      if (this.stopped) break;
      this.liveness.checkAlive();
      await this.reporter.report();
      if (!this.elector.isLeader) continue;
      const at = await this.leader.aggregate();
      if (at !== undefined) this.elector.annotations = { [VIEW_AT_ANNOTATION]: new Date(at).toISOString() };
    }
  }

  /**
   * The Lease is read (every retry period) and contended only while some Service on this node
   * opts in: a cluster that uses no cluster view pays no API traffic for it.
   */
  private async campaignWhileNeeded(): Promise<void> {
    const want = this.o.weights.optedIn().size > 0;
    if (want && !this.campaigning) {
      this.campaigning = true;
      this.elector.start();
    } else if (!want && this.campaigning) {
      this.campaigning = false;
      await this.elector.stop();
      this.liveness.forget();
    }
  }

  /** PUT with the resourceVersion known (GET it when unknown), POST when missing; the new resourceVersion. */
  private async put(
    collection: string, name: string, body: Record<string, unknown>, rv: string | undefined,
  ): Promise<string | undefined> {
    let version = rv;
    if (version === undefined) {
      const signal = this.stopping.signal;
      const got = await this.o.client.request<Versioned>('GET', `${collection}/${name}`, { signal })
        .catch((e: unknown) => {
          if (httpStatus(e) === 404) return undefined;
          throw e;
        });
      if (!got) {
        const made = await this.o.client.request<Versioned>('POST', collection, { body, signal: this.stopping.signal });
        return made.metadata?.resourceVersion;
      }
      version = got.metadata?.resourceVersion;
    }
    const meta = body.metadata as Record<string, unknown>;
    const written = await this.o.client.request<Versioned>('PUT', `${collection}/${name}`,
      { body: { ...body, metadata: { ...meta, resourceVersion: version } }, signal: this.stopping.signal });
    return written.metadata?.resourceVersion;
  }
}

/** What `status --service NS/NAME` shows: every node's report and the Service's published weights. */
export async function readClusterView(
  client: Pick<KubeClient, 'request'>, namespace: string, name: string,
): Promise<{ reports: unknown[]; weights: unknown }> {
  const reports = await client.request<{ items?: unknown[] }>('GET', REPORTS_PATH);
  const path = `/apis/ipvs-operator.io/v1alpha1/namespaces/${namespace}/ipvsserviceweights/${name}`;
  const weights = await client.request('GET', path).catch((e: unknown) => {
    if (httpStatus(e) === 404) return undefined;
    throw e;
  });
  return { reports: Array.isArray(reports.items) ? reports.items : [], weights };
}
