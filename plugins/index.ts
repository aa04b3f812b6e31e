// The plugin registry: the built-in schedulers plus extra plugins handed in by the loader
// (src/plugins/load.ts does the file I/O). Each plugin's options schema is compiled once here; a
// plugin that fails validation is reported as a problem and skipped, never thrown. pure: no I/O.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { plugin as dh } from './dh.js';
import { plugin as fo } from './fo.js';
import { plugin as lblc } from './lblc.js';
import { plugin as lblcr } from './lblcr.js';
import { plugin as lc } from './lc.js';
import { plugin as mh } from './mh.js';
import { plugin as nq } from './nq.js';
import { plugin as ovf } from './ovf.js';
import { plugin as rr } from './rr.js';
import { plugin as sed } from './sed.js';
import { plugin as sh } from './sh.js';
import { plugin as twos } from './twos.js';
import type { SchedulerPlugin } from './types.js';
import { plugin as wlc } from './wlc.js';
import { plugin as wrr } from './wrr.js';
import { findUnsafePattern } from './safe-pattern.js';

export type { PluginContext, PluginEndpoint, Resolution, SchedulerPlugin } from './types.js';
export { unavailableReason } from './availability.js';

/** Every built-in scheduler plugin. */
export const builtinPlugins: readonly SchedulerPlugin[] = [
  rr, wrr, lc, wlc, sed, nq, sh, dh, mh, lblc, lblcr, fo, ovf, twos,
];

/** A plugin that could not be registered: where it came from and why. */
export interface PluginProblem {
  /** File path or "builtin". */
  source: string;
  /** Machine-readable reason, e.g. "InvalidPlugin", "DuplicatePlugin". */
  reason: string;
  message: string;
}

/** Result of validating a Service's options against a plugin's schema. */
export type OptionsResult = { ok: true; options: unknown } | { ok: false; errors: string };

interface Entry {
  plugin: SchedulerPlugin;
  validate: ValidateFunction;
}

/** Plugins by annotation name, with compiled option validators. Build it once at startup. */
export class PluginRegistry {
  private readonly ajv = new Ajv(
    { allErrors: true, useDefaults: true, strict: true, strictRequired: false, verbose: true });
  private readonly entries = new Map<string, Entry>();

  constructor(plugins: readonly SchedulerPlugin[] = builtinPlugins) {
    for (const p of plugins) {
      const problem = this.register(p, 'builtin');
      // A broken built-in is our bug, not the user's: fail loudly at construction, in tests.
      if (problem) throw new Error(problem.message);
    }
  }

  /** Adds a plugin after checking its shape and compiling its schema; the problem when refused. */
  register(candidate: unknown, source: string): PluginProblem | undefined {
    const shapeError = checkPluginShape(candidate);
    if (shapeError) return { source, reason: 'InvalidPlugin', message: `${source}: ${shapeError}` };
    const plugin = candidate as SchedulerPlugin;
    if (this.entries.has(plugin.name)) {
      return { source, reason: 'DuplicatePlugin',
        message: `${source}: a plugin named "${plugin.name}" is already registered` };
    }
    const unsafe = findUnsafePattern(plugin.optionsSchema);
    if (unsafe) {
      return { source, reason: 'InvalidPlugin',
        message: `${source}: options schema refused: ${unsafe} could backtrack without bound on a user's value` };
    }
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(plugin.optionsSchema);
    } catch (e) {
      return { source, reason: 'InvalidPlugin',
        message: `${source}: options schema does not compile: ${(e as Error).message}` };
    }
    if (!validate({})) {
      return { source, reason: 'InvalidPlugin',
        message: `${source}: "{}" must be valid options (it is what users get by default)` };
    }
    this.entries.set(plugin.name, { plugin, validate });
    return undefined;
  }

  /** The plugin named so, or undefined. */
  get(name: string): SchedulerPlugin | undefined {
    return this.entries.get(name)?.plugin;
  }

  /** Registered names, sorted (for "allowed: ..." messages). */
  names(): string[] {
    return [...this.entries.keys()].sort();
  }

  /**
   * Validates (a copy of) options, filling in schema defaults; the ajv error text when invalid.
   * Never throws: values nested deeper than MAX_OPTIONS_NESTING or that cannot be copied (functions,
   * cycles) are refused with an error text.
   */
  validateOptions(name: string, options: unknown): OptionsResult {
    const entry = this.entries.get(name);
    if (!entry) return { ok: false, errors: `no plugin "${name}"` };
    if (nestingExceeds(options, MAX_OPTIONS_NESTING)) {
      return { ok: false, errors: `options nested deeper than ${MAX_OPTIONS_NESTING} levels` };
    }
    try {
      const copy = structuredClone(options);
      if (entry.validate(copy)) return { ok: true, options: copy };
      return { ok: false, errors: formatErrors(entry.validate.errors ?? []) };
    } catch (e) {
      return { ok: false, errors: `options cannot be checked: ${(e as Error)?.message ?? String(e)}` };
    }
  }
}

/** Deepest nesting of objects/arrays validateOptions accepts (plugin options are flat). */
export const MAX_OPTIONS_NESTING = 16;

/** Whether objects/arrays in `value` nest deeper than `max` levels; iterative, so any depth is safe. */
export function nestingExceeds(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  const seen = new Set<object>();
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    if (depth + 1 > max) return true;
    seen.add(v);
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

const NAME = /^[a-z][a-z0-9-]{0,62}$/;
const KERNEL_SCHED = /^[a-z0-9_]{1,15}$/;

/** Why `candidate` is not a SchedulerPlugin, or undefined when it is one. */
export function checkPluginShape(candidate: unknown): string | undefined {
  if (typeof candidate !== 'object' || candidate === null) return 'not an object';
  const p = candidate as Record<string, unknown>;
  if (typeof p.name !== 'string' || !NAME.test(p.name)) return `name must match ${NAME}`;
  if (typeof p.description !== 'string') return 'description must be a string';
  if (typeof p.kernelScheduler !== 'string' || !KERNEL_SCHED.test(p.kernelScheduler)) {
    return `kernelScheduler must match ${KERNEL_SCHED} (IP_VS_SCHEDNAME_MAXLEN is 16 with the NUL)`;
  }
  if (typeof p.kernelModule !== 'string' || !p.kernelModule) return 'kernelModule must be a non-empty string';
  if (p.minKernel !== undefined && (typeof p.minKernel !== 'string' || !/^\d+\.\d+$/.test(p.minKernel))) {
    return 'minKernel must be "major.minor"';
  }
  if (typeof p.optionsSchema !== 'object' || p.optionsSchema === null) return 'optionsSchema must be an object';
  if (typeof p.resolve !== 'function') return 'resolve must be a function';
  if (p.weigh !== undefined && typeof p.weigh !== 'function') return 'weigh, when given, must be a function';
  if (p.ramp !== undefined && typeof p.ramp !== 'function') return 'ramp, when given, must be a function';
  return undefined;
}

/** ajv errors as one line that says where, what is wrong and, where it can, what is allowed. */
export function formatErrors(errors: readonly ErrorObject[]): string {
  return errors.map((e) => {
    const where = `options${e.instancePath.replace(/\//g, '.')}`;
    switch (e.keyword) {
      case 'additionalProperties': {
        const allowed = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
        const extra = (e.params as { additionalProperty: string }).additionalProperty;
        return `${where}: unknown property "${extra}"${allowed.length ? ` (allowed: ${allowed.join(', ')})` : ''}`;
      }
      case 'not': {
        const req = (e.schema as { required?: string[] } | undefined)?.required;
        return req ? `${where}: give at most one of ${req.join(', ')}` : `${where}: ${e.message ?? 'invalid'}`;
      }
      case 'enum':
        return `${where}: must be one of ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`;
      default:
        return `${where}: ${e.message ?? 'invalid'}`;
    }
  }).join('; ');
}
