// The plugin registry: the built-in schedulers plus extra plugins handed in by the loader
// (src/plugins/load.ts does the file I/O). Each plugin's options schema is compiled once here (the
// built-ins' ahead of time: validators.gen.ts); a plugin that fails validation is reported as a
// problem and skipped, never thrown. pure: no I/O.
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { ajvClass } from '../src/util/ajv.js';
import { AJV_OPTIONS, builtinPlugins } from './builtins.js';
import type { SchedulerPlugin } from './types.js';
import { findUnsafePattern } from './safe-pattern.js';
import * as generated from './validators.gen.js';

export type { PluginContext, PluginEndpoint, Resolution, SchedulerPlugin } from './types.js';
export { unavailableReason } from './availability.js';
export { AJV_OPTIONS, builtinPlugins } from './builtins.js';

/** The built-ins' validators, compiled ahead of time (validators.gen.ts), by plugin object. */
const PREBUILT = new Map(builtinPlugins.flatMap((p) => {
  const v = (generated as unknown as Record<string, ValidateFunction | undefined>)[p.name];
  return v ? [[p, v] as const] : [];
}));

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
  /** Missing until first use for a constructor plugin that is not a built-in; the problem if refused. */
  validate?: ValidateFunction | PluginProblem;
}

/**
 * Plugins by annotation name, with compiled option validators. Build it once at startup. ajv takes
 * about 15 ms per schema on the host, 0.4-4 s under qemu TCG: the built-ins come compiled ahead of
 * time, any other plugin given to the constructor is compiled when a Service first names it, and
 * one added with register() at once (its problems reported as it loads).
 */
export class PluginRegistry {
  /** Made on the first compile: most processes never compile (src/util/ajv.ts). */
  private ajv: Ajv | undefined;
  private readonly entries = new Map<string, Entry>();

  constructor(plugins: readonly SchedulerPlugin[] = builtinPlugins) {
    for (const p of plugins) {
      const problem = this.add(p, 'builtin', false);
      // A broken built-in is our bug, not the user's: fail loudly at construction (its schema is
      // compiled ahead of time, and a unit test checks that file is current).
      if (problem) throw new Error(problem.message);
    }
  }

  /** Adds a plugin after checking its shape and compiling its schema; the problem when refused. */
  register(candidate: unknown, source: string): PluginProblem | undefined {
    return this.add(candidate, source, true);
  }

  private add(candidate: unknown, source: string, compileNow: boolean): PluginProblem | undefined {
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
    const entry: Entry = { plugin, validate: PREBUILT.get(plugin) };
    if (compileNow) {
      const validate = this.compile(plugin, source);
      if (typeof validate !== 'function') return validate;
      entry.validate = validate;
    }
    this.entries.set(plugin.name, entry);
    return undefined;
  }

  /** The plugin's options validator, or why its schema is refused. */
  private compile(plugin: SchedulerPlugin, source: string): ValidateFunction | PluginProblem {
    let validate: ValidateFunction;
    try {
      this.ajv ??= new (ajvClass())(AJV_OPTIONS);
      validate = this.ajv.compile(plugin.optionsSchema);
    } catch (e) {
      return { source, reason: 'InvalidPlugin',
        message: `${source}: options schema does not compile: ${(e as Error).message}` };
    }
    if (!validate({})) {
      return { source, reason: 'InvalidPlugin',
        message: `${source}: "{}" must be valid options (it is what users get by default)` };
    }
    return validate;
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
    entry.validate ??= this.compile(entry.plugin, 'builtin');
    const validate = entry.validate;
    // A built-in's schema refused is our bug (a unit test compiles each); the Service gets the text.
    if (typeof validate !== 'function') return { ok: false, errors: validate.message };
    if (nestingExceeds(options, MAX_OPTIONS_NESTING)) {
      return { ok: false, errors: `options nested deeper than ${MAX_OPTIONS_NESTING} levels` };
    }
    try {
      const copy = structuredClone(options);
      if (validate(copy)) return { ok: true, options: copy };
      return { ok: false, errors: formatErrors(validate.errors ?? []) };
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
