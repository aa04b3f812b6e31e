// The cluster load view's decisions, apart from its API calls and timers (cluster-view.ts):
// a node's reading from its kernel reads, and the leader's aggregation step (each Service
// port's next view, first choices, and which Services' weights objects to write). Pure.
import type { ClusterWeights, PortWeights } from '../balance/cluster-view.js';
import { type DampingConfig, type ViewState, initialView, stepView } from '../balance/damping.js';
import {
  type BackendCounters, type NodeReport, type RejectReason, type ReportLimits, viewImbalance,
} from '../balance/estimate.js';
import { type Reading, pickReporters } from '../balance/reporting.js';
import { assignFirstChoices, sameChoices } from '../balance/first-choice.js';
import { parseReportObject } from '../balance/cluster-view.js';
import { DEAL_STALE_PERIODS } from './cluster-view-options.js';

/** Active connections summed over a period's reads, per `viewKey backend`. */
export type ActiveSums = Map<string, { sum: number; n: number }>;
/**
 * The aggregator's state of one view key, the newest report time used per node, the dealt first
 * choices and the nodes whose newest report was refused for what it says (dealt nothing).
 */
export interface ViewEntry {
  state: ViewState; used: Map<string, number>; choices?: ReadonlyMap<string, string>; refused?: ReadonlySet<string>;
}
/** What the leader would write for one Service: its ports' weights, and whether anything moved. */
export interface ServiceWeights { write: boolean; ports: PortWeights[] }
/** What a sent report was made of: the reading, the connection counters and when. */
export interface SentReport { reading: Reading; conns: Map<string, number>; at: number }

/** Adds one read of the active connections to the period's sums. */
export function addSample(sums: ActiveSums, views: ReadonlyMap<string, BackendCounters[]> | undefined): void {
  for (const [vk, backends] of views ?? []) {
    for (const b of backends) {
      const k = `${vk} ${b.backend}`;
      const a = sums.get(k) ?? { sum: 0, n: 0 };
      sums.set(k, { sum: a.sum + b.active, n: a.n + 1 });
    }
  }
}

/**
 * The report's reading at `at`: each backend's active connections as the mean of the period's
 * reads and this one (written into `views`), and its new connections per second since `sent`.
 */
export function readingOf(
  views: ReadonlyMap<string, BackendCounters[]>, sums: ActiveSums, sent: SentReport | undefined, at: number,
): { reading: Reading; conns: Map<string, number> } {
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
      const before = sent?.conns.get(k);
      rate.set(k, before === undefined || !sent ? 0 : Math.max(0, (b.conns - before) / ((at - sent.at) / 1000)));
    }
  }
  return { reading: { at, active, rate }, conns };
}

/** A report refused, by node and reason (`viewKey` when it concerns one Service port). */
export type Rejected = (node: string, reason: RejectReason, message: string, viewKey?: string) => void;

/** Every node's report object split per view key; a malformed object is rejected whole. */
export function reportsByView(reports: ReadonlyMap<string, unknown>, rejected: Rejected): Map<string, NodeReport[]> {
  const perView = new Map<string, NodeReport[]>();
  for (const [node, obj] of reports) {
    const parsed = parseReportObject(obj);
    if ('error' in parsed) {
      rejected(node, 'malformed', parsed.error);
      continue;
    }
    for (const [vk, r] of parsed.reports) {
      const list = perView.get(vk) ?? [];
      list.push(r);
      perView.set(vk, list);
    }
  }
  return perView;
}

/**
 * The nodes whose report object is recent, whatever Services it names (a node that reports
 * nothing still writes an empty report to stay known): the candidates for reporters.
 */
export function recentNodes(reports: ReadonlyMap<string, unknown>, now: number, staleMs: number): string[] {
  return [...reports].filter(([, obj]) => now - reportTime(obj) < DEAL_STALE_PERIODS * staleMs).map(([node]) => node);
}

/** What one aggregation step reads. */
export interface StepInput {
  /** The opted-in Service ports and their backends. */
  backends: ReadonlyMap<string, readonly string[]>;
  views: ReadonlyMap<string, ViewEntry>;
  perView: ReadonlyMap<string, NodeReport[]>;
  now: number;
  limits: ReportLimits;
  damping: DampingConfig;
  staleMs: number;
  weights: Pick<ClusterWeights, 'publishedOf' | 'publishedChoicesOf'>;
}

/** Called, in order, with each refused report and each stepped view's estimate. */
export interface StepHooks {
  rejected: Rejected;
  onEstimate?: (viewKey: string, estimate: ReadonlyMap<string, number | undefined>,
    weights: ReadonlyMap<string, number>, imbalance: number | undefined) => void;
}

/** One aggregation period: every opted-in Service port stepped; the next views, the Services' weights. */
export function stepViews(
  input: StepInput, hooks: StepHooks,
): { next: Map<string, ViewEntry>; byService: Map<string, ServiceWeights> } {
  const { now, limits, damping, staleMs, perView } = input;
  const byService = new Map<string, ServiceWeights>();
  const next = new Map<string, ViewEntry>();
  for (const [vk, backends] of input.backends) {
    // A new leader starts from what is published (what the nodes apply), not from equal weights.
    const prev = input.views.get(vk)
      ?? { state: startingView(backends, input.weights.publishedOf(vk), damping), used: new Map<string, number>() };
    const fresh = (perView.get(vk) ?? [])
      .filter((r) => typeof r.at !== 'number' || r.at > (prev.used.get(r.node) ?? -Infinity));
    const step = stepView(prev.state, fresh, backends, now, limits, damping);
    const used = new Map(prev.used);
    for (const r of fresh) used.set(r.node, r.at);
    for (const rej of step.rejections) hooks.rejected(rej.node, rej.reason, rej.message, vk);
    // Idle nodes' first choices, the nodes dealt over the backends by weight (first-choice.ts),
    // kept where the quotas allow. Dealt to every node whose report names the Service and is
    // younger than DEAL_STALE_PERIODS × the stale window, not only to the nodes fresh enough
    // for the estimate: a report a period late would otherwise re-deal the choices (a write,
    // and an update-dest on the moved nodes) and deal them back when it arrives.
    // A node whose newest report was refused for its content (a lie, garbage) is dealt nothing:
    // it would shift the other nodes' choices. Late is not refused here (the window above).
    const refused = refusedNodes(prev.refused, fresh, step.state, step.rejections);
    const before = prev.choices ?? input.weights.publishedChoicesOf(vk);
    const dealTo = (perView.get(vk) ?? [])
      .filter((r) => now - r.at < DEAL_STALE_PERIODS * staleMs && !refused.has(r.node)).map((r) => r.node);
    // Above DEAL_MAX_NODES nothing is dealt: each node takes its own (localFirstChoice).
    const choices = assignFirstChoices(dealTo, step.weights, before);
    next.set(vk, { state: step.state, used, choices, ...(refused.size ? { refused } : {}) });
    const imbalance = viewImbalance(backends.map((b) => step.state.smoothed.get(b)?.load));
    hooks.onEstimate?.(vk, step.estimate, step.weights, imbalance);
    const cut = vk.lastIndexOf('/');
    const service = vk.slice(0, cut);
    const s = byService.get(service) ?? { write: false, ports: [] };
    const estimates: Record<string, number> = {};
    for (const [b, w] of step.estimate) if (w !== undefined) estimates[b] = Math.round(w * 1e6) / 1e6;
    const sorted = () => Object.fromEntries([...choices].sort(([a], [b]) => (a < b ? -1 : 1)));
    s.ports.push({ port: vk.slice(cut + 1), weights: Object.fromEntries(step.weights), estimates,
      ...(choices.size ? { firstChoices: sorted() } : {}) });
    // The first view is published as soon as anything is measured, even when it is the equal
    // weights every node starts from (stepView writes only on a move): the nodes, `status` and
    // a new leader then see which weights are in force instead of no object at all.
    const measured = [...step.estimate.values()].some((w) => w !== undefined);
    const first = input.weights.publishedOf(vk) === undefined && measured;
    s.write ||= step.write || first || (measured && !sameChoices(choices, before));
    byService.set(service, s);
  }
  return { next, byService };
}

/**
 * The nodes whose newest report was dropped whole for what it says, after one step: a node's
 * fresh report the step kept (the node is in the view) clears it; one it dropped with a reason
 * other than `stale` adds it; a node with no fresh report keeps what it had.
 */
export function refusedNodes(before: ReadonlySet<string> | undefined, fresh: readonly NodeReport[], after: ViewState,
  rejections: ReadonlyArray<{ node: string; reason: RejectReason }>): Set<string> {
  const out = new Set(before);
  for (const r of fresh) {
    if (after.nodes.has(r.node)) out.delete(r.node);
    else if (rejections.some((x) => x.node === r.node && x.reason !== 'stale')) out.add(r.node);
  }
  return out;
}

/**
 * Whether the leader writes a Service's weights object, and the reporters it names: K of the
 * `known` nodes by rendezvous hash (0, or K at least the nodes known: every node reports).
 * A change of reporters alone is written once the Service has a published object.
 */
export function serviceWrite(
  service: string, s: ServiceWeights, k: number, known: string[],
  weights: Pick<ClusterWeights, 'publishedOf' | 'publishedReportersOf'>,
): { reporters: string[] | undefined } | undefined {
  const reporters = k > 0 && known.length > k ? pickReporters(service, known, k) : undefined;
  const before = weights.publishedReportersOf(service);
  const reportersMoved = (reporters?.length ?? 0) !== (before?.size ?? 0)
    || (reporters ?? []).some((n) => !before?.has(n));
  const published = s.ports.some((p) => weights.publishedOf(`${service}/${p.port}`) !== undefined);
  if (!s.write && !(reportersMoved && published)) return undefined;
  return { reporters };
}

/** When a report object says it was written (ms); NaN when it is malformed (never recent). */
function reportTime(obj: unknown): number {
  const spec = (obj as { spec?: { at?: unknown } } | undefined)?.spec;
  return typeof spec?.at === 'string' ? Date.parse(spec.at) : NaN;
}

/**
 * A Service port's first view on a leader: the published weights for the backends they name,
 * maxWeight for the others.
 */
function startingView(
  backends: readonly string[], published: ReadonlyMap<string, number> | undefined, damping: DampingConfig,
): ViewState {
  const v = initialView(backends, damping);
  if (published) for (const b of backends) v.weights.set(b, published.get(b) ?? damping.maxWeight);
  return v;
}
