// `fo`: weighted failover. The kernel sends every new connection to the available server with the
// highest weight (the first one listed among equals), so what users want to say is an order:
// `{"prefer": [{"zone": "zone-a"}, {"local": true}], "others": 1}` means "zone a first, then this
// node, then anything". Group i of n gets weight n - i + 1, endpoints matching no group get
// `others` (default 1; 0 never uses them); an endpoint belongs to the first group it matches.
// Without `prefer`, `weights` (options.ts) set the order directly; giving both is an error. pure.
import type { SchemaObject } from 'ajv';
import type { WeightedOptions } from './options.js';
import { MAX_WEIGHT, weightOf } from './options.js';
import type { PluginEndpoint } from './types.js';
import { makeWeightedPlugin } from './weighted.js';

/** One preference group: endpoints in a zone, on a node, on this node, or of pods named so. */
export type Preference = { zone: string } | { node: string } | { local: true } | { podPrefix: string };

/** Options of `fo`. */
export interface FailoverOptions extends WeightedOptions {
  prefer?: Preference[];
  others?: number;
}

const preferenceSchema: SchemaObject = {
  type: 'object',
  minProperties: 1,
  maxProperties: 1,
  additionalProperties: false,
  properties: {
    zone: { type: 'string', minLength: 1 },
    node: { type: 'string', minLength: 1 },
    local: { const: true },
    podPrefix: { type: 'string', minLength: 1 },
  },
};

function matches(p: Preference, ep: PluginEndpoint): boolean {
  if ('zone' in p) return ep.zone === p.zone;
  if ('node' in p) return ep.nodeName === p.node;
  if ('local' in p) return ep.local;
  return ep.podName?.startsWith(p.podPrefix) ?? false;
}

/** Weighted failover (kernel scheduler `fo`) with an ordered `prefer` list. */
export const plugin = makeWeightedPlugin<FailoverOptions>({
  name: 'fo',
  description: 'weighted failover: all new connections to the highest-weight server (option prefer: ordered groups)',
  extraOptions: {
    prefer: { type: 'array', minItems: 1, maxItems: 64, items: preferenceSchema },
    others: { type: 'integer', minimum: 0, maximum: MAX_WEIGHT },
  },
  // `prefer` and `weights` are two ways to say the same thing: refuse both at once.
  schemaKeywords: { not: { required: ['prefer', 'weights'] } },
  weights: (o, endpoints, defaultWeight) => {
    const prefer = o.prefer;
    if (!prefer) return endpoints.map((ep) => weightOf(ep, o.weights, defaultWeight));
    return endpoints.map((ep) => {
      const i = prefer.findIndex((p) => matches(p, ep));
      return i < 0 ? (o.others ?? 1) : prefer.length - i + 1;
    });
  },
});

