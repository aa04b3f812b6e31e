// Lab compare: what is compared (proxy modes over the same backends and VIP, backend service-time
// profiles, the load) and what a run yields. pure: no I/O.

/** The IPVS schedulers compared, each selected through the Service annotation. */
export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'sed', 'nq', 'sh', 'mh'] as const;

/** One way of proxying the VIP: kube-proxy's iptables mode, or IPVS via the operator. */
export type Mode =
  | { name: string; kind: 'iptables'; affinity: boolean }
  | { name: string; kind: 'ipvs'; scheduler: string };

/** Every mode by name, in table order. `iptables-affinity` is sessionAffinity: ClientIP (`-m recent`). */
export const MODES: readonly Mode[] = [
  { name: 'iptables', kind: 'iptables', affinity: false },
  { name: 'iptables-affinity', kind: 'iptables', affinity: true },
  ...IPVS_SCHEDULERS.map((s): Mode => ({ name: s, kind: 'ipvs', scheduler: s })),
];

/** The modes run when none are named (the affinity variant is opt-in, as in the notes). */
export const DEFAULT_MODES: readonly string[] = ['iptables', ...IPVS_SCHEDULERS];

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

const FAST_MS = 20;
const SLOW_MS = 200;

/** The named profile for `n` backends (the last backend is the odd one out); throws on an unknown name. */
export function buildProfile(name: string, n: number): Profile {
  const steady = (delayMs: number): BackendProfile => ({ delayMs, stallEveryMs: 0, stallMs: 0 });
  const fast = Array.from({ length: n }, () => steady(FAST_MS));
  switch (name) {
    case 'equal':
      return { name, summary: `every backend ${FAST_MS} ms`, backends: fast };
    case 'one-slow':
      return { name, summary: `last backend ${SLOW_MS} ms, others ${FAST_MS} ms`, backends: [...fast.slice(1), steady(SLOW_MS)] };
    case 'heterogeneous': {
      // 10 ms up to 120 ms, spaced geometrically: each backend slower than the one before.
      const ms = Array.from({ length: n }, (_, i) => Math.round(10 * 12 ** (n > 1 ? i / (n - 1) : 0)));
      return { name, summary: `backends ${ms.join(' / ')} ms`, backends: ms.map(steady) };
    }
    case 'stall':
      return {
        name, summary: `${FAST_MS} ms each; the last stalls 1000 ms of every 2500 ms`,
        backends: [...fast.slice(1), { delayMs: FAST_MS, stallEveryMs: 2500, stallMs: 1000 }],
      };
    default:
      throw new Error(`unknown profile ${JSON.stringify(name)}; use ${PROFILE_NAMES.join(', ')}`);
  }
}

/** Profiles by comma-separated names for `n` backends. */
export function parseProfiles(list: string, n: number): Profile[] {
  const names = list.split(',').map((s) => s.trim()).filter(Boolean);
  if (!names.length) throw new Error(`no profile named; use ${PROFILE_NAMES.join(', ')}`);
  return names.map((name) => buildProfile(name, n));
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

/** The result of one mode under one profile. */
export interface ModeRun {
  profile: string;
  mode: string;
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
  /** [backend name ('' for an error), latency ms] per request. */
  samples: Array<[string, number]>;
}

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Everything one `lab compare` run measured (results.json). */
export interface CompareResults {
  version: 1;
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
