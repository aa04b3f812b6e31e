// Statistics of lab compare: latency percentiles and histograms from per-request samples, and the
// binomial bound a random proxy's per-backend counts must fall in. pure: no I/O.
import type { LatencySummary, ModeRun } from './types.js';

/** Nearest-rank percentile (as the lab's loadgen computes it) of ascending `sorted`; 0 when empty. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] ?? 0;
}

const round = (n: number) => Math.round(n * 100) / 100;

/** p50/p95/p99/max/mean of the successful samples (errors, pod '', are left out); zeros when none. */
export function summarizeLatency(samples: ReadonlyArray<readonly [string, number]>): LatencySummary {
  const ms = samples.filter(([pod]) => pod !== '').map(([, v]) => v).sort((a, b) => a - b);
  if (!ms.length) return { p50: 0, p95: 0, p99: 0, max: 0, mean: 0 };
  return {
    p50: round(percentile(ms, 0.5)), p95: round(percentile(ms, 0.95)), p99: round(percentile(ms, 0.99)),
    max: round(ms[ms.length - 1] ?? 0), mean: round(ms.reduce((a, b) => a + b, 0) / ms.length),
  };
}

/** Counts of `values` in `bins` logarithmic bins over [lo, hi]; values outside go to the end bins. */
export function logHistogram(values: readonly number[], lo: number, hi: number, bins: number): number[] {
  const out = new Array<number>(bins).fill(0);
  const a = Math.log(lo);
  const span = Math.log(hi) - a || 1;
  for (const v of values) {
    const i = Math.floor(((Math.log(Math.max(v, lo)) - a) / span) * bins);
    out[Math.min(bins - 1, Math.max(0, i))]! += 1;
  }
  return out;
}

function logFactorials(n: number): Float64Array {
  const f = new Float64Array(n + 1);
  for (let i = 2; i <= n; i++) f[i] = f[i - 1]! + Math.log(i);
  return f;
}

/**
 * The exact two-sided acceptance interval [lo, hi] for a Binomial(n, p) count at level
 * `alpha`: P(X < lo) <= alpha/2 and P(X > hi) <= alpha/2, each as tight as possible.
 */
export function binomialBounds(n: number, p: number, alpha: number): { lo: number; hi: number } {
  if (!(n >= 0 && Number.isInteger(n)) || !(p > 0 && p < 1) || !(alpha > 0 && alpha < 1)) {
    throw new Error(`binomialBounds: need an integer n >= 0, 0 < p < 1, 0 < alpha < 1 (got ${n}, ${p}, ${alpha})`);
  }
  const lf = logFactorials(n);
  const pmf = (k: number) => Math.exp(lf[n]! - lf[k]! - lf[n - k]! + k * Math.log(p) + (n - k) * Math.log1p(-p));
  let lo = 0;
  for (let below = 0; lo < n && below + pmf(lo) <= alpha / 2; lo++) below += pmf(lo);
  let hi = n;
  for (let above = 0; hi > 0 && above + pmf(hi) <= alpha / 2; hi--) above += pmf(hi);
  return { lo, hi };
}

/** A figure over repetitions: its median and the interval [lo, hi] = [min, max] of the runs. */
export interface Spread {
  median: number;
  lo: number;
  hi: number;
}

/** Median and min-max of `values`; zeros when empty. */
export function spread(values: readonly number[]): Spread {
  if (!values.length) return { median: 0, lo: 0, hi: 0 };
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median: round(median), lo: round(s[0]!), hi: round(s[s.length - 1]!) };
}

/** One mode under one profile over its repetitions. */
export interface ModeSummary {
  profile: string;
  mode: string;
  reps: number;
  requests: number;
  errors: number;
  /** Answers per backend name. */
  byPod: Record<string, Spread>;
  p50: Spread;
  p95: Spread;
  p99: Spread;
}

/** The summary of the runs of one mode and profile (all of `runs`), for backends `names`. */
export function summarizeRuns(runs: readonly ModeRun[], names: readonly string[]): ModeSummary {
  const first = runs[0];
  if (!first) throw new Error('summarizeRuns: no runs');
  return {
    profile: first.profile, mode: first.mode, reps: runs.length, requests: first.requests,
    errors: runs.reduce((a, r) => a + r.errors, 0),
    byPod: Object.fromEntries(names.map((n) => [n, spread(runs.map((r) => r.byPod[n] ?? 0))])),
    p50: spread(runs.map((r) => r.latencyMs.p50)), p95: spread(runs.map((r) => r.latencyMs.p95)),
    p99: spread(runs.map((r) => r.latencyMs.p99)),
  };
}

/** True when the two intervals do not overlap: a difference larger than the spread. */
export function separated(a: Spread, b: Spread): boolean {
  return a.hi < b.lo || b.hi < a.lo;
}

const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : String(Math.round(v * 10) / 10));

/** `median [lo-hi]`, or the bare value when the interval is a point. */
export function formatSpread(s: Spread): string {
  return s.lo === s.hi ? fmt(s.median) : `${fmt(s.median)} [${fmt(s.lo)}-${fmt(s.hi)}]`;
}

/**
 * The differences worth calling out in one profile: each mode against the reference modes (the
 * first one, and rr when present), on p50/p95/p99 and on the last (odd one out) backend's answers,
 * only where the min-max intervals do not overlap. One sentence each.
 */
export function calloutDifferences(summaries: readonly ModeSummary[], names: readonly string[]): string[] {
  const refs = [summaries[0], summaries.find((s) => s.mode === 'rr')].filter((s, i, a): s is ModeSummary => !!s && a.indexOf(s) === i);
  const last = names[names.length - 1];
  const out: string[] = [];
  for (const ref of refs) {
    for (const s of summaries) {
      if (s === ref || (refs.includes(s) && refs.indexOf(s) < refs.indexOf(ref))) continue;
      for (const k of ['p50', 'p95', 'p99'] as const) {
        if (separated(s[k], ref[k])) {
          out.push(`${s.mode} ${k} ${s[k].median < ref[k].median ? 'below' : 'above'} ${ref.mode}: ${formatSpread(s[k])} vs ${formatSpread(ref[k])} ms`);
        }
      }
      if (last && separated(s.byPod[last]!, ref.byPod[last]!)) {
        out.push(`${s.mode} sends ${last} ${s.byPod[last]!.median < ref.byPod[last]!.median ? 'fewer' : 'more'} requests than ${ref.mode}: ` +
          `${formatSpread(s.byPod[last]!)} vs ${formatSpread(ref.byPod[last]!)}`);
      }
    }
  }
  return out;
}
