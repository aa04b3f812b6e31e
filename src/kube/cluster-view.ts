// The cluster load view's API edge (issue 27; the model is docs/balance.md, the pure parts are
// src/balance/). Every node, for the Services that opt in:
// - reports: once per period at most, and only when its values moved (or it stayed silent for
//   two periods), it writes its IPVSLoadReport with the kernel's per-destination counters;
// - elects: one candidate per node on one Lease (lease.ts); the holder aggregates;
// - applies: it watches the IPVSServiceWeights objects and hands them, checked, to the
//   ClusterWeights tracker the sync loop applies.
// The leader, once per period, steps each opted-in Service port's view (stepView) with the new
// reports, writes a Service's weights object only when stepView says so, and stamps the Lease with
// the time it last aggregated. A node that has not seen that stamp change for `stalePeriods`
// periods (on its own clock) falls back to local weights, with a ClusterViewStale problem.
// Nothing here can fail a sync: every failure is logged (once per kind) and retried next period.
import type { IpvsClient } from '../ipvs/types.js';
import { type ClusterWeights, REPORTS_PATH, WEIGHTS_PATH, countersByView, parseReportObject, parseWeightsObject, reportObject, weightsObject, type PortWeights } from '../balance/cluster-view.js';
import { DEFAULT_DAMPING, type DampingConfig, type ViewState, initialView, stepView } from '../balance/damping.js';
import { type BackendCounters, DEFAULT_LIMITS, type NodeReport, type RejectReason, type ReportLimits, viewImbalance } from '../balance/estimate.js';
import { type MoveThreshold, type Reading, pickReporters, shouldReport } from '../balance/reporting.js';
import { assignFirstChoices, sameChoices } from '../balance/first-choice.js';
import type { Log } from '../util/log.js';
import type { KubeClient } from './client.js';
import { FailureLog, defaultHealing, type Healing, httpStatus } from './informer.js';
import { LeaseElector, type Observed } from './lease.js';
import { Reflector } from './reflector.js';

/** The Lease annotation the leader stamps after each aggregation. */
export const VIEW_AT_ANNOTATION = 'ipvs-operator.io/view-at';
export const LEASE_NAME = 'ipvs-operator-balance';
/** A node keeps its dealt first choice while its last report is younger than this many stale windows. */
export const DEAL_STALE_PERIODS = 10;
/** The stamp before the Lease was ever read: the view counts as live for its first staleMs. */
const NOT_SEEN = '(not read yet)';

/**
 * The operator's damping: the model's defaults, but a backend counts as measured from 0.2 open
 * connections on average over the reporters (DEFAULT_DAMPING says 1, for a single read per
 * period). With reports carrying the mean of several reads per period, Σ active is a time
 * average: a fast backend at low load holds well under one connection on average, and at 1 the
 * view never measured it (seen in the lab experiment: no weights were ever published).
 */
export const VIEW_DAMPING: DampingConfig = { ...DEFAULT_DAMPING, minLoad: 0.2 };

export interface ClusterViewOptions {
  client: KubeClient;
  nodeName: string;
  /** Where the Lease lives (the operator's namespace). */
  namespace: string;
  ipvs: Pick<IpvsClient, 'listRealServers'>;
  /** The node's tracker, applied by the sync loop. */
  weights: ClusterWeights;
  /** The opted-in Service ports this node knows and their backends (`ip:port`), for the leader. */
  backends: () => ReadonlyMap<string, readonly string[]>;
  /** Ask the sync loop for a sync (new weights, or the view died or came back). */
  poke: () => void;
  log: Log;
  /** Reads of the active connections per period, averaged into the report (default 10). */
  readsPerPeriod?: number;
  /** false: report and apply, never lead (default true). */
  elect?: boolean;
  /** Reporting and aggregation period (default 10 s). */
  periodMs?: number;
  /**
   * K: how many nodes report each Service (rendezvous hash; the leader names them in the
   * Service's IPVSServiceWeights). 0 or undefined: every node reports every Service it has.
   */
  reporters?: number;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  limits?: Partial<ReportLimits>;
  damping?: DampingConfig;
  move?: MoveThreshold;
  healing?: Healing;
  now?: () => number;
  /** A report (or one entry) the leader refused, by reason (a metric). */
  onRejection?: (reason: RejectReason) => void;
  /** Each published Service port's estimate and weights (metrics), from the leader. */
  onEstimate?: (viewKey: string, estimate: ReadonlyMap<string, number | undefined>, weights: ReadonlyMap<string, number>, imbalance: number | undefined) => void;
}

/** Relative move of 20 %, at least 2 active or 1 conn/s, and at least every 2 periods. */
export function defaultMove(periodMs: number): MoveThreshold {
  return { relative: 0.2, minActive: 2, minRate: 1, maxSilentMs: 2 * periodMs };
}

export class ClusterView {
  private readonly periodMs: number;
  private readonly limits: ReportLimits;
  private readonly staleMs: number;
  private readonly now: () => number;
  private readonly elector: LeaseElector;
  private readonly weightsReflector: Reflector<Record<string, unknown> & { metadata?: { name?: string; namespace?: string } }>;
  private reportsReflector: Reflector<Record<string, unknown> & { metadata?: { name?: string } }> | undefined;
  /** The leader's copy of every node's last report object, by node. */
  private readonly reports = new Map<string, unknown>();
  /** Per view key: the aggregator's state and the newest report time used per node. */
  private views = new Map<string, { state: ViewState; used: Map<string, number>; choices?: ReadonlyMap<string, string> }>();
  private sent: { reading: Reading; conns: Map<string, number>; at: number } | undefined;
  /** Active connections summed over this period's reads, per `viewKey backend`. */
  private activeSums = new Map<string, { sum: number; n: number }>();
  private readonly readsPerPeriod: number;
  private reportVersion: string | undefined;
  /** The leader's stamp as last seen and when it changed (this node's clock); NOT_SEEN before the first read. */
  private viewAt: { value: string | undefined; changedAt: number } = { value: NOT_SEEN, changedAt: 0 };
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private campaigning = false;
  /** Aborted by stop(): a request in flight to a silent API server does not hold SIGTERM up. */
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private readonly reportFailures: FailureLog;
  private readonly writeFailures: FailureLog;
  private readonly rejectionsLogged = new Map<string, number>();

  constructor(private readonly o: ClusterViewOptions) {
    this.periodMs = o.periodMs ?? 10_000;
    this.readsPerPeriod = Math.max(1, Math.round(o.readsPerPeriod ?? 10));
    this.limits = { ...DEFAULT_LIMITS, periodMs: this.periodMs, ...o.limits };
    this.staleMs = this.limits.stalePeriods * this.periodMs;
    this.now = o.now ?? Date.now;
    this.reportFailures = new FailureLog(o.log, 'writing the IPVSLoadReport');
    this.writeFailures = new FailureLog(o.log, 'writing IPVSServiceWeights');
    this.viewAt.changedAt = this.now();
    this.elector = new LeaseElector({
      client: o.client, namespace: o.namespace, name: LEASE_NAME, identity: o.nodeName,
      leaseDurationMs: o.leaseDurationMs ?? 15_000, renewDeadlineMs: o.renewDeadlineMs ?? 10_000, retryPeriodMs: o.retryPeriodMs ?? 2_000,
      log: o.log, now: this.now, campaign: o.elect !== false,
      onLeading: (leading) => this.leadingChanged(leading),
      onObserved: (obs) => this.observed(obs),
      watch: o.healing ?? defaultHealing,
    });
    const healing = o.healing ?? defaultHealing;
    this.weightsReflector = new Reflector({
      name: 'ipvsserviceweights', path: WEIGHTS_PATH, pageSize: 500, client: o.client, log: o.log, healing, optional: true,
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

  /** Stops every loop; a leader releases the Lease (bounded; `release: false` keeps it until it expires, as a crash). */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stopping.abort();
    this.wake?.();
    await this.running;
    await Promise.all([this.weightsReflector.stop(), this.reportsReflector?.stop(), this.elector.stop(release ? 1000 : 0)]);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await this.campaignWhileNeeded();
      for (let i = 1; i <= this.readsPerPeriod && !this.stopped; i++) {
        await new Promise<void>((r) => { this.wake = r; this.timer = setTimeout(r, this.periodMs / this.readsPerPeriod); });
        if (i < this.readsPerPeriod && !this.stopped) await this.sample();
      }
      if (this.stopped) break;
      this.checkAlive();
      await this.report();
      if (this.elector.isLeader) await this.aggregate();
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
      this.viewAt = { value: undefined, changedAt: this.now() };
    }
  }

  /** The view is alive while the leader's stamp changed within staleMs (on this node's clock). */
  private observed(obs: Observed | undefined): void {
    const value = obs?.record.holderIdentity ? obs.annotations[VIEW_AT_ANNOTATION] : undefined;
    if (value !== this.viewAt.value) this.viewAt = { value, changedAt: this.now() };
    this.checkAlive();
  }

  private checkAlive(): void {
    const now = this.now();
    const alive = this.viewAt.value !== undefined && now - this.viewAt.changedAt < this.staleMs;
    const changed = alive !== this.o.weights.isAlive;
    this.o.weights.setAlive(alive, now);
    if (!changed) return;
    this.o.log(alive ? 'info' : 'warn', alive ? 'cluster load view is live' : 'cluster load view is stale; local weights', { node: this.o.nodeName });
    this.o.poke();
  }

  /**
   * The opted-in virtual servers' counters now, per view key: one dump of real servers per opted-in
   * virtual server (the kernel answers an empty dump for one not programmed yet, which is left
   * out), never a dump of every virtual server: a node with 30 000 Services and one opted in reads
   * that one, readsPerPeriod times a period.
   */
  private async readKernel(): Promise<Map<string, BackendCounters[]> | undefined> {
    if (this.o.weights.optedIn().size === 0) return undefined;
    const read: Array<{ viewKey: string; dests: Awaited<ReturnType<IpvsClient['listRealServers']>> }> = [];
    for (const { vs, viewKey } of this.o.weights.optedServers()) {
      const dests = await this.o.ipvs.listRealServers(vs);
      if (dests.length) read.push({ viewKey, dests });
    }
    return countersByView(read);
  }

  /**
   * One read of the active connections between reports. A single read at report time is a sample
   * of a few connections per node, mostly 0 for a fast backend at low load (which then counted as
   * "not measured", and the view never moved); the report carries the mean of every read of the
   * period instead, a time average.
   */
  private async sample(): Promise<void> {
    const views = await this.readOrLog();
    for (const [vk, backends] of views ?? []) {
      for (const b of backends) {
        const k = `${vk} ${b.backend}`;
        const a = this.activeSums.get(k) ?? { sum: 0, n: 0 };
        this.activeSums.set(k, { sum: a.sum + b.active, n: a.n + 1 });
      }
    }
  }

  /** readKernel, a failure logged (once per kind) as undefined: nothing to sample or report. */
  private async readOrLog(): Promise<Map<string, BackendCounters[]> | undefined> {
    try {
      return await this.readKernel();
    } catch (e) {
      this.reportFailures.failed(e);
      return undefined;
    }
  }

  private async report(): Promise<void> {
    const at = this.now();
    const views = await this.readOrLog();
    const sums = this.activeSums;
    this.activeSums = new Map();
    if (!views) return;
    for (const [vk, backends] of views) {
      for (const b of backends) {
        const s = sums.get(`${vk} ${b.backend}`);
        if (s) b.active = Math.round((100 * (s.sum + b.active)) / (s.n + 1)) / 100;
      }
    }
    const active = new Map<string, number>();
    const rate = new Map<string, number>();
    const conns = new Map<string, number>();
    for (const [vk, backends] of views) {
      for (const b of backends) {
        const k = `${vk} ${b.backend}`;
        active.set(k, b.active);
        conns.set(k, b.conns);
        const before = this.sent?.conns.get(k);
        rate.set(k, before === undefined || !this.sent ? 0 : Math.max(0, (b.conns - before) / ((at - this.sent.at) / 1000)));
      }
    }
    const reading: Reading = { at, active, rate };
    if (!shouldReport(this.sent?.reading, reading, this.o.move ?? defaultMove(this.periodMs))) return;
    const body = reportObject(this.o.nodeName, at, views);
    try {
      this.reportVersion = await this.put(REPORTS_PATH, this.o.nodeName, body, this.reportVersion);
      this.sent = { reading, conns, at };
      this.reportFailures.succeeded();
    } catch (e) {
      this.reportVersion = undefined;
      this.reportFailures.failed(e);
    }
  }

  /** PUT with the resourceVersion known (GET it when unknown), POST when missing; the new resourceVersion. */
  private async put(collection: string, name: string, body: Record<string, unknown>, rv: string | undefined): Promise<string | undefined> {
    let version = rv;
    if (version === undefined) {
      const got = await this.o.client.request<{ metadata?: { resourceVersion?: string } }>('GET', `${collection}/${name}`, { signal: this.stopping.signal }).catch((e: unknown) => {
        if (httpStatus(e) === 404) return undefined;
        throw e;
      });
      if (!got) {
        const made = await this.o.client.request<{ metadata?: { resourceVersion?: string } }>('POST', collection, { body, signal: this.stopping.signal });
        return made.metadata?.resourceVersion;
      }
      version = got.metadata?.resourceVersion;
    }
    const meta = body.metadata as Record<string, unknown>;
    const written = await this.o.client.request<{ metadata?: { resourceVersion?: string } }>('PUT', `${collection}/${name}`,
      { body: { ...body, metadata: { ...meta, resourceVersion: version } }, signal: this.stopping.signal });
    return written.metadata?.resourceVersion;
  }

  private leadingChanged(leading: boolean): void {
    if (leading) {
      this.views = new Map();
      this.reports.clear();
      this.reportsReflector = new Reflector({
        name: 'ipvsloadreports', path: REPORTS_PATH, pageSize: 500, client: this.o.client, log: this.o.log,
        healing: this.o.healing ?? defaultHealing, optional: true,
        handlers: {
          upsert: (obj) => this.reports.set(obj.metadata?.name ?? '', obj),
          delete: (obj) => this.reports.delete(obj.metadata?.name ?? ''),
        },
      });
      this.reportsReflector.start();
    } else {
      const r = this.reportsReflector;
      this.reportsReflector = undefined;
      void r?.stop();
      this.views = new Map();
    }
  }

  /** One aggregation period: step every opted-in Service port, write what moved, stamp the Lease. */
  private async aggregate(): Promise<void> {
    if (!this.reportsReflector?.hasSynced) return;
    const now = this.now();
    const perView = new Map<string, NodeReport[]>();
    for (const [node, obj] of this.reports) {
      const parsed = parseReportObject(obj);
      if ('error' in parsed) {
        this.rejected(node, 'malformed', parsed.error);
        continue;
      }
      for (const [vk, r] of parsed.reports) {
        const list = perView.get(vk) ?? [];
        list.push(r);
        perView.set(vk, list);
      }
    }
    const damping = this.o.damping ?? VIEW_DAMPING;
    const byService = new Map<string, { write: boolean; ports: PortWeights[] }>();
    // K reporters per Service (reporting.ts): chosen by rendezvous hash among the nodes whose
    // report object is recent, whatever Services it names (a node that reports nothing still
    // writes an empty report to stay known). 0, or K at least the nodes known: every node reports.
    const known = [...this.reports].filter(([, obj]) => now - reportTime(obj) < DEAL_STALE_PERIODS * this.staleMs).map(([node]) => node);
    const k = this.o.reporters ?? 0;
    const next = new Map<string, { state: ViewState; used: Map<string, number>; choices?: ReadonlyMap<string, string> }>();
    for (const [vk, backends] of this.o.backends()) {
      // A new leader starts from what is published (what the nodes apply), not from equal weights.
      const prev = this.views.get(vk) ?? { state: startingView(backends, this.o.weights.publishedOf(vk), damping), used: new Map<string, number>() };
      const fresh = (perView.get(vk) ?? []).filter((r) => typeof r.at !== 'number' || r.at > (prev.used.get(r.node) ?? -Infinity));
      const step = stepView(prev.state, fresh, backends, now, this.limits, damping);
      const used = new Map(prev.used);
      for (const r of fresh) used.set(r.node, r.at);
      for (const rej of step.rejections) this.rejected(rej.node, rej.reason, rej.message, vk);
      // Idle nodes' first choices, the nodes dealt over the backends by weight (first-choice.ts),
      // kept where the quotas allow. Dealt to every node whose report names the Service and is
      // younger than DEAL_STALE_PERIODS × the stale window, not only to the nodes fresh enough
      // for the estimate: a report a period late would otherwise re-deal the choices (a write,
      // and an update-dest on the moved nodes) and deal them back when it arrives.
      const before = prev.choices ?? this.o.weights.publishedChoicesOf(vk);
      const dealTo = (perView.get(vk) ?? []).filter((r) => now - r.at < DEAL_STALE_PERIODS * this.staleMs).map((r) => r.node);
      // Above DEAL_MAX_NODES nothing is dealt: each node takes its own (localFirstChoice).
      const choices = assignFirstChoices(dealTo, step.weights, before);
      next.set(vk, { state: step.state, used, choices });
      this.o.onEstimate?.(vk, step.estimate, step.weights, viewImbalance(backends.map((b) => step.state.smoothed.get(b)?.load)));
      const cut = vk.lastIndexOf('/');
      const service = vk.slice(0, cut);
      const s = byService.get(service) ?? { write: false, ports: [] };
      const estimates: Record<string, number> = {};
      for (const [b, w] of step.estimate) if (w !== undefined) estimates[b] = Math.round(w * 1e6) / 1e6;
      s.ports.push({ port: vk.slice(cut + 1), weights: Object.fromEntries(step.weights), estimates,
        ...(choices.size ? { firstChoices: Object.fromEntries([...choices].sort(([a], [b]) => (a < b ? -1 : 1))) } : {}) });
      // The first view is published as soon as anything is measured, even when it is the equal
      // weights every node starts from (stepView writes only on a move): the nodes, `status` and
      // a new leader then see which weights are in force instead of no object at all.
      const measured = [...step.estimate.values()].some((w) => w !== undefined);
      const first = this.o.weights.publishedOf(vk) === undefined && measured;
      s.write ||= step.write || first || (measured && !sameChoices(choices, before));
      byService.set(service, s);
    }
    this.views = next;
    for (const [service, s] of byService) {
      const reporters = k > 0 && known.length > k ? pickReporters(service, known, k) : undefined;
      // A change of reporters alone is written once the Service has a published object.
      const before = this.o.weights.publishedReportersOf(service);
      const reportersMoved = (reporters?.length ?? 0) !== (before?.size ?? 0) || (reporters ?? []).some((n) => !before?.has(n));
      const published = s.ports.some((p) => this.o.weights.publishedOf(`${service}/${p.port}`) !== undefined);
      if (!s.write && !(reportersMoved && published)) continue;
      const [namespace, name] = [service.slice(0, service.indexOf('/')), service.slice(service.indexOf('/') + 1)];
      try {
        await this.put(`/apis/ipvs-operator.io/v1alpha1/namespaces/${namespace}/ipvsserviceweights`, name,
          weightsObject(namespace, name, this.o.nodeName, now, s.ports, reporters), undefined);
        this.writeFailures.succeeded();
      } catch (e) {
        this.writeFailures.failed(e, { service });
      }
    }
    this.elector.annotations = { [VIEW_AT_ANNOTATION]: new Date(now).toISOString() };
  }

  private rejected(node: string, reason: RejectReason, message: string, viewKey?: string): void {
    this.o.onRejection?.(reason);
    const k = `${node} ${reason}`;
    const now = this.now();
    if (now - (this.rejectionsLogged.get(k) ?? -Infinity) < 60_000) return;
    this.rejectionsLogged.set(k, now);
    this.o.log('warn', 'a node report was refused', { node, reason, message, ...(viewKey ? { service: viewKey } : {}) });
  }
}

/** When a report object says it was written (ms); NaN when it is malformed (never recent). */
function reportTime(obj: unknown): number {
  const spec = (obj as { spec?: { at?: unknown } } | undefined)?.spec;
  return typeof spec?.at === 'string' ? Date.parse(spec.at) : NaN;
}

/** A Service port's first view on a leader: the published weights for the backends they name, maxWeight for the others. */
function startingView(backends: readonly string[], published: ReadonlyMap<string, number> | undefined, damping: DampingConfig): ViewState {
  const v = initialView(backends, damping);
  if (published) for (const b of backends) v.weights.set(b, published.get(b) ?? damping.maxWeight);
  return v;
}

/** What `status --service NS/NAME` shows: every node's report and the Service's published weights. */
export async function readClusterView(client: Pick<KubeClient, 'request'>, namespace: string, name: string): Promise<{ reports: unknown[]; weights: unknown }> {
  const reports = await client.request<{ items?: unknown[] }>('GET', REPORTS_PATH);
  const weights = await client.request('GET', `/apis/ipvs-operator.io/v1alpha1/namespaces/${namespace}/ipvsserviceweights/${name}`).catch((e: unknown) => {
    if (httpStatus(e) === 404) return undefined;
    throw e;
  });
  return { reports: Array.isArray(reports.items) ? reports.items : [], weights };
}
