// Statistics of lab compare: latency percentiles and histograms from per-request samples, and the
// binomial bound a random proxy's per-backend counts must fall in. pure: no I/O.
import type { LatencySummary } from './types.js';

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
