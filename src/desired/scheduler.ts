// The scheduler annotations, a stable user API:
//   ipvs-operator.io/scheduler: <plugin name>          (default: ProxyConfig.defaultScheduler)
//   ipvs-operator.io/scheduler-options: <JSON object>  (validated against the plugin's schema)
// Any mistake (unknown name, invalid JSON, options failing the schema, a scheduler this kernel
// lacks) leaves the Service served by the default scheduler with default options, and a Problem
// naming the bad value and what is allowed. pure: no I/O.
import { type PluginRegistry, unavailableReason } from '../../plugins/index.js';
import type { PluginContext, SchedulerPlugin } from '../../plugins/types.js';
import { describe, obj, str } from './fields.js';
import type { Problem } from './types.js';

export const SCHEDULER_ANNOTATION = 'ipvs-operator.io/scheduler';
export const SCHEDULER_OPTIONS_ANNOTATION = 'ipvs-operator.io/scheduler-options';

/** The plugin and validated options a Service gets. */
export interface SchedulerChoice {
  plugin: SchedulerPlugin;
  options: unknown;
}

/** The default plugin: config's if registered and available, else `rr`, with a problem. */
export function chooseDefault(
  registry: PluginRegistry, defaultScheduler: string, context: PluginContext, problems: Problem[],
): SchedulerChoice {
  const wanted = registry.get(defaultScheduler);
  const why = wanted
    ? unavailableReason(wanted, context)
    : `no scheduler plugin "${defaultScheduler}" (allowed: ${registry.names().join(', ')})`;
  if (wanted && !why) return { plugin: wanted, options: defaultOptions(registry, wanted.name) };
  problems.push({ service: '', reason: 'InvalidDefaultScheduler', message: `defaultScheduler: ${why}; using rr` });
  const rr = registry.get('rr');
  if (!rr) throw new Error('the plugin registry has no rr'); // the built-ins always have it
  return { plugin: rr, options: {} };
}

function defaultOptions(registry: PluginRegistry, name: string): unknown {
  const read = readOptions(registry, name, '');
  return read.ok ? read.options : {};
}

/** The scheduler for one Service from its annotations; problems appended for every mistake. */
export function chooseScheduler(
  serviceId: string,
  annotations: unknown,
  registry: PluginRegistry,
  fallback: SchedulerChoice,
  context: PluginContext,
  problems: Problem[],
): SchedulerChoice {
  const fallbackNote = `; using the default scheduler "${fallback.plugin.name}"`;
  const map = obj(annotations);
  for (const key of [SCHEDULER_ANNOTATION, SCHEDULER_OPTIONS_ANNOTATION]) {
    if (map?.[key] === undefined || typeof map[key] === 'string') continue;
    problems.push({ service: serviceId, reason: 'InvalidSchedulerOptions',
      message: `${key}: ${describe(map[key])} is not a string${fallbackNote}` });
    return fallback;
  }
  const name = str(map?.[SCHEDULER_ANNOTATION])?.trim();
  const rawOptions = str(map?.[SCHEDULER_OPTIONS_ANNOTATION]);
  let plugin = fallback.plugin;
  if (name) {
    const p = registry.get(name);
    if (!p) {
      problems.push({ service: serviceId, reason: 'UnknownScheduler',
        message: `${SCHEDULER_ANNOTATION}: unknown scheduler "${name}" (allowed: ` +
          `${registry.names().join(', ')})${fallbackNote}` });
      return fallback;
    }
    const why = unavailableReason(p, context);
    if (why) {
      problems.push({ service: serviceId, reason: 'SchedulerUnavailable',
        message: `${SCHEDULER_ANNOTATION}: "${name}": ${why}${fallbackNote}` });
      return fallback;
    }
    plugin = p;
  }
  if (rawOptions === undefined || rawOptions.trim() === '') {
    return plugin === fallback.plugin ? fallback : { plugin, options: defaultOptions(registry, plugin.name) };
  }
  const read = readOptions(registry, plugin.name, rawOptions);
  if (!read.ok) {
    problems.push({ service: serviceId, reason: 'InvalidSchedulerOptions', message: `${read.why}${fallbackNote}` });
    return fallback;
  }
  return { plugin, options: read.options };
}

/** What an options text gives a plugin: its options, checked and frozen, or why they are refused. */
type OptionsRead = { ok: true; options: unknown } | { ok: false; why: string };

/**
 * Reads, by registry, then plugin name and text (a name has no newline): Services written from one
 * template carry one text, and a plugin's schema gives the same answer to it every time (a name
 * keeps its plugin in a registry). Their options are one frozen object. Emptied when full: annotations
 * that churn cost a read each, as without it.
 */
const reads = new WeakMap<PluginRegistry, Map<string, OptionsRead>>();
/** Texts kept per registry: at most MAX_OPTIONS_BYTES each. */
export const MAX_KEPT_OPTION_TEXTS = 1024;

/** The options `text` gives plugin `name` ('' for its defaults), read once per text. */
function readOptions(registry: PluginRegistry, name: string, text: string): OptionsRead {
  let known = reads.get(registry);
  if (!known) reads.set(registry, (known = new Map()));
  const key = [name, text].join('\n');
  let read = known.get(key);
  if (!read) {
    if (known.size >= MAX_KEPT_OPTION_TEXTS) known.clear();
    read = text === '' ? checked(registry, name, {}, text) : parsedAndChecked(registry, name, text);
    known.set(key, read);
  }
  return read;
}

function parsedAndChecked(registry: PluginRegistry, name: string, text: string): OptionsRead {
  const tooBig = optionsTooBig(text);
  if (tooBig) return { ok: false, why: `${SCHEDULER_OPTIONS_ANNOTATION}: ${tooBig}; given ${truncate(text)}` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { ok: false, why: `${SCHEDULER_OPTIONS_ANNOTATION}: not JSON (${(e as Error).message}): ` +
      `${truncate(text)}; expected a JSON object for "${name}"` };
  }
  return checked(registry, name, parsed, text);
}

function checked(registry: PluginRegistry, name: string, parsed: unknown, text: string): OptionsRead {
  const v = registry.validateOptions(name, parsed);
  if (!v.ok) {
    return { ok: false, why: `${SCHEDULER_OPTIONS_ANNOTATION} for "${name}": ${v.errors}; given ${truncate(text)}` };
  }
  return { ok: true, options: deepFreeze(v.options) };
}

/** `v` frozen all the way down: validateOptions' own copy, plain data nested at most MAX_OPTIONS_DEPTH. */
function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const child of Object.values(v)) deepFreeze(child);
  }
  return v;
}

/** Limits on the options annotation, checked before JSON.parse (options are a few flat keys). */
export const MAX_OPTIONS_BYTES = 4096;
/** Deepest nesting of objects/arrays allowed in the options annotation. */
export const MAX_OPTIONS_DEPTH = 16;

/**
 * Why `text` is refused before parsing (too long, or nested deeper than MAX_OPTIONS_DEPTH), or
 * undefined. The depth is counted by a scan outside string literals, without recursion, so a
 * 2,000-deep document cannot overflow the stack in JSON.parse, structuredClone or the schema check.
 */
export function optionsTooBig(text: string): string | undefined {
  if (text.length > MAX_OPTIONS_BYTES) return `${text.length} characters exceed the limit of ${MAX_OPTIONS_BYTES}`;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_OPTIONS_DEPTH) return `nested deeper than ${MAX_OPTIONS_DEPTH} levels`;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}

function truncate(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}...` : s;
}
