// Cluster load view, the weights: from the nodes' reports to one set of integer weights per
// Service, damped (issue 27).
//
// Each period the aggregator checks the reports (estimate.ts), keeps every node's last good sample
// (a node reports only when its values moved, so silence means "unchanged" until its baseline is
// stale), sums them per backend, and smooths Σ active (L) and Σ rate (λ) with an EWMA; the
// estimate is W = L̄ / λ̄ (a ratio of averages, steadier than an average of ratios). The target
// weight is inversely proportional to W, the fastest backend at maxWeight, never below
// minWeight (so no backend starves and every backend keeps being measured). The published
// weight moves towards the target by at most maxStep per period, and nothing is written unless
// some weight moves by at least `threshold` (hysteresis). pure: no I/O, the clock is passed in.
import { type NodeReport, type Rejection, type ReportLimits, type Sample, checkReport, sumSamples, timeInSystem } from './estimate.js';

/** How the estimate becomes weights. */
export interface DampingConfig {
  /** EWMA weight of the newest period, in (0, 1]. */
  alpha: number;
  /** The floor weight: no backend gets less, so each keeps receiving (and being measured). */
  minWeight: number;
  /** The fastest backend's weight (IPVS weights are integers). */
  maxWeight: number;
  /** Largest change of one weight per period. */
  maxStep: number;
  /** No write unless some weight changes by at least this much. */
  threshold: number;
  /** Floor of the estimated time in system, in seconds (keeps 1/W finite). */
  minSeconds: number;
  /** Smoothed Σ active below which a backend counts as not measured (keeps its weight). */
  minLoad: number;
}

/**
 * Defaults: EWMA 0.3, weights 1..20, at most 5 per period, no write below a change of 2. Small
 * weights on purpose: the kernel's wrr serves one cycle of Σ weight / gcd picks per node, and
 * with 100/98/13 (gcd 1) that is 211 picks, more than a node with a few clients opens in a period,
 * so the slow backend got its picks in bursts (0 in one period, 70 in the next; the simulation
 * showed it). With 1..20 the cycle stays near 40 picks. A backend with less than one open
 * connection on average over the reporters is not measured (timeInSystem).
 */
export const DEFAULT_DAMPING: DampingConfig = { alpha: 0.3, minWeight: 1, maxWeight: 20, maxStep: 5, threshold: 2, minSeconds: 0.001, minLoad: 1 };

/** What the aggregator remembers about one node of one Service. */
export interface NodeMemory {
  baseline: NodeReport;
  /** The node's last sample, reused while it stays silent; undefined until it has two good reports. */
  sample?: Map<string, Sample> | undefined;
}

/** The aggregator's memory for one Service. */
export interface ViewState {
  nodes: Map<string, NodeMemory>;
  /** Smoothed Σ active and Σ rate per backend. */
  smoothed: Map<string, { load: number; rate: number }>;
  /** The weights last published. */
  weights: Map<string, number>;
}

/** A Service's view before any report: every backend at maxWeight (equal weights). */
export function initialView(backends: readonly string[], damping: DampingConfig = DEFAULT_DAMPING): ViewState {
  return { nodes: new Map(), smoothed: new Map(), weights: new Map(backends.map((b) => [b, damping.maxWeight])) };
}

/** One period's outcome. */
export interface ViewStep {
  state: ViewState;
  /** Estimated mean time in system in seconds per backend; undefined = not measured yet. */
  estimate: Map<string, number | undefined>;
  /** The undamped target weights. */
  target: Map<string, number>;
  /** The weights to publish (the previous ones when `write` is false). */
  weights: Map<string, number>;
  /** Whether the weights object should be written this period. */
  write: boolean;
  rejections: Rejection[];
}

/**
 * Target weights inversely proportional to the estimate: the fastest measured backend gets
 * maxWeight, the others maxWeight × Wmin / W rounded, clamped to [minWeight, maxWeight]. A
 * backend not measured yet keeps its previous weight, or maxWeight when it is new.
 */
export function targetWeights(estimate: Map<string, number | undefined>, previous: Map<string, number>,
  damping: DampingConfig): Map<string, number> {
  const known = [...estimate.values()].filter((w): w is number => w !== undefined);
  const fastest = known.length ? Math.min(...known) : undefined;
  const out = new Map<string, number>();
  for (const [b, w] of estimate) {
    if (w === undefined || fastest === undefined) {
      out.set(b, previous.get(b) ?? damping.maxWeight);
      continue;
    }
    const raw = Math.round((damping.maxWeight * fastest) / w);
    out.set(b, Math.min(damping.maxWeight, Math.max(damping.minWeight, raw)));
  }
  return out;
}

/**
 * Advance one Service's view by one period at `now` with the reports that arrived since the last
 * step (any order, any subset of nodes). Backends not in `backends` are forgotten; a node
 * whose last good report is stale is forgotten with a `stale` rejection.
 */
export function stepView(state: ViewState, reports: readonly NodeReport[], backends: readonly string[], now: number,
  limits: ReportLimits, damping: DampingConfig = DEFAULT_DAMPING): ViewStep {
  const set = new Set(backends);
  const nodes = new Map(state.nodes);
  const rejections: Rejection[] = [];
  for (const r of [...reports].sort((a, b) => a.at - b.at)) {
    const mem = nodes.get(r.node);
    const c = checkReport(r, mem?.baseline, set, now, limits);
    rejections.push(...c.rejections);
    if (!c.baseline) nodes.delete(r.node);
    else if (c.baseline === mem?.baseline) continue;
    else nodes.set(r.node, { baseline: c.baseline, sample: mem ? c.samples : undefined });
  }
  for (const [node, mem] of nodes) {
    if (now - mem.baseline.at > limits.stalePeriods * limits.periodMs) {
      nodes.delete(node);
      rejections.push({ node, reason: 'stale', message: `no report for ${now - mem.baseline.at} ms` });
    }
  }
  const sums = sumSamples([...nodes.values()].flatMap((m) => (m.sample ? [m.sample] : [])));
  const smoothed = new Map<string, { load: number; rate: number }>();
  const estimate = new Map<string, number | undefined>();
  for (const b of backends) {
    const s = sums.get(b);
    const prev = state.smoothed.get(b);
    const a = damping.alpha;
    const next = !s ? prev : !prev ? { load: s.active, rate: s.rate }
      : { load: a * s.active + (1 - a) * prev.load, rate: a * s.rate + (1 - a) * prev.rate };
    if (next) smoothed.set(b, next);
    estimate.set(b, next ? timeInSystem(next.load, next.rate, damping.minSeconds, damping.minLoad) : undefined);
  }
  const target = targetWeights(estimate, state.weights, damping);
  const stepped = new Map<string, number>();
  let write = backends.length !== state.weights.size || backends.some((b) => !state.weights.has(b));
  for (const [b, t] of target) {
    const p = state.weights.get(b);
    const w = p === undefined ? t : p + Math.max(-damping.maxStep, Math.min(damping.maxStep, t - p));
    if (p !== undefined && Math.abs(w - p) >= damping.threshold) write = true;
    stepped.set(b, w);
  }
  const weights = write ? stepped : new Map(state.weights);
  return { state: { nodes, smoothed, weights }, estimate, target, weights, write, rejections };
}

/**
 * Check a published weights object as a node must before applying it (it is input like any
 * other): every backend of the Service present, each an integer in [minWeight, maxWeight], no
 * others. Returns the problems; empty = apply.
 */
export function checkWeights(weights: Record<string, unknown>, backends: readonly string[],
  damping: DampingConfig = DEFAULT_DAMPING): string[] {
  const problems: string[] = [];
  for (const b of backends) {
    const w = weights[b];
    if (typeof w !== 'number' || !Number.isInteger(w) || w < damping.minWeight || w > damping.maxWeight) {
      problems.push(`weight of ${b} is ${JSON.stringify(w)}, want an integer in ${damping.minWeight}..${damping.maxWeight}`);
    }
  }
  for (const b of Object.keys(weights)) if (!backends.includes(b)) problems.push(`weight for unknown backend ${b}`);
  return problems;
}
