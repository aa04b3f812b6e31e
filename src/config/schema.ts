// Validation of IPVSProxyConfig objects with the CRD's own openAPIV3Schema (crds/), compiled by
// ajv: the API server and the operator check the same rules, and the schema's defaults fill in
// what a config leaves out. toJsonSchema translates Kubernetes' OpenAPI 3.0 dialect; the checks
// a structural schema cannot make (CIDRs, the CEL rules, unknown fields) and checkJsonShape's
// bounds are made here. Why each: docs/running.md, "Config". The CRD text is passed in
// (src/config/load.ts reads it); this module does no I/O.
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv';
import { ajvClass } from '../util/ajv.js';
import { parseCidr } from '../model/addr.js';
import { parseHostPort } from '../model/host-port.js';
import { type ProxyConfig, defaultProxyConfig } from './types.js';

export const CONFIG_GROUP = 'ipvs-operator.io';
export const CONFIG_VERSION = 'v1alpha1';
export const CONFIG_API_VERSION = `${CONFIG_GROUP}/${CONFIG_VERSION}`;
export const CONFIG_KIND = 'IPVSProxyConfig';
/** The only IPVSProxyConfig the operator reads. */
export const CONFIG_NAME = 'default';

/** How deep a config may nest (the schema's deepest path is metadata.*: a real config is < 10). */
export const MAX_CONFIG_DEPTH = 32;
/** How many values (objects, arrays and leaves) a config may hold in all. */
export const MAX_CONFIG_NODES = 10_000;

/**
 * The CEL rules (x-kubernetes-validations) of the CRD's spec, each with the code that makes the
 * same check here; a unit test fails when the CRD has a rule this list does not know.
 */
export const CEL_RULES: Record<string, (spec: ProxyConfig) => string | undefined> = {
  'self.minSyncPeriod <= self.syncPeriod': (s) =>
    s.minSyncPeriod > s.syncPeriod
      ? `spec.minSyncPeriod = ${s.minSyncPeriod}: must be <= syncPeriod (${s.syncPeriod})`
      : undefined,
};

/**
 * Why `value` is not plain JSON data of a sane size: a value that is not null, boolean, finite
 * number, string, array, plain object or Date (client-node's timestamps); deeper than maxDepth;
 * more than maxNodes values. Iterative:
 * it never overflows the stack, and shared (YAML alias) subtrees count every time they are reached.
 */
export function checkJsonShape(value: unknown, maxDepth = MAX_CONFIG_DEPTH, maxNodes = MAX_CONFIG_NODES,
  root = 'config'): string | undefined {
  // Depth-first with exit marks, so `onPath` holds the objects above the current one: a value
  // reached again below itself is a cycle (a circular YAML alias); one shared by two branches (a
  // repeated alias) is data, counted once per place it appears.
  const EXIT = Symbol('exit');
  const stack: Array<[unknown, string, number] | [typeof EXIT, object]> = [[value, root, 0]];
  const onPath = new Set<object>();
  let nodes = 0;
  while (stack.length) {
    const top = stack.pop()!;
    if (top[0] === EXIT) {
      onPath.delete(top[1] as object);
      continue;
    }
    const [v, where, depth] = top as [unknown, string, number];
    if (++nodes > maxNodes) return `${root}: more than ${maxNodes} values`;
    if (depth > maxDepth) return `${where}: nested more than ${maxDepth} deep`;
    if (v === null || typeof v === 'boolean' || typeof v === 'string') continue;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return `${where}: ${String(v)} is not a finite number`;
      continue;
    }
    // client-node's typed objects carry metadata timestamps as Dates: a leaf, as its JSON string would be.
    if (v instanceof Date) continue;
    if (typeof v === 'object') {
      if (onPath.has(v)) return `${where}: contains itself (a circular alias)`;
      const proto = Object.getPrototypeOf(v) as unknown;
      if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) {
        return `${where}: not plain data (a ${(v as object).constructor?.name ?? 'non-plain object'})`;
      }
      onPath.add(v);
      stack.push([EXIT, v]);
      if (Array.isArray(v)) v.forEach((x, i) => stack.push([x, `${where}[${i}]`, depth + 1]));
      else {
        for (const [k, x] of Object.entries(v)) {
          stack.push([x, where === root ? clip(k) : `${where}.${clip(k)}`, depth + 1]);
        }
      }
      continue;
    }
    return `${where}: a ${typeof v} is not JSON data`;
  }
  return undefined;
}

/** Text cut to `max` characters (a long key or value must not make a huge message). */
function clip(text: string, max = 64): string {
  return text.length > max ? `${text.slice(0, max)}…(${text.length} chars)` : text;
}

/** validateConfig's result: the config merged over the defaults, or every error in one line. */
export type ConfigResult = { ok: true; config: ProxyConfig } | { ok: false; errors: string };

type Json = unknown;

/** The openAPIV3Schema of a CRD's version (the first when unnamed); throws when the CRD has none. */
export function crdSchema(crd: unknown, version = CONFIG_VERSION): Record<string, Json> {
  type Crd = { spec?: { versions?: { name?: string; schema?: { openAPIV3Schema?: unknown } }[] } };
  const versions = (crd as Crd | undefined)?.spec?.versions ?? [];
  const v = versions.find((x) => x.name === version);
  const schema = v?.schema?.openAPIV3Schema;
  if (typeof schema !== 'object' || schema === null) {
    throw new Error(`CRD has no openAPIV3Schema for version ${version}`);
  }
  return schema as Record<string, Json>;
}

/** A Kubernetes (OpenAPI 3.0) schema as a JSON Schema draft-07 one ajv compiles with the same meaning. */
export function toJsonSchema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const src = schema as Record<string, Json>;
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(src)) {
    if (k.startsWith('x-kubernetes-') || k === 'nullable') continue;
    if (k === 'exclusiveMinimum' || k === 'exclusiveMaximum') continue;
    // int32/int64 are ranges the schema states with minimum/maximum where they matter.
    if (k === 'format' && (v === 'int32' || v === 'int64')) continue;
    if (k === 'default' || k === 'enum' || k === 'example') out[k] = v;
    else if (k === 'properties') {
      out[k] = Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, toJsonSchema(s)]));
    }
    else out[k] = toJsonSchema(v);
  }
  // OpenAPI 3.0: `exclusiveMinimum: true` qualifies `minimum`; draft-07 makes it the bound itself.
  if (src.exclusiveMinimum === true && typeof src.minimum === 'number') {
    delete out.minimum;
    out.exclusiveMinimum = src.minimum;
  }
  if (src.exclusiveMaximum === true && typeof src.maximum === 'number') {
    delete out.maximum;
    out.exclusiveMaximum = src.maximum;
  }
  if (src.nullable === true && typeof src.type === 'string') out.type = [src.type, 'null'];
  return out;
}

/** ajv set up for CRD schemas: defaults applied, every error reported, RFC 3339 date-time known. */
export function makeAjv(extra: Options = {}): Ajv {
  const ajv = new (ajvClass())(
    { allErrors: true, useDefaults: true, strict: true, strictRequired: false, verbose: true, ...extra });
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i);
  return ajv;
}

/** Validates IPVSProxyConfig objects against the CRD it was built from. */
export class ConfigValidator {
  private readonly validateFn: ValidateFunction;
  private readonly specFields: ReadonlySet<string>;

  /**
   * Compiles the IPVSProxyConfig CRD's schema; throws when it is not a usable schema. `compiled`:
   * the same schema compiled ahead of time (load.ts passes the generated one for crds/' file).
   */
  constructor(crd: unknown, compiled?: ValidateFunction) {
    const schema = crdSchema(crd);
    this.validateFn = compiled ?? makeAjv().compile(toJsonSchema(schema) as object);
    const spec = (schema.properties as Record<string, { properties?: object }> | undefined)?.spec;
    this.specFields = new Set(Object.keys(spec?.properties ?? {}));
  }

  /**
   * Checks a whole IPVSProxyConfig object (apiVersion/kind may be absent, as in a bare YAML
   * document); on success its spec with the schema's defaults filled in, over defaultProxyConfig.
   * The input is not modified.
   */
  validate(obj: unknown): ConfigResult {
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return { ok: false,
      errors: 'config: must be an object' };
    const shape = checkJsonShape(obj);
    if (shape) return { ok: false, errors: shape };
    const o = structuredClone(obj) as Record<string, unknown>;
    const errors: string[] = [];
    if (o.apiVersion !== undefined && o.apiVersion !== CONFIG_API_VERSION) {
      errors.push(`apiVersion: must be ${CONFIG_API_VERSION} (got ${JSON.stringify(o.apiVersion)})`);
    }
    if (o.kind !== undefined && o.kind !== CONFIG_KIND) {
      errors.push(`kind: must be ${CONFIG_KIND} (got ${JSON.stringify(o.kind)})`);
    }
    if (!this.validateFn(o)) errors.push(...(this.validateFn.errors ?? []).map(formatError));
    const spec = o.spec;
    if (typeof spec === 'object' && spec !== null && !Array.isArray(spec)) {
      const s = spec as Record<string, unknown>;
      for (const k of Object.keys(s)) {
        if (!this.specFields.has(k)) {
          errors.push(`spec.${clip(k)}: unknown field (allowed: ${[...this.specFields].join(', ')})`);
        }
      }
      if (errors.length === 0) errors.push(...checkBeyondSchema(s as unknown as ProxyConfig));
    }
    if (errors.length) return { ok: false, errors: errors.join('; ') };
    return { ok: true, config: { ...defaultProxyConfig, ...(spec as Partial<ProxyConfig>) } };
  }
}

/** What ajv cannot check: CIDRs parse (not just look like one), and the CRD's CEL rules (CEL_RULES). */
function checkBeyondSchema(spec: ProxyConfig): string[] {
  const errors: string[] = [];
  for (const field of ['clusterCIDRs', 'nodePortAddresses', 'excludeCIDRs'] as const) {
    spec[field].forEach((c, i) => {
      if (!parseCidr(c)) {
        errors.push(`spec.${field}[${i}] = ${JSON.stringify(c)}: `
          + 'not a CIDR (address/prefix, prefix <= 32 for IPv4, <= 128 for IPv6)');
      }
    });
  }
  if (spec.healthzBindAddress !== undefined && spec.healthzBindAddress !== '') {
    const parsed = parseHostPort(spec.healthzBindAddress);
    if (!parsed.ok) errors.push(`spec.healthzBindAddress = ${parsed.error}`);
  }
  for (const check of Object.values(CEL_RULES)) {
    const e = check(spec);
    if (e) errors.push(e);
  }
  return errors;
}

/** One ajv error as `spec.field[0] = value: what is wrong`. */
function formatError(e: ErrorObject): string {
  const where = e.instancePath.replace(/^\//, '').replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.') || 'config';
  const value = e.keyword === 'required' || e.keyword === 'additionalProperties'
    ? ''
    : ` = ${clip(JSON.stringify(e.data) ?? String(e.data), 100)}`;
  // `not: {enum: [...]}` (interfaceName: not lo): ajv's own text is "must NOT be valid".
  const notEnum = e.keyword === 'not' ? (e.schema as { enum?: unknown[] } | undefined)?.enum : undefined;
  const message = notEnum
    ? `must not be ${notEnum.map((x) => JSON.stringify(x)).join(' or ')}`
    : e.message ?? 'invalid';
  return `${where}${value}: ${message}`;
}
