// Lab compare: what is compared (proxy modes over the same backends and VIP, backend service-time
// profiles, the load) and what a run yields. pure: no I/O.

/** The IPVS schedulers compared, each selected through the Service annotation. */
export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'sed', 'nq', 'sh', 'mh'] as const;

/** One way of proxying the VIP: kube-proxy's iptables or nftables mode, or IPVS via the operator. */
export type Mode =
  | { name: string; kind: 'iptables'; affinity: boolean }
  | { name: string; kind: 'nftables'; affinity: boolean }
  | { name: string; kind: 'ipvs'; scheduler: string; affinity: boolean };

/**
 * Every mode by name, in table order. The `-affinity` variants are sessionAffinity: ClientIP:
 * `-m recent` in iptables mode, per-endpoint dynamic sets in nftables mode, IPVS persistence.
 */
export const MODES: readonly Mode[] = [
  { name: 'iptables', kind: 'iptables', affinity: false },
  { name: 'iptables-affinity', kind: 'iptables', affinity: true },
  { name: 'nftables', kind: 'nftables', affinity: false },
  { name: 'nftables-affinity', kind: 'nftables', affinity: true },
  ...IPVS_SCHEDULERS.map((s): Mode => ({ name: s, kind: 'ipvs', scheduler: s, affinity: false })),
  { name: 'rr-affinity', kind: 'ipvs', scheduler: 'rr', affinity: true },
];

/** The modes run when none are named (the affinity variants are opt-in, as in the notes). */
export const DEFAULT_MODES: readonly string[] = ['iptables', 'nftables', ...IPVS_SCHEDULERS];

/** Named experiments: the study notes' two, with their modes and load. */
export interface Preset {
  name: string;
  summary: string;
  modes: string;
  profiles: string;
  load: Pick<LoadSpec, 'requests' | 'concurrency' | 'keepAlive'>;
}

export const PRESETS: readonly Preset[] = [
  {
    name: 'notes-100',
    summary: 'the notes\' `for i in {1..100}; do curl ...; done | sort | uniq -c`: 100 sequential requests, a new connection each, equal backends',
    modes: 'iptables,nftables,rr,lc,sed', profiles: 'equal', load: { requests: 100, concurrency: 1, keepAlive: false },
  },
  {
    name: 'affinity',
    summary: 'the notes\' affinity experiment (sessionAffinity: ClientIP): the same 100 requests stick to one pod',
    modes: 'iptables-affinity,nftables-affinity,rr-affinity', profiles: 'equal', load: { requests: 100, concurrency: 1, keepAlive: false },
  },
];

/** A preset by name; throws naming the known ones. */
export function findPreset(name: string): Preset {
  const p = PRESETS.find((x) => x.name === name);
  if (!p) throw new Error(`unknown preset ${JSON.stringify(name)}; use ${PRESETS.map((x) => x.name).join(', ')}`);
  return p;
}

/** Modes by comma-separated names; throws naming the unknown ones and what is allowed. */
export function parseModes(list: string): Mode[] {
  const names = list.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !MODES.some((m) => m.name === n));
  if (bad.length || !names.length) {
    throw new Error(`unknown mode(s) ${JSON.stringify(bad)}; use a comma-separated list of ${MODES.map((m) => m.name).join(', ')}`);
  }
  return MODES.filter((m) => names.includes(m.name));
}

/** How one backend serves: a fixed delay per request, and optionally a periodic stall. */
export interface BackendProfile {
  delayMs: number;
  /** Every stallEveryMs, requests arriving in the first stallMs wait until that stall ends. 0: never. */
  stallEveryMs: number;
  stallMs: number;
}

/** A service-time profile: one BackendProfile per backend, in backend order. */
export interface Profile {
  name: string;
  summary: string;
  backends: BackendProfile[];
}

export const PROFILE_NAMES = ['equal', 'one-slow', 'heterogeneous', 'stall'] as const;

/** The profiles' time unit when not scaled to a measured baseline: the fast backend's service time. */
export const DEFAULT_UNIT_MS = 20;

/**
 * The named profile for `n` backends (the last backend is the odd one out), its times in units of
 * `unitMs` (fast backend 1 unit, slow 10, stall 50 of every 125); throws on an unknown name.
 */
export function buildProfile(name: string, n: number, unitMs = DEFAULT_UNIT_MS): Profile {
  const FAST_MS = unitMs;
  const SLOW_MS = 10 * unitMs;
  const steady = (delayMs: number): BackendProfile => ({ delayMs, stallEveryMs: 0, stallMs: 0 });
  const fast = Array.from({ length: n }, () => steady(FAST_MS));
  switch (name) {
    case 'equal':
      return { name, summary: `every backend ${FAST_MS} ms`, backends: fast };
    case 'one-slow':
      return { name, summary: `last backend ${SLOW_MS} ms, others ${FAST_MS} ms`, backends: [...fast.slice(1), steady(SLOW_MS)] };
    case 'heterogeneous': {
      // Half a unit up to 6 units, spaced geometrically: each backend slower than the one before.
      const ms = Array.from({ length: n }, (_, i) => Math.round((unitMs / 2) * 12 ** (n > 1 ? i / (n - 1) : 0)));
      return { name, summary: `backends ${ms.join(' / ')} ms`, backends: ms.map(steady) };
    }
    case 'stall':
      return {
        name, summary: `${FAST_MS} ms each; the last stalls ${50 * unitMs} ms of every ${125 * unitMs} ms`,
        backends: [...fast.slice(1), { delayMs: FAST_MS, stallEveryMs: 125 * unitMs, stallMs: 50 * unitMs }],
      };
    default:
      throw new Error(`unknown profile ${JSON.stringify(name)}; use ${PROFILE_NAMES.join(', ')}`);
  }
}

/** Profiles by comma-separated names for `n` backends, in units of `unitMs`. */
export function parseProfiles(list: string, n: number, unitMs = DEFAULT_UNIT_MS): Profile[] {
  const names = list.split(',').map((s) => s.trim()).filter(Boolean);
  if (!names.length) throw new Error(`no profile named; use ${PROFILE_NAMES.join(', ')}`);
  return names.map((name) => buildProfile(name, n, unitMs));
}

/** How many times the harness's own p50 the fast backend's service time is made (scaleUnit). */
export const DOMINANCE = 4;
/** The largest unit scaleUnit picks (the slow backend then takes 10x, within the 5 s timeout). */
export const MAX_UNIT_MS = 250;

/**
 * The profiles' unit for a measured zero-delay baseline p50: DOMINANCE times it, rounded up to
 * 5 ms, at least the default 20 ms and at most MAX_UNIT_MS; `dominates` is false when capped.
 */
export function scaleUnit(baselineP50Ms: number): { unitMs: number; dominates: boolean } {
  const want = Math.ceil((DOMINANCE * Math.max(0, baselineP50Ms)) / 5) * 5;
  const unitMs = Math.min(MAX_UNIT_MS, Math.max(DEFAULT_UNIT_MS, want));
  return { unitMs, dominates: unitMs >= DOMINANCE * baselineP50Ms };
}

/** Mean service time of a backend (delay plus the average wait a stall adds). */
export function meanServiceMs(b: BackendProfile): number {
  const stall = b.stallEveryMs > 0 ? (b.stallMs * b.stallMs) / (2 * b.stallEveryMs) : 0;
  return b.delayMs + stall;
}

/**
 * wrr's weights for a profile: proportional to each backend's speed (1 / mean service time),
 * the slowest 1, at most 100 — what an operator who knows the backends would configure. The
 * other schedulers run with equal weights: they must adapt without being told.
 */
export function speedWeights(p: Profile): number[] {
  const ms = p.backends.map((b) => Math.max(1, meanServiceMs(b)));
  const slowest = Math.max(...ms);
  return ms.map((m) => Math.min(100, Math.max(1, Math.round(slowest / m))));
}

/** The load of one run: the same for every mode and profile. */
export interface LoadSpec {
  requests: number;
  /** Requests in flight at once (1: sequential). */
  concurrency: number;
  /** HTTP keep-alive: connections (not requests) are what a proxy balances. */
  keepAlive: boolean;
  timeoutMs: number;
}

export const DEFAULT_LOAD: LoadSpec = { requests: 600, concurrency: 8, keepAlive: false, timeoutMs: 5000 };

/** A backend pod of the lab. */
export interface Backend {
  name: string;
  ip: string;
  port: number;
}

/** The result of one mode under one profile, in one repetition. */
export interface ModeRun {
  profile: string;
  mode: string;
  /** 1-based repetition (runs are interleaved: every mode's rep 1, then every mode's rep 2, ...). */
  rep?: number;
  /** The scheduler annotation's options, when not `{}` (wrr's weights). */
  options?: Record<string, unknown>;
  requests: number;
  ok: number;
  errors: number;
  errorKinds: Record<string, number>;
  /** Answers per backend name. */
  byPod: Record<string, number>;
  latencyMs: LatencySummary;
  durationMs: number;
  /** [backend name ('' for an error), latency ms] per request (the JavaScript loadgen's results). */
  samples?: Array<[string, number]>;
  /** [quantile %, latency ms] at 0.5, 1.5, ..., 99.5 % (wrk's histogram): the latency distribution. */
  quantiles?: Array<[number, number]>;
}

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** The zero-delay baseline: the harness's own time per request, and the unit the profiles got. */
export interface Baseline {
  /** The mode it was measured through (the first one). */
  mode: string;
  runs: ModeRun[];
  /** Median over the runs of their p50. */
  p50Ms: number;
  unitMs: number;
  /** The fast backend's time is at least DOMINANCE x the baseline p50. */
  dominates: boolean;
}

/** Everything one `lab compare` run measured (results.json). */
export interface CompareResults {
  version: 1 | 2;
  /** Repetitions per mode and profile (1 in version 1). */
  reps?: number;
  /** The load generator: wrk (version 2) or the JavaScript loadgen. */
  loadgen?: string;
  baseline?: Baseline;
  startedAt: string;
  kernel: string;
  vip: string;
  port: number;
  backends: Backend[];
  load: LoadSpec;
  profiles: Profile[];
  modes: string[];
  runs: ModeRun[];
}
