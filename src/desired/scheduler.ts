// The scheduler annotations, a stable user API:
//   ipvs-operator.io/scheduler: <plugin name>          (default: ProxyConfig.defaultScheduler)
//   ipvs-operator.io/scheduler-options: <JSON object>  (validated against the plugin's schema)
// Any mistake (unknown name, invalid JSON, options failing the schema, a scheduler this kernel
// lacks) leaves the Service served by the default scheduler with default options, and a Problem
// naming the bad value and what is allowed. pure: no I/O.
import { type PluginRegistry, unavailableReason } from '../../plugins/index.js';
import type { PluginContext, SchedulerPlugin } from '../../plugins/types.js';
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
  const why = wanted ? unavailableReason(wanted, context) : `no scheduler plugin "${defaultScheduler}" (allowed: ${registry.names().join(', ')})`;
  if (wanted && !why) return { plugin: wanted, options: defaultOptions(registry, wanted.name) };
  problems.push({ service: '', reason: 'InvalidDefaultScheduler', message: `defaultScheduler: ${why}; using rr` });
  const rr = registry.get('rr');
  if (!rr) throw new Error('the plugin registry has no rr'); // the built-ins always have it
  return { plugin: rr, options: {} };
}

function defaultOptions(registry: PluginRegistry, name: string): unknown {
  const v = registry.validateOptions(name, {});
  return v.ok ? v.options : {};
}

/** The scheduler for one Service from its annotations; problems appended for every mistake. */
export function chooseScheduler(
  serviceId: string,
  annotations: Readonly<Record<string, string>> | undefined,
  registry: PluginRegistry,
  fallback: SchedulerChoice,
  context: PluginContext,
  problems: Problem[],
): SchedulerChoice {
  const name = annotations?.[SCHEDULER_ANNOTATION]?.trim();
  const rawOptions = annotations?.[SCHEDULER_OPTIONS_ANNOTATION];
  const fallbackNote = `; using the default scheduler "${fallback.plugin.name}"`;
  let plugin = fallback.plugin;
  if (name) {
    const p = registry.get(name);
    if (!p) {
      problems.push({ service: serviceId, reason: 'UnknownScheduler',
        message: `${SCHEDULER_ANNOTATION}: unknown scheduler "${name}" (allowed: ${registry.names().join(', ')})${fallbackNote}` });
      return fallback;
    }
    const why = unavailableReason(p, context);
    if (why) {
      problems.push({ service: serviceId, reason: 'SchedulerUnavailable', message: `${SCHEDULER_ANNOTATION}: "${name}": ${why}${fallbackNote}` });
      return fallback;
    }
    plugin = p;
  }
  if (rawOptions === undefined || rawOptions.trim() === '') {
    return plugin === fallback.plugin ? fallback : { plugin, options: defaultOptions(registry, plugin.name) };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(rawOptions);
  } catch (e) {
    problems.push({ service: serviceId, reason: 'InvalidSchedulerOptions',
      message: `${SCHEDULER_OPTIONS_ANNOTATION}: not JSON (${(e as Error).message}): ${truncate(rawOptions)}; expected a JSON object for "${plugin.name}"${fallbackNote}` });
    return fallback;
  }
  const v = registry.validateOptions(plugin.name, parsed);
  if (!v.ok) {
    problems.push({ service: serviceId, reason: 'InvalidSchedulerOptions',
      message: `${SCHEDULER_OPTIONS_ANNOTATION} for "${plugin.name}": ${v.errors}; given ${truncate(rawOptions)}${fallbackNote}` });
    return fallback;
  }
  return { plugin, options: v.options };
}

function truncate(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}...` : s;
}
