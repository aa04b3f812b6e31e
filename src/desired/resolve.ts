// Running a Service's scheduler plugin without trusting it: each call gets frozen copies of what
// it reads, and an answer that is not usable (a throw, the wrong weight count, a scheduler the
// kernel lacks) is a Problem and the default scheduler answers instead. pure: no I/O.
import type { PluginEndpoint, PluginContext, Resolution } from '../../plugins/types.js';
import type { SchedulerChoice } from './scheduler.js';
import type { Problem } from './types.js';
import type { BuildEnv } from './service-parse.js';

/**
 * Runs the plugin; an extra plugin that throws or answers nonsense (wrong weight count, negative
 * weights, a scheduler the kernel lacks) is reported and the default scheduler used instead.
 */
export function resolveSafely(
  choice: SchedulerChoice, env: BuildEnv, eps: readonly PluginEndpoint[], id: string, problems: Problem[],
): Resolution {
  // A plugin gets frozen values only: one that mutates what it is given (the shared set of kernel
  // schedulers, the endpoints, the options) changes nothing another Service sees.
  const context = frozenContext(env.context);
  const attempt = (c: SchedulerChoice): Resolution | string => {
    try {
      const res: unknown = c.plugin.resolve(deepFrozenCopy(c.options), frozenEndpoints(eps), context);
      return checkResolution(res, eps.length, env.context.availableSchedulers);
    } catch (e) {
      return `threw: ${firstLineOf(e)}`;
    }
  };
  const first = attempt(choice);
  if (typeof first !== 'string') return first;
  problems.push({ service: id, reason: 'SchedulerPluginFailed',
    message: `plugin "${choice.plugin.name}" ${first}; using the default scheduler "${env.fallback.plugin.name}"` });
  const second = choice === env.fallback ? first : attempt(env.fallback);
  if (typeof second !== 'string') return second;
  return { scheduler: 'rr', flags: 0, weights: eps.map(() => 1) };
}

/**
 * A plugin's answer checked field by field (getters that throw are caught by the caller); the
 * reason when it is not usable.
 */
function checkResolution(res: unknown, n: number, available: ReadonlySet<string> | undefined): Resolution | string {
  if (typeof res !== 'object' || res === null) return 'returned no resolution';
  const r = res as Record<string, unknown>;
  const scheduler = r.scheduler;
  if (typeof scheduler !== 'string' || !/^[a-z0-9_]{1,15}$/.test(scheduler)) return 'returned no valid scheduler name';
  const weights = r.weights;
  if (!Array.isArray(weights) || weights.length !== n) {
    return `returned ${Array.isArray(weights) ? weights.length : 'no'} weights for ${n} endpoints`;
  }
  if (!weights.every((w) => Number.isInteger(w) && w >= 0 && w <= 0x7fffffff)) {
    return 'returned a weight that is not an integer in [0, 2^31)';
  }
  if (available && !available.has(scheduler)) return `chose scheduler "${scheduler}" which the kernel lacks`;
  const p = r.persistence;
  let persistence: Resolution['persistence'];
  if (p !== undefined) {
    if (typeof p !== 'object' || p === null) return 'returned a persistence that is not an object';
    const { ipv4Prefix, ipv6Prefix } = p as Record<string, unknown>;
    if (ipv4Prefix !== undefined
      && !(Number.isInteger(ipv4Prefix) && (ipv4Prefix as number) >= 0 && (ipv4Prefix as number) <= 32)) {
      return 'returned an ipv4Prefix outside 0..32';
    }
    if (ipv6Prefix !== undefined
      && !(Number.isInteger(ipv6Prefix) && (ipv6Prefix as number) >= 0 && (ipv6Prefix as number) <= 128)) {
      return 'returned an ipv6Prefix outside 0..128';
    }
    persistence = { ...(ipv4Prefix === undefined ? {} : { ipv4Prefix: ipv4Prefix as number }),
      ...(ipv6Prefix === undefined ? {} : { ipv6Prefix: ipv6Prefix as number }) };
  }
  const flags = Number.isInteger(r.flags) && (r.flags as number) >= 0 && (r.flags as number) <= 0xffff
    ? r.flags as number : 0;
  return { scheduler, flags, weights: [...weights] as number[], ...(persistence ? { persistence } : {}) };
}

/** Frozen copies made, by original: the fallback's options and the context are the same object for
 * every Service. An original is never changed once a build reads it (chooseScheduler, environment.ts). */
const frozenCopies = new WeakMap<object, unknown>();

/** A deep copy of plain data, frozen all the way down (primitives as they are). */
function deepFrozenCopy<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  const known = frozenCopies.get(v);
  if (known !== undefined) return known as T;
  const copy = frozenData(v);
  frozenCopies.set(v, copy);
  return copy as T;
}

/**
 * A frozen copy of JSON-like data (options come from JSON.parse and the schema's defaults): lists
 * and records copied field by field, about 3x faster than structuredClone on a small record.
 * fromEntries defines each key as its own property, "__proto__" too.
 */
function frozenData(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return Object.freeze(v.map(frozenData));
  const record = v as Record<string, unknown>;
  return Object.freeze(Object.fromEntries(Object.keys(record).map((k) => [k, frozenData(record[k])])));
}

/**
 * The endpoints as a frozen list of frozen records: collectEndpoints freezes what it makes, so
 * those are passed as they are; any other is copied field-wise, its nested records and lists too.
 * A field added to PluginEndpoint that holds an object must be checked and copied here.
 */
function frozenEndpoints(eps: readonly PluginEndpoint[]): readonly PluginEndpoint[] {
  return Object.freeze(eps.map((e) => (deepFrozen(e) ? e : Object.freeze({
    ...e,
    sliceLabels: Object.freeze({ ...e.sliceLabels }),
    ...(e.zoneHints ? { zoneHints: Object.freeze([...e.zoneHints]) } : {}),
    ...(e.nodeHints ? { nodeHints: Object.freeze([...e.nodeHints]) } : {}),
  }))));
}

/** Whether the endpoint and every object it holds are frozen (its other fields are primitives). */
function deepFrozen(e: PluginEndpoint): boolean {
  return Object.isFrozen(e) && Object.isFrozen(e.sliceLabels)
    && (!e.zoneHints || Object.isFrozen(e.zoneHints)) && (!e.nodeHints || Object.isFrozen(e.nodeHints));
}

/** The plugin context with a read-only view of the scheduler set (a frozen Set can still be added to). */
function frozenContext(c: PluginContext): PluginContext {
  const known = frozenCopies.get(c);
  if (known !== undefined) return known as PluginContext;
  const set = c.availableSchedulers;
  const view: ReadonlySet<string> | undefined = set && Object.freeze({
    has: (x: string) => set.has(x), get size() { return set.size; },
    forEach: (f: (v: string, k: string, s: ReadonlySet<string>) => void) => set.forEach((v) => f(v, v, view!)),
    entries: () => set.entries(), keys: () => set.keys(), values: () => set.values(),
    [Symbol.iterator]: () => set.values(),
  } as ReadonlySet<string>);
  const frozen = Object.freeze({ ...c, ...(view ? { availableSchedulers: view } : {}) });
  frozenCopies.set(c, frozen);
  return frozen;
}

function firstLineOf(e: unknown): string {
  try {
    return String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 300);
  } catch {
    return 'an unprintable error';
  }
}
