// The elected node's side of the cluster load view: it watches every node's IPVSLoadReport
// while it leads and, once a period, steps each opted-in Service port's view with the new
// reports (cluster-view-steps.ts) and writes a Service's IPVSServiceWeights only when that
// step says so. ClusterView (cluster-view.ts) drives it and stamps the Lease after each step.
import { REPORTS_PATH, weightsObject } from '../balance/cluster-view.js';
import type { RejectReason, ReportLimits } from '../balance/estimate.js';
import { type ClusterViewOptions, type PutObject, VIEW_DAMPING } from './cluster-view-options.js';
import { type ViewEntry, recentNodes, reportsByView, serviceWrite, stepViews } from './cluster-view-steps.js';
import { FailureLog, defaultHealing } from './informer.js';
import { Reflector } from './reflector.js';

/** What the leader side shares with its ClusterView. */
export interface LeaderContext {
  limits: ReportLimits;
  staleMs: number;
  now: () => number;
  put: PutObject;
}

/** Aggregates the nodes' reports into published weights while this node leads. */
export class ViewLeader {
  private reportsReflector: Reflector<Record<string, unknown> & { metadata?: { name?: string } }> | undefined;
  /** The leader's copy of every node's last report object, by node. */
  private readonly reports = new Map<string, unknown>();
  /** Per view key: the aggregator's state and the newest report time used per node. */
  private views = new Map<string, ViewEntry>();
  private readonly writeFailures: FailureLog;
  private readonly rejectionsLogged = new Map<string, number>();

  constructor(private readonly o: ClusterViewOptions, private readonly c: LeaderContext) {
    this.writeFailures = new FailureLog(o.log, 'writing IPVSServiceWeights');
  }

  /** Starts watching the reports on leading, stops and forgets the views on losing it. */
  leadingChanged(leading: boolean): void {
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

  /** Stops the reports' watch, when one runs (ClusterView.stop). */
  stopReports(): Promise<void> | undefined {
    return this.reportsReflector?.stop();
  }

  /**
   * One aggregation period: step every opted-in Service port, write what moved. Resolves with
   * the time it aggregated, for the Lease's stamp; undefined before the reports were listed.
   */
  async aggregate(): Promise<number | undefined> {
    if (!this.reportsReflector?.hasSynced) return undefined;
    const now = this.c.now();
    const rejected = this.rejected.bind(this);
    const perView = reportsByView(this.reports, rejected);
    const known = recentNodes(this.reports, now, this.c.staleMs);
    const k = this.o.reporters ?? 0;
    const { next, byService } = stepViews({
      backends: this.o.backends(), views: this.views, perView, now, limits: this.c.limits,
      damping: this.o.damping ?? VIEW_DAMPING, staleMs: this.c.staleMs, weights: this.o.weights,
    }, { rejected, onEstimate: (...a) => this.o.onEstimate?.(...a) });
    this.views = next;
    for (const [service, s] of byService) {
      const write = serviceWrite(service, s, k, known, this.o.weights);
      if (!write) continue;
      const [namespace, name] = [service.slice(0, service.indexOf('/')), service.slice(service.indexOf('/') + 1)];
      try {
        await this.c.put(`/apis/ipvs-operator.io/v1alpha1/namespaces/${namespace}/ipvsserviceweights`, name,
          weightsObject(namespace, name, this.o.nodeName, now, s.ports, write.reporters), undefined);
        this.writeFailures.succeeded();
      } catch (e) {
        this.writeFailures.failed(e, { service });
      }
    }
    return now;
  }

  private rejected(node: string, reason: RejectReason, message: string, viewKey?: string): void {
    this.o.onRejection?.(reason);
    const k = `${node} ${reason}`;
    const now = this.c.now();
    if (now - (this.rejectionsLogged.get(k) ?? -Infinity) < 60_000) return;
    this.rejectionsLogged.set(k, now);
    const service = viewKey ? { service: viewKey } : {};
    this.o.log('warn', 'a node report was refused', { node, reason, message, ...service });
  }
}
