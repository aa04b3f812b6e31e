// Cluster load view, the weights: from the nodes' reports to one set of integer weights per
// Service, damped (issue 27). Each period the aggregator keeps every node's last good sample, sums
// them per backend, smooths Σ active (L) and Σ rate (λ) with an EWMA and estimates W = L̄ / λ̄.
// The target weight is inversely proportional to W (the fastest, and any backend within its dead
// zone, at maxWeight; never below minWeight); the published weight moves by at most maxStep per
// period, with hysteresis. docs/balance.md ("Cluster load view") has the parameters and why.
// pure: no I/O, the clock is passed in.
import {
  type NodeReport, type Rejection, type ReportLimits, type Sample, checkReport, sumSamples, timeInSystem,
} from './estimate.js';

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
  /**
   * No write unless some weight changes by at least this much, or by at least `relThreshold` of
   * the larger of its old and new value (near the floor, 1 → 2 doubles a backend's share).
   */
  threshold: number;
  relThreshold: number;
  /** Floor of the estimated time in system, in seconds (keeps 1/W finite). */
  minSeconds: number;
  /** Smoothed Σ active below which a backend counts as not measured (keeps its weight). */
  minLoad: number;
  /**
   * The dead zone: a backend whose smoothed time in system is within `z` standard errors of the
   * fastest one's counts as equally fast. The standard errors come from each backend's own
   * period-to-period deviation (deadZoneWidth); the width, as a fraction of the fastest time, is
   * kept within [min, max]. {z: 0, min: 0, max: 0} is no dead zone.
   */
  deadZone: { z: number; min: number; max: number };
}

/**
 * Defaults: EWMA 0.3, weights 1..20, at most 5 per period, no write below a change of 2. Small
 * weights on purpose: the kernel's wrr serves one cycle of Σ weight / gcd picks per node, and
 * with 100/98/13 (gcd 1) that is 211 picks, more than a node with a few clients opens in a period,
 * so the slow backend got its picks in bursts (0 in one period, 70 in the next; the simulation
 * showed it). With 1..20 the cycle stays near 40 picks. A backend with less than one open
 * connection on average over the reporters is not measured (timeInSystem).
 */
export const DEFAULT_DAMPING: DampingConfig = {
  alpha: 0.3, minWeight: 1, maxWeight: 20, maxStep: 5, threshold: 2, relThreshold: 0.3, minSeconds: 0.001, minLoad: 1,
  deadZone: { z: 3, min: 0.2, max: 1 },
};

/** No dead zone: weights follow every difference of the estimates (the behaviour before it). */
export const NO_DEAD_ZONE: DampingConfig['deadZone'] = { z: 0, min: 0, max: 0 };

/** What the aggregator remembers about one node of one Service. */
export interface NodeMemory {
  baseline: NodeReport;
  /** The node's last sample, reused while it stays silent; undefined until it has two good reports. */
  sample?: Map<string, Sample> | undefined;
}

/** The aggregator's memory for one Service. */
export interface ViewState {
  nodes: Map<string, NodeMemory>;
  /**
   * Smoothed Σ active and Σ rate per backend, and the smoothed deviation of each period's own time
   * in system from the estimate.
   */
  smoothed: Map<string, Smoothed>;
  /** The weights last published. */
  weights: Map<string, number>;
}

/** One backend's smoothed sums (EWMA). */
export interface Smoothed {
  load: number;
  rate: number;
  /**
   * Mean absolute deviation, in seconds, of each period's own L / λ from the estimate before it
   * (TCP's RTTVAR for the RTT, RFC 6298); undefined until a period could be measured.
   */
  dev?: number | undefined;
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
 * maxWeight, another maxWeight / d(r) rounded and clamped to [minWeight, maxWeight], where
 * r = W / Wmin and b is the backend's dead zone (`deadZone`, a fraction of Wmin; 0 when absent):
 *
 *     d(r) = max(1, min(r, 2r - 1 - 2b))
 *
 * so d = 1 (maxWeight, as fast as the fastest) for r ≤ 1 + b, d = r (the plain inverse) for
 * r ≥ 1 + 2b, and a straight line between them: no cliff where a weight would jump (a band that
 * snapped to maxWeight had one, and weights flapped across it), and backends clearly slower get
 * exactly the weight they would without a dead zone. A backend not measured yet keeps its
 * previous weight, or maxWeight when it is new.
 */
export function targetWeights(estimate: Map<string, number | undefined>, previous: Map<string, number>,
  damping: DampingConfig, deadZone?: ReadonlyMap<string, number>): Map<string, number> {
  return new Map([...exactTargets(estimate, previous, damping, deadZone)].map(([b, t]) => [b, Math.round(t)]));
}

/** targetWeights before rounding (clamped to [minWeight, maxWeight]). */
function exactTargets(estimate: Map<string, number | undefined>, previous: Map<string, number>,
  damping: DampingConfig, deadZone?: ReadonlyMap<string, number>): Map<string, number> {
  const known = [...estimate.values()].filter((w): w is number => w !== undefined);
  const fastest = known.length ? Math.min(...known) : undefined;
  const out = new Map<string, number>();
  for (const [b, w] of estimate) {
    if (w === undefined || fastest === undefined) {
      out.set(b, previous.get(b) ?? damping.maxWeight);
      continue;
    }
    const r = w / fastest;
    const exact = damping.maxWeight / Math.max(1, Math.min(r, 2 * r - 1 - 2 * (deadZone?.get(b) ?? 0)));
    out.set(b, Math.min(damping.maxWeight, Math.max(damping.minWeight, exact)));
  }
  return out;
}

/**
 * How far an exact target must be from the published weight before the weight moves at all: more
 * than half a step, so a target sitting on a rounding boundary (1.5: weight 1 or 2) does not flip
 * the weight every period.
 */
const ROUNDING_BAND = 0.75;

/**
 * Each measured backend's dead zone against the fastest, as a fraction of the fastest's time:
 * z × √(seᵢ² + se_f²) / W_f, kept in [min, max]. A smoothed estimate's standard error is taken
 * from its per-period mean deviation: σ ≈ 1.25 × dev for a normal sample, and an EWMA of weight α
 * has √(α / (2 - α)) of its samples' σ. A backend with no deviation yet gets `max`: until the
 * estimate has seen the noise, it does not separate backends. Why: estimates of equal backends
 * differ by chance (20-40 % in the lab under load, more at a few connections per node), and `sed`
 * sends every idle node to the highest weight, so noise turned into weights herds (docs/balance.md).
 */
export function deadZoneWidth(
  estimate: ReadonlyMap<string, number | undefined>, smoothed: ReadonlyMap<string, Smoothed>, damping: DampingConfig,
): Map<string, number> {
  const { z, min, max } = damping.deadZone;
  const out = new Map<string, number>();
  let fastest: string | undefined;
  for (const [b, w] of estimate) {
    if (w !== undefined && (fastest === undefined || w < estimate.get(fastest)!)) fastest = b;
  }
  if (fastest === undefined) return out;
  const wf = estimate.get(fastest)!;
  const scale = 1.25 * Math.sqrt(damping.alpha / (2 - damping.alpha));
  const devF = smoothed.get(fastest)?.dev;
  for (const [b, w] of estimate) {
    if (w === undefined) continue;
    const dev = smoothed.get(b)?.dev;
    const width = dev === undefined || devF === undefined ? max : (z * scale * Math.hypot(dev, devF)) / wf;
    out.set(b, Math.min(max, Math.max(min, width)));
  }
  return out;
}

/**
 * The smoothed deviation after a period whose own time in system is `own`, from the estimate
 * `before` it (RFC 6298's RTTVAR, with the EWMA's α): the first reading with no estimate yet
 * starts it at own / 2, as RFC 6298 starts RTTVAR at R / 2.
 */
function nextDeviation(own: number | undefined, before: number | undefined, dev: number | undefined,
  alpha: number): number | undefined {
  if (own === undefined) return dev;
  if (before === undefined) return dev ?? own / 2;
  return dev === undefined ? Math.abs(own - before) : (1 - alpha) * dev + alpha * Math.abs(own - before);
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
  const smoothed = new Map<string, Smoothed>();
  const estimate = new Map<string, number | undefined>();
  const a = damping.alpha;
  const timeOf = (load: number, rate: number, minLoad: number): number | undefined =>
    timeInSystem(load, rate, damping.minSeconds, minLoad);
  for (const b of backends) {
    const s = sums.get(b);
    const prev = state.smoothed.get(b);
    let next = prev;
    // A period in which no node had a connection to the backend, open or new, says nothing about
    // its speed: the estimate stays as it was instead of decaying to "not measured". (With sed and
    // one sequential client per node, a backend below the highest weight gets no connection at
    // all; before, its estimate decayed away and its weight froze wherever it was.)
    if (s && (s.active > 0 || s.rate > 0)) {
      // This period's own L / λ (no minLoad: a period with new connections and 0 open ones is a
      // fast reading, and its distance from the estimate is noise the dead zone must cover).
      const own = timeOf(s.active, s.rate, 0);
      const before = prev && timeOf(prev.load, prev.rate, damping.minLoad);
      const dev = nextDeviation(own, before, prev?.dev, a);
      next = !prev ? { load: s.active, rate: s.rate, dev }
        : { load: a * s.active + (1 - a) * prev.load, rate: a * s.rate + (1 - a) * prev.rate, dev };
    }
    if (next) smoothed.set(b, next);
    estimate.set(b, next ? timeOf(next.load, next.rate, damping.minLoad) : undefined);
  }
  const exact = exactTargets(estimate, state.weights, damping, deadZoneWidth(estimate, smoothed, damping));
  const target = new Map([...exact].map(([b, t]) => [b, Math.round(t)]));
  const stepped = new Map<string, number>();
  let write = backends.length !== state.weights.size || backends.some((b) => !state.weights.has(b));
  for (const [b, t] of target) {
    const p = state.weights.get(b);
    const moves = p === undefined || Math.abs(exact.get(b)! - p) > ROUNDING_BAND;
    const w = p === undefined ? t : !moves ? p : p + Math.max(-damping.maxStep, Math.min(damping.maxStep, t - p));
    const step = p === undefined ? 0 : Math.abs(w - p);
    if (p !== undefined && w !== p && (step >= damping.threshold || step >= damping.relThreshold * Math.max(w, p))) {
      write = true;
    }
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
      problems.push(
        `weight of ${b} is ${JSON.stringify(w)}, want an integer in ${damping.minWeight}..${damping.maxWeight}`);
    }
  }
  for (const b of Object.keys(weights)) if (!backends.includes(b)) problems.push(`weight for unknown backend ${b}`);
  return problems;
}
