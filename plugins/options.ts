// Options shared by the built-in plugins, and the one place that turns them into weights:
// `weights` (default, byNode, byZone, local, byPod, bySliceLabel; the most specific rule wins,
// weight 0 keeps an endpoint programmed but idle) and `affinityNetmask` (groups clients by subnet
// for sessionAffinity: ClientIP). Only what EndpointSlices carry can select endpoints, not Pod
// labels. Their JSON forms and examples: plugins/README.md. pure: no I/O.
import type { SchemaObject } from 'ajv';
import type { PluginEndpoint, Resolution } from './types.js';

/** IPVS weights are ints; we cap them well below INT_MAX so sums cannot overflow in schedulers. */
export const MAX_WEIGHT = 65535;

const weight = { type: 'integer', minimum: 0, maximum: MAX_WEIGHT } as const;

/** Schema of `weights`, with the plugin's default weight. */
export function weightsSchema(defaultWeight: number): SchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    properties: {
      default: { ...weight, default: defaultWeight },
      byNode: { type: 'object', additionalProperties: weight, propertyNames: { minLength: 1, maxLength: 253 } },
      byZone: { type: 'object', additionalProperties: weight, propertyNames: { minLength: 1, maxLength: 253 } },
      local: weight,
      byPod: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['weight'],
          minProperties: 2,
          properties: { prefix: { type: 'string', minLength: 1 }, name: { type: 'string', minLength: 1 }, weight },
        },
      },
      bySliceLabel: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['selector', 'weight'],
          properties: {
            selector: { type: 'object', minProperties: 1, additionalProperties: { type: 'string' } },
            weight,
          },
        },
      },
    },
  };
}

/** Schema of `affinityNetmask`. */
export const affinityNetmaskSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    ipv4: { type: 'integer', minimum: 0, maximum: 32 },
    ipv6: { type: 'integer', minimum: 0, maximum: 128 },
  },
};

/** Parsed `weights` option. */
export interface WeightOptions {
  default?: number;
  byNode?: Record<string, number>;
  byZone?: Record<string, number>;
  local?: number;
  byPod?: Array<{ prefix?: string; name?: string; weight: number }>;
  bySliceLabel?: Array<{ selector: Record<string, string>; weight: number }>;
}

/** Options every weighted built-in accepts. */
export interface WeightedOptions {
  weights?: WeightOptions;
  affinityNetmask?: { ipv4?: number; ipv6?: number };
}

/** The weight of one endpoint under `weights` (see the file comment for precedence). */
export function weightOf(ep: PluginEndpoint, w: WeightOptions | undefined, defaultWeight: number): number {
  if (!w) return defaultWeight;
  if (w.byPod && ep.podName) {
    const pod = ep.podName;
    const rule = w.byPod.find((r) =>
      (r.name !== undefined && r.name === pod) || (r.prefix !== undefined && pod.startsWith(r.prefix)));
    if (rule) return rule.weight;
  }
  if (w.bySliceLabel) {
    const rule = w.bySliceLabel.find((r) => Object.entries(r.selector).every(([k, v]) => ep.sliceLabels[k] === v));
    if (rule) return rule.weight;
  }
  if (ep.nodeName !== undefined && w.byNode?.[ep.nodeName] !== undefined) return w.byNode[ep.nodeName]!;
  if (ep.local && w.local !== undefined) return w.local;
  if (ep.zone !== undefined && w.byZone?.[ep.zone] !== undefined) return w.byZone[ep.zone]!;
  return w.default ?? defaultWeight;
}

/** Persistence netmasks from `affinityNetmask`, in a Resolution's terms. */
export function persistenceOf(o: WeightedOptions): Resolution['persistence'] {
  if (!o.affinityNetmask) return undefined;
  const p: NonNullable<Resolution['persistence']> = {};
  if (o.affinityNetmask.ipv4 !== undefined) p.ipv4Prefix = o.affinityNetmask.ipv4;
  if (o.affinityNetmask.ipv6 !== undefined) p.ipv6Prefix = o.affinityNetmask.ipv6;
  return p;
}

/** Schema of an options object: `affinityNetmask`, optionally `weights`, plus extra properties. */
export function optionsSchema(extra: Record<string, SchemaObject>, defaultWeight?: number): SchemaObject {
  const properties: Record<string, SchemaObject> = { affinityNetmask: affinityNetmaskSchema, ...extra };
  if (defaultWeight !== undefined) properties.weights = weightsSchema(defaultWeight);
  return { type: 'object', additionalProperties: false, properties };
}
