// Builds the plugins whose kernel scheduler reads weights from the `weights` option. pure: no I/O.
import type { SchemaObject } from 'ajv';
import { type WeightedOptions, optionsSchema, persistenceOf, weightOf } from './options.js';
import type { ClusterViewInput, PluginEndpoint, SchedulerPlugin, WeighedEndpoint } from './types.js';
import { clusterWeight } from '../src/balance/weigh.js';
import { DEFAULT_DAMPING } from '../src/balance/damping.js';
import { formatHostPort } from '../src/model/ipvs.js';

/** What differs between weighted plugins. */
export interface WeightedSpec<O extends WeightedOptions = WeightedOptions> {
  name: string;
  description: string;
  /** Defaults to `name`. */
  kernelScheduler?: string;
  minKernel?: string;
  /** Weight of endpoints no rule matches (1 unless the scheduler reads weights as capacities). */
  defaultWeight?: number;
  /** Extra option properties besides `weights` and `affinityNetmask`. */
  extraOptions?: Record<string, SchemaObject>;
  /** Extra top-level schema keywords (e.g. `not` to refuse two options together). */
  schemaKeywords?: SchemaObject;
  /** Service flags from the options. */
  flags?: (options: O) => number;
  /** Overrides the weights computed from `weights`. */
  weights?: (options: O, endpoints: readonly PluginEndpoint[], defaultWeight: number) => number[];
}

/** A plugin that programs `kernelScheduler` with weights from the `weights` option. */
export function makeWeightedPlugin<O extends WeightedOptions>(spec: WeightedSpec<O>): SchedulerPlugin {
  const kernelScheduler = spec.kernelScheduler ?? spec.name;
  const defaultWeight = spec.defaultWeight ?? 1;
  return {
    name: spec.name,
    description: spec.description,
    kernelScheduler,
    kernelModule: `ip_vs_${kernelScheduler}`,
    ...(spec.minKernel ? { minKernel: spec.minKernel } : {}),
    optionsSchema: { ...optionsSchema(spec.extraOptions ?? {}, defaultWeight), ...spec.schemaKeywords },
    resolve(options, endpoints) {
      const o = options as O;
      const weights = spec.weights
        ? spec.weights(o, endpoints, defaultWeight)
        : endpoints.map((ep) => weightOf(ep, o.weights, defaultWeight));
      const persistence = persistenceOf(o);
      return { scheduler: kernelScheduler, flags: spec.flags?.(o) ?? 0, weights,
        ...(persistence ? { persistence } : {}) };
    },
    // The view's weights come from the estimate of each backend's time in system (Little's law):
    // they scale what the options gave, so per-node or per-zone weights keep their proportions.
    weigh: (endpoints, view) => endpoints.map((e) => scaleByView(e, view)),
  };
}

/**
 * An endpoint's weight × the view's weight for it (the view's top weight, 20, when it does not name
 * it yet); 0 stays 0.
 */
export function scaleByView(e: WeighedEndpoint, view: ClusterViewInput): number {
  return clusterWeight(e.weight, view.weights.get(formatHostPort(e.address, e.port)) ?? DEFAULT_DAMPING.maxWeight);
}

/** A plugin whose kernel scheduler ignores weights (except 0): only `affinityNetmask` is accepted. */
export function makeUnweightedPlugin(spec: { name: string; description: string }): SchedulerPlugin {
  return {
    name: spec.name,
    description: spec.description,
    kernelScheduler: spec.name,
    kernelModule: `ip_vs_${spec.name}`,
    optionsSchema: optionsSchema({}),
    resolve(options, endpoints) {
      const persistence = persistenceOf(options as WeightedOptions);
      return { scheduler: spec.name, flags: 0, weights: endpoints.map(() => 1),
        ...(persistence ? { persistence } : {}) };
    },
  };
}
