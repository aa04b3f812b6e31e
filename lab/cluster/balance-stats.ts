// The cross-node balance experiment's arithmetic (docs/balance-measure.md), pure: the imbalance
// index, one run's summary from its clients' samples, medians with [min-max] over repeats, and
// the Markdown table.
import { coefficientOfVariation } from '../../src/balance/estimate.js';
import { percentile } from '../compare/stats.js';

/** Service times (ms) of the backends, in backend order, per profile. */
export const BALANCE_PROFILES: Readonly<Record<string, readonly number[]>> = {
  equal: [50, 50, 50],
  'one-slow': [50, 50, 500],
  heterogeneous: [25, 120, 300],
};

/**
 * The imbalance index: the coefficient of variation (population standard deviation / mean) of
 * each backend's load divided by its capacity, where load is its share of the requests and
 * capacity its share of the service rate (1 / service time). 0 when every backend gets requests
 * in proportion to what it can serve; grows as the load departs from that. With service times
 * 50/50/500 ms, an even split (rr) gives 1.06; sending the slow backend its share by capacity
 * (1/21) gives 0.
 */
export function imbalanceIndex(counts: readonly number[], serviceMs: readonly number[]): number {
  if (counts.length !== serviceMs.length || counts.length === 0) throw new Error('imbalanceIndex: one count per backend');
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const rates = serviceMs.map((ms) => 1 / Math.max(ms, 1e-9));
  const rateSum = rates.reduce((a, b) => a + b, 0);
  return coefficientOfVariation(counts.map((c, i) => (c / total) / (rates[i]! / rateSum)));
}

/** What one client (a loadgen process on one node) reported. */
export interface ClientResult {
  node: string;
  ok: number;
  errors: number;
  /** [pod, latency ms] per request, in completion order ('' pod: an error). */
  samples: Array<[string, number]>;
  /** The pod that answered this client's first request. */
  first: string;
}

/** One run: one mode, placement and concurrency. */
export interface RunSummary {
  mode: string;
  placement: string;
  concurrency: number;
  byBackend: number[];
  p50: number;
  p95: number;
  p99: number;
  imbalance: number;
  errors: number;
  seconds: number;
  /** First answering pod per client node ("node: pod"). */
  firsts: string[];
}

export function summarize(o: { mode: string; placement: string; concurrency: number; backends: readonly string[]; serviceMs: readonly number[]; clients: readonly ClientResult[]; seconds: number }): RunSummary {
  const byBackend = o.backends.map((b) => o.clients.reduce((a, c) => a + c.samples.filter(([p]) => p === b).length, 0));
  const lat = o.clients.flatMap((c) => c.samples.filter(([p]) => p !== '').map(([, ms]) => ms)).sort((a, b) => a - b);
  const q = (x: number) => (lat.length ? Math.round(percentile(lat, x)) : NaN);
  return {
    mode: o.mode, placement: o.placement, concurrency: o.concurrency, byBackend,
    p50: q(0.5), p95: q(0.95), p99: q(0.99),
    imbalance: Math.round(imbalanceIndex(byBackend, o.serviceMs) * 100) / 100,
    errors: o.clients.reduce((a, c) => a + c.errors, 0),
    seconds: Math.round(o.seconds * 10) / 10,
    firsts: o.clients.map((c) => `${c.node}: ${c.first || '-'}`),
  };
}

/** "median [min-max]" of repeated runs ("v" alone when they agree or there is one). */
export function spread(values: readonly number[]): string {
  const s = [...values].sort((a, b) => a - b);
  const med = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  const fmt = (n: number) => String(Math.round(n * 100) / 100);
  return s[0] === s[s.length - 1] ? fmt(med) : `${fmt(med)} [${fmt(s[0]!)}-${fmt(s[s.length - 1]!)}]`;
}

/** The Markdown table: one row per mode, placement and concurrency, repeats folded into median [min-max]. */
export function renderBalanceTable(runs: readonly RunSummary[], backends: readonly string[]): string {
  const groups = new Map<string, RunSummary[]>();
  for (const r of runs) {
    const k = `${r.mode}\u0000${r.placement}\u0000${r.concurrency}`;
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  const head = ['mode', 'clients', 'conc/client', ...backends, 'p50 ms', 'p95 ms', 'p99 ms', 'imbalance', 'errors', 'run s'];
  const rows = [...groups.values()].map((g) => [
    g[0]!.mode, g[0]!.placement, String(g[0]!.concurrency),
    ...backends.map((_, i) => spread(g.map((r) => r.byBackend[i]!))),
    spread(g.map((r) => r.p50)), spread(g.map((r) => r.p95)), spread(g.map((r) => r.p99)),
    spread(g.map((r) => r.imbalance)), spread(g.map((r) => r.errors)), spread(g.map((r) => r.seconds)),
  ]);
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}
