// Slow start: a real server that joins a Service's table ramps its weight up over a window
// (`ipvs-operator.io/slow-start: 30s`), as Envoy's and HAProxy's slow start do, through SET_DEST
// (update-dest), which keeps every established connection where it is. Only for schedulers that
// use weights as shares (wrr, wlc, sed, nq, twos); others get a Problem. Real servers of a virtual
// server seen for the first time take their full weight at once, so a restart ends any ramp.
// Why each: docs/balance.md ("Slow start"). pure: no I/O; time is an argument.
import type { DesiredTable, DesiredVirtualServer, Problem } from '../model/desired.js';
import { type RealServer, realServerKey } from '../model/ipvs.js';
import { MAX_WEIGHT, RAMP_RESOLUTION, composeWeight } from './weights.js';
import { overlayTable } from './overlay.js';

/** The annotation: a duration ("30s", "2m", "1m30s", "500ms"); "0s" turns slow start off. */
export const SLOW_START_ANNOTATION = 'ipvs-operator.io/slow-start';

/** The longest window accepted: one hour. */
export const MAX_SLOW_START_MS = 3_600_000;

/** The shortest step between two weight changes of one real server. */
export const MIN_RAMP_STEP_MS = 1000;

/** Steps a window is divided into at most (fewer when the window is short: MIN_RAMP_STEP_MS). */
export const RAMP_STEPS = 20;

/** Kernel schedulers whose weights are shares compared as ratios: slow start applies to these. */
export const RAMPABLE_SCHEDULERS: ReadonlySet<string> = new Set(['wrr', 'wlc', 'sed', 'nq', 'twos']);

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses the annotation's value: a Go-style duration of one or more <integer or decimal><unit>
 * parts (ms, s, m, h). The window in ms (0 = off), or an error message for a Problem.
 */
export function parseSlowStart(value: unknown): { ms: number } | { error: string } {
  if (typeof value !== 'string') return { error: `${SLOW_START_ANNOTATION}: ${JSON.stringify(value)} is not a string` };
  const text = value.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) {
    return { error: `${SLOW_START_ANNOTATION}: "${value}" is not a duration such as 30s, 2m or 1m30s` };
  }
  let ms = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  ms = Math.round(ms);
  if (ms !== 0 && ms < MIN_RAMP_STEP_MS) return { error: `${SLOW_START_ANNOTATION}: "${value}" is shorter than 1s` };
  if (ms > MAX_SLOW_START_MS) return { error: `${SLOW_START_ANNOTATION}: "${value}" is longer than 1h` };
  return { ms };
}

/** Why slow start does not apply to a kernel scheduler; undefined when it does. */
export function slowStartInapplicable(scheduler: string): string | undefined {
  if (RAMPABLE_SCHEDULERS.has(scheduler)) return undefined;
  switch (scheduler) {
    case 'rr': case 'lc': case 'dh':
      return `scheduler ${scheduler} ignores weights (only 0 matters), so there is no weight to ramp`;
    case 'sh': case 'mh':
      return `scheduler ${scheduler} hashes clients onto servers by weight; ramping would remap clients at every step`;
    case 'lblc': case 'lblcr': case 'ovf':
      return `scheduler ${scheduler} compares weights with connection counts (overload thresholds); a ramp would ` +
        `change what it does`;
    case 'fo':
      return 'scheduler fo sends everything to the highest weight, so there is no share to ramp';
    default:
      return `scheduler ${scheduler} is not known to use weights as shares`;
  }
}

/** The time between two steps of a window's ramp. */
export function rampStep(windowMs: number): number {
  return Math.max(MIN_RAMP_STEP_MS, Math.ceil(windowMs / RAMP_STEPS));
}

/**
 * The ramp factor in [0, 1] at `now` of a real server first seen at `firstSeen` (-Infinity:
 * established, 1), rising in steps of rampStep(window): 0 at first, 1 from firstSeen + window on.
 */
export function rampFactor(firstSeen: number, now: number, windowMs: number): number {
  const elapsed = now - firstSeen;
  if (!(elapsed < windowMs)) return 1;
  if (elapsed <= 0) return 0;
  const step = rampStep(windowMs);
  return Math.min(1, (Math.floor(elapsed / step) * step) / windowMs);
}

/** When rampFactor next changes, or undefined once the ramp is over. */
export function nextRampAt(firstSeen: number, now: number, windowMs: number): number | undefined {
  const elapsed = now - firstSeen;
  if (!(elapsed < windowMs)) return undefined;
  const step = rampStep(windowMs);
  return Math.min(firstSeen + windowMs, firstSeen + (Math.max(0, Math.floor(elapsed / step)) + 1) * step);
}

/** The desired table with ramped weights, and when the next step is due. */
export interface RampResult {
  table: DesiredTable;
  /** The earliest time a weight moves next (ms, the `now` clock); undefined when none ramps. */
  nextAt?: number;
}

/**
 * Remembers when each real server of a slow-start virtual server was first seen and rewrites their
 * weights (composeWeight) in the table the planner gets. O(changed + ramping virtual servers) per
 * call; virtual servers without slow start pass through untouched.
 */
/** A plugin's ramp() (plugins/types.ts), as SlowStartTracker calls it. */
export type Ramp = (endpoints: readonly { address: string; port: number; weight: number; factor: number }[]) =>
  number[];

export class SlowStartTracker {
  /** Per virtual server key, the problem of a plugin ramp() that failed there. */
  private readonly failed = new Map<string, Problem>();

  /** `rampOf`: a scheduler plugin's own ramp(), by plugin name, if it has one. */
  constructor(private readonly rampOf: (plugin: string) => Ramp | undefined = () => undefined) {}

  /** The problems of plugins' ramp() answers refused (the sync loop reports them with its own). */
  get problems(): Problem[] {
    // One per Service: its ClusterIP, NodePort and other virtual servers fail alike.
    return [...new Map([...this.failed.values()].map((p) => [p.service, p])).values()];
  }

  /** Per slow-start virtual server key: real server key -> first seen (-Infinity: established). */
  private readonly seen = new Map<string, Map<string, number>>();
  /** The rewritten entries, one per slow-start virtual server. */
  private readonly out = new Map<string, DesiredVirtualServer>();
  /** Virtual servers with a real server still ramping -> when the next step is due. */
  private readonly ramping = new Map<string, number>();

  /**
   * Rewrites the entries of `changed` and of the ramping virtual servers; adds to `changed` each
   * key whose ramped weights moved although its desired entry did not, so the planner plans it.
   */
  apply(table: DesiredTable, changed: Set<string>, now: number): RampResult {
    const keys = new Set<string>(changed);
    for (const k of this.ramping.keys()) keys.add(k);
    for (const key of keys) {
      const e = table.get(key);
      if (!e || e.slowStartMs === undefined) {
        this.failed.delete(key);
        this.seen.delete(key);
        this.out.delete(key);
        this.ramping.delete(key);
        continue;
      }
      const window = e.slowStartMs;
      const prev = this.seen.get(key);
      const next = new Map<string, number>();
      let due: number | undefined;
      const factors = e.dests.map((rs) => {
        const rkey = realServerKey(rs);
        const first = prev?.get(rkey) ?? (prev ? now : -Infinity);
        next.set(rkey, first);
        const at = nextRampAt(first, now, window);
        if (at !== undefined && (due === undefined || at < due)) due = at;
        return rampFactor(first, now, window);
      });
      const dests = this.ramped(key, e, factors);
      this.seen.set(key, next);
      const before = this.out.get(key);
      if (before && !changed.has(key) && before.dests.some((rs, i) => rs.weight !== dests[i]!.weight)) changed.add(key);
      this.out.set(key, { ...e, dests });
      if (due === undefined) this.ramping.delete(key);
      else this.ramping.set(key, due);
    }
    let nextAt: number | undefined;
    for (const at of this.ramping.values()) if (nextAt === undefined || at < nextAt) nextAt = at;
    const result: RampResult = { table: this.out.size ? overlayTable(table, this.out) : table };
    if (nextAt !== undefined) result.nextAt = nextAt;
    return result;
  }

  /**
   * The weights of one slow-start virtual server: the plugin's ramp() when it has one (given
   * frozen copies; its answer checked, a refusal a PluginRampFailed problem on the Service), else
   * composeWeight of each base weight and ramp factor.
   */
  private ramped(key: string, e: DesiredVirtualServer, factors: readonly number[]): RealServer[] {
    const byDefault = () =>
      e.dests.map((rs, i) => ({ ...rs, weight: composeWeight({ base: rs.weight, slowStart: factors[i]! }) }));
    const ramp = this.rampOf(e.origin.plugin);
    this.failed.delete(key);
    if (!ramp) return byDefault();
    try {
      const answer: unknown = ramp(
        Object.freeze(
          e.dests.map((rs, i) =>
            Object.freeze({ address: rs.address, port: rs.port, weight: rs.weight, factor: factors[i]! }))));
      if (!Array.isArray(answer) || answer.length !== e.dests.length
        || answer.some((x) => !Number.isInteger(x) || x < 0 || x > MAX_WEIGHT)) {
        throw new Error(
          `ramp() must return ${e.dests.length} integers in 0..${MAX_WEIGHT}, got ` +
          `${JSON.stringify(answer)?.slice(0, 120)}`);
      }
      return e.dests.map((rs, i) => ({ ...rs, weight: answer[i] as number }));
    } catch (err) {
      this.failed.set(key, { service: `${e.origin.namespace}/${e.origin.name}`, reason: 'PluginRampFailed',
        message: `plugin ${e.origin.plugin}: ${(err as Error).message}; the default ramp (weight × ` +
          `${RAMP_RESOLUTION} × progress)` });
      return byDefault();
    }
  }

  /** The ramp factor of one real server now (1 when established or unknown): for status and plugins. */
  factor(vsKey: string, rsKey: string, now: number): number {
    const first = this.seen.get(vsKey)?.get(rsKey);
    const window = this.out.get(vsKey)?.slowStartMs;
    return first === undefined || window === undefined ? 1 : rampFactor(first, now, window);
  }
}

/**
 * The slow-start window the Service's annotations ask for, in ms; undefined when absent, empty,
 * "0s" or invalid (an InvalidSlowStart problem on this Service only).
 */
export function chooseSlowStart(serviceId: string, annotations: Record<string, unknown> | undefined,
  problems: { service: string; reason: string; message: string }[]): number | undefined {
  const raw = annotations?.[SLOW_START_ANNOTATION];
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return undefined;
  const r = parseSlowStart(raw);
  if ('error' in r) {
    problems.push({ service: serviceId, reason: 'InvalidSlowStart', message: `${r.error}; no slow start` });
    return undefined;
  }
  return r.ms || undefined;
}
