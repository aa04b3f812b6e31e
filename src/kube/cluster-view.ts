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
import { waitAtMost } from '../util/settled.js';

/** A published IPVSServiceWeights, before it is checked. */
type WeightsObject = Record<string, unknown> & { metadata?: { name?: string; namespace?: string } };
/** An object's metadata.resourceVersion, as a write answers it. */
type Versioned = { metadata?: { resourceVersion?: string } };

/** The loop's state between start() and stop(). */
interface ViewRun {
  timer: NodeJS.Timeout | undefined;
  stopped: boolean;
  campaigning: boolean;
  /** Aborted by stop(): a request in flight to a silent API server does not hold SIGTERM up. */
  readonly stopping: AbortController;
  running: Promise<void> | undefined;
  wake: (() => void) | undefined;
}

export class ClusterView {
  /** The period, the reads (samples) in it, and the clock. */
  private readonly pace: { periodMs: number; readsPerPeriod: number; now: () => number };
  private readonly elector: LeaseElector;
  private readonly weightsReflector: Reflector<WeightsObject>;
  private readonly reporter: LoadReporter;
  private readonly leader: ViewLeader;
  private readonly liveness: ViewLiveness;
  private readonly run: ViewRun = {
    timer: undefined, stopped: true, campaigning: false, stopping: new AbortController(), running: undefined,
    wake: undefined,
  };

  constructor(private readonly o: ClusterViewOptions) {
    const periodMs = o.periodMs ?? 10_000;
    const now = o.now ?? Date.now;
    this.pace = { periodMs, readsPerPeriod: Math.max(1, Math.round(o.readsPerPeriod ?? 10)), now };
    const limits: ReportLimits = { ...DEFAULT_LIMITS, periodMs, ...o.limits };
    const staleMs = limits.stalePeriods * periodMs;
    const put: PutObject = (collection, name, body, rv) => this.put(collection, name, body, rv);
    this.reporter = new LoadReporter(o, periodMs, now, put);
    this.leader = new ViewLeader(o, { limits, staleMs, now, put });
    this.liveness = new ViewLiveness(o, staleMs, now);
    this.elector = new LeaseElector({
      client: o.client, namespace: o.namespace, name: LEASE_NAME, identity: o.nodeName,
      leaseDurationMs: o.leaseDurationMs ?? 15_000, renewDeadlineMs: o.renewDeadlineMs ?? 10_000,
      retryPeriodMs: o.retryPeriodMs ?? 2_000,
      log: o.log, now, campaign: o.elect !== false,
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
    await waitAtMost(this.weightsReflector.synced(), ms);
  }

  /** The leader's Lease as last observed, and whether this node leads (status, tests). */
  get leading(): boolean {
    return this.elector.isLeader;
  }

  start(): void {
    if (!this.run.stopped) return;
    this.run.stopped = false;
    this.weightsReflector.start();
    this.run.running = this.loop();
  }

  /**
   * Stops every loop; a leader releases the Lease (bounded; `release: false` keeps it until it
   * expires, as a crash).
   */
  async stop(release = true): Promise<void> {
    this.run.stopped = true;
    clearTimeout(this.run.timer);
    this.run.stopping.abort();
    this.run.wake?.();
    await this.run.running;
    await Promise.all([this.weightsReflector.stop(), this.leader.stopReports(), this.elector.stop(release ? 1000 : 0)]);
  }

  private async loop(): Promise<void> {
    while (!this.run.stopped) {
      await this.campaignWhileNeeded();
      for (let i = 1; i <= this.pace.readsPerPeriod && !this.run.stopped; i++) {
        await new Promise<void>((r) => {
          this.run.wake = r;
          this.run.timer = setTimeout(r, this.pace.periodMs / this.pace.readsPerPeriod);
        });
        if (i < this.pace.readsPerPeriod && !this.run.stopped) await this.reporter.sample();
      }
      if (this.run.stopped) break;
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
    if (want && !this.run.campaigning) {
      this.run.campaigning = true;
      this.elector.start();
    } else if (!want && this.run.campaigning) {
      this.run.campaigning = false;
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
      const signal = this.run.stopping.signal;
      const got = await this.o.client.request<Versioned>('GET', `${collection}/${name}`, { signal })
        .catch((e: unknown) => {
          if (httpStatus(e) === 404) return undefined;
          throw e;
        });
      if (!got) {
        const made = await this.o.client.request<Versioned>('POST', collection, { body, signal });
        return made.metadata?.resourceVersion;
      }
      version = got.metadata?.resourceVersion;
    }
    const meta = body.metadata as Record<string, unknown>;
    const written = await this.o.client.request<Versioned>('PUT', `${collection}/${name}`,
      { body: { ...body, metadata: { ...meta, resourceVersion: version } }, signal: this.run.stopping.signal });
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
