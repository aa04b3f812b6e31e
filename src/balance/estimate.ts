// Cluster load view, the estimate: per-backend reports from nodes, checked, combined into one
// estimate of each backend's mean time in system (issue 27). Each node's previous accepted report
// is a baseline: a counter's delta over time is its new-connection rate to a backend; summed over
// the nodes, Little's law gives W = L / λ = Σ active / Σ rate, and a dropped node takes both its L
// and its λ out. docs/balance.md ("Cluster load view"). pure: no I/O, the clock is passed in.

/** What IPVS keeps for one destination of one virtual server on one node. */
export interface BackendCounters {
  /** The backend, `ip:port` as in the Service's endpoints. */
  backend: string;
  /** Connections in ESTABLISHED (gauge). */
  active: number;
  /** Connections in other states, such as TIME_WAIT (gauge). */
  inactive: number;
  /** New connections since the destination was added (counter). */
  conns: number;
  /** Bytes in and out since the destination was added (counters). */
  inBytes: number;
  outBytes: number;
}

/** One node's report for one Service. */
export interface NodeReport {
  node: string;
  /** When the node read the counters, in ms since the epoch (the node's clock). */
  at: number;
  backends: BackendCounters[];
}

/** Bounds a report must keep to be trusted. */
export interface ReportLimits {
  /** The reporting period in ms (≥ 10 000 in the cluster; the simulation uses shorter). */
  periodMs: number;
  /** A report older than this many periods is stale and dropped. */
  stalePeriods: number;
  /** A report more than this far in the aggregator's future is dropped (clock skew). */
  maxSkewMs: number;
  /** New connections per second to one backend from one node above which a report is absurd. */
  maxConnRate: number;
  /** Active plus inactive connections to one backend from one node above which a report is absurd. */
  maxConns: number;
}

/** Default bounds: 10 s period, stale after 3, 1 000 000 conn/s and 10 M conns per node and backend. */
export const DEFAULT_LIMITS: ReportLimits = {
  periodMs: 10_000, stalePeriods: 3, maxSkewMs: 5_000, maxConnRate: 1_000_000, maxConns: 10_000_000,
};

/** Why a report (or one backend's entry) was not used. */
export type RejectReason = 'malformed' | 'stale' | 'future' | 'not-newer' | 'non-finite' | 'negative' | 'backwards'
  | 'absurd-rate' | 'absurd-conns' | 'unknown-backend' | 'duplicate-backend';

/** A report, or one entry of it, that was dropped, and why. */
export interface Rejection {
  node: string;
  reason: RejectReason;
  /** The backend concerned, when the reason is about one entry. */
  backend?: string;
  message: string;
}

/** One node's contribution to one backend for one period. */
export interface Sample {
  /** Active connections at the report's time. */
  active: number;
  /** New connections per second since the node's previous accepted report. */
  rate: number;
  /** Bytes per second, in plus out, over the same interval. */
  byteRate: number;
}

/** What checking a report gives: the samples it contributes (none for a first or rejected report). */
export interface Checked {
  /** Per backend, this node's sample; empty when the report only sets a baseline or is dropped. */
  samples: Map<string, Sample>;
  /** The baseline to keep for the node's next report; undefined = none (the next one only sets it). */
  baseline: NodeReport | undefined;
  rejections: Rejection[];
}

const COUNTERS = ['active', 'inactive', 'conns', 'inBytes', 'outBytes'] as const;

/**
 * Check `report` against the node's previous accepted one (`prev`), the Service's backends and
 * the clock. A report that is malformed, stale, from the future, not newer than `prev`, or has any
 * non-finite, negative, backwards or absurd value is dropped whole and also clears the baseline,
 * so the node contributes again only from its second good report in a row (a legitimate counter
 * reset, a destination re-added, costs two periods; a node that alternates lies never
 * contributes). Entries for backends the Service does not have are dropped alone.
 */
export function checkReport(report: NodeReport, prev: NodeReport | undefined, backends: ReadonlySet<string>,
  now: number, limits: ReportLimits): Checked {
  const node = String(report.node);
  const drop = (reason: RejectReason, message: string, backend?: string): Checked => ({
    samples: new Map(), baseline: undefined,
    rejections: [{ node, reason, message, ...(backend === undefined ? {} : { backend }) }],
  });
  // Reports come from other nodes through the API: the shape is checked here too, not assumed.
  if (typeof report.node !== 'string' || !Array.isArray(report.backends)
    || report.backends.some((b) => typeof b !== 'object' || b === null || typeof b.backend !== 'string')) {
    return drop('malformed', 'report is not { node, at, backends: [{ backend, ... }] }');
  }
  if (typeof report.at !== 'number' || !Number.isFinite(report.at)) {
    return drop('non-finite', `report time ${String(report.at)}`);
  }
  if (now - report.at > limits.stalePeriods * limits.periodMs) {
    return drop('stale', `report is ${now - report.at} ms old, more than ${limits.stalePeriods} periods`);
  }
  if (report.at - now > limits.maxSkewMs) return drop('future', `report is ${report.at - now} ms in the future`);
  if (prev && report.at <= prev.at) {
    // Not a baseline reset: the same report delivered twice is harmless, so keep the old baseline.
    const message = `report time ${report.at} ≤ previous ${prev.at}`;
    return { samples: new Map(), baseline: prev, rejections: [{ node, reason: 'not-newer', message }] };
  }
  const rejections: Rejection[] = [];
  const entries = new Map<string, BackendCounters>();
  for (const b of report.backends) {
    if (!backends.has(b.backend)) {
      const message = `backend ${b.backend} is not in the Service`;
      rejections.push({ node, reason: 'unknown-backend', backend: b.backend, message });
      continue;
    }
    if (entries.has(b.backend)) return drop('duplicate-backend', `backend ${b.backend} reported twice`, b.backend);
    for (const k of COUNTERS) {
      if (typeof b[k] !== 'number' || !Number.isFinite(b[k])) {
        return drop('non-finite', `${b.backend} ${k}=${String(b[k])}`, b.backend);
      }
      if (b[k] < 0) return drop('negative', `${b.backend} ${k}=${b[k]}`, b.backend);
    }
    if (b.active + b.inactive > limits.maxConns) {
      const conns = b.active + b.inactive;
      return drop('absurd-conns', `${b.backend} has ${conns} connections, cap ${limits.maxConns}`, b.backend);
    }
    entries.set(b.backend, b);
  }
  const baseline: NodeReport = { node, at: report.at, backends: [...entries.values()] };
  if (!prev) return { samples: new Map(), baseline, rejections };
  const seconds = (report.at - prev.at) / 1000;
  const before = new Map(prev.backends.map((b) => [b.backend, b]));
  const samples = new Map<string, Sample>();
  for (const b of entries.values()) {
    const p = before.get(b.backend);
    if (!p) continue; // a backend new on this node: this report is its baseline
    for (const k of ['conns', 'inBytes', 'outBytes'] as const) {
      if (b[k] < p[k]) return drop('backwards', `${b.backend} ${k} went from ${p[k]} to ${b[k]}`, b.backend);
    }
    const rate = (b.conns - p.conns) / seconds;
    if (rate > limits.maxConnRate) {
      return drop('absurd-rate', `${b.backend} ${rate.toFixed(0)} new conn/s, cap ${limits.maxConnRate}`, b.backend);
    }
    const byteRate = (b.inBytes - p.inBytes + b.outBytes - p.outBytes) / seconds;
    samples.set(b.backend, { active: b.active, rate, byteRate });
  }
  return { samples, baseline, rejections };
}

/** Σ over the nodes that contributed, for one backend and one period. */
export interface BackendSums {
  /** Σ active connections (L). */
  active: number;
  /** Σ new connections per second (λ). */
  rate: number;
  /** How many nodes contributed. */
  nodes: number;
}

/** Sum the nodes' samples per backend; backends no node reported are absent. */
export function sumSamples(perNode: Iterable<Map<string, Sample>>): Map<string, BackendSums> {
  const out = new Map<string, BackendSums>();
  for (const samples of perNode) {
    for (const [backend, s] of samples) {
      const o = out.get(backend) ?? { active: 0, rate: 0, nodes: 0 };
      out.set(backend, { active: o.active + s.active, rate: o.rate + s.rate, nodes: o.nodes + 1 });
    }
  }
  return out;
}

/**
 * Little's law: the mean time in system in seconds, L / λ; undefined when λ is 0 (no new
 * connection) or L is below `minLoad` (too few open connections to measure: a sample of 0 active
 * with λ > 0 would read as an infinitely fast backend and crush every other weight to the floor,
 * which the budget bench showed). Never below `minSeconds`.
 */
export function timeInSystem(load: number, rate: number, minSeconds: number, minLoad = 0): number | undefined {
  if (!(rate > 0) || !(load >= minLoad)) return undefined;
  return Math.max(minSeconds, load / rate);
}

/** The coefficient of variation (population standard deviation / mean); 0 for no values or a zero mean. */
export function coefficientOfVariation(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  if (!(mean > 0)) return 0;
  return Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length) / mean;
}

/**
 * A Service port's imbalance index from the view (docs/balance-measure.md defines it as the
 * coefficient of variation of each backend's request share over its capacity share): share over
 * capacity is λᵢ·Wᵢ up to a constant, which by Little's law is Lᵢ, the backend's open connections.
 * So it is the CV of the smoothed Σ active per backend; undefined until every backend has one.
 */
export function viewImbalance(loads: readonly (number | undefined)[]): number | undefined {
  if (loads.length === 0 || loads.some((l) => l === undefined)) return undefined;
  return coefficientOfVariation(loads as number[]);
}
