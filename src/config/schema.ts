// Validation of IPVSProxyConfig objects with the CRD's own openAPIV3Schema (crds/ipvsproxyconfigs.yaml),
// compiled by ajv: the API server and the operator check the same rules, and the schema's defaults
// fill in what a config leaves out. The CRD text is passed in (src/config/load.ts reads the file);
// this module does no I/O.
//
// Kubernetes' schema dialect is OpenAPI 3.0, not the JSON Schema draft ajv speaks; toJsonSchema
// translates the few differences (boolean exclusiveMinimum/Maximum, nullable, x-kubernetes-*
// extensions, int32/int64 formats). Three checks a structural schema cannot make are made here:
// every CIDR parses, minSyncPeriod <= syncPeriod, and no unknown spec field (the API server prunes
// unknown fields silently; a YAML directory has no server, and a typo must not pass unnoticed).
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parseCidr } from '../model/addr.js';
import { type ProxyConfig, defaultProxyConfig } from '../desired/types.js';

export const CONFIG_GROUP = 'ipvs-operator.io';
export const CONFIG_VERSION = 'v1alpha1';
export const CONFIG_API_VERSION = `${CONFIG_GROUP}/${CONFIG_VERSION}`;
export const CONFIG_KIND = 'IPVSProxyConfig';
/** The only IPVSProxyConfig the operator reads. */
export const CONFIG_NAME = 'default';

/** validateConfig's result: the config merged over the defaults, or every error in one line. */
export type ConfigResult = { ok: true; config: ProxyConfig } | { ok: false; errors: string };

type Json = unknown;

/** The openAPIV3Schema of a CRD's version (the first when unnamed); throws when the CRD has none. */
export function crdSchema(crd: unknown, version = CONFIG_VERSION): Record<string, Json> {
  const versions = (crd as { spec?: { versions?: { name?: string; schema?: { openAPIV3Schema?: unknown } }[] } } | undefined)
    ?.spec?.versions ?? [];
  const v = versions.find((x) => x.name === version);
  const schema = v?.schema?.openAPIV3Schema;
  if (typeof schema !== 'object' || schema === null) throw new Error(`CRD has no openAPIV3Schema for version ${version}`);
  return schema as Record<string, Json>;
}

/** A Kubernetes (OpenAPI 3.0) schema as a JSON Schema draft-07 one ajv compiles with the same meaning. */
export function toJsonSchema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const src = schema as Record<string, Json>;
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(src)) {
    if (k.startsWith('x-kubernetes-') || k === 'nullable' || k === 'exclusiveMinimum' || k === 'exclusiveMaximum') continue;
    // int32/int64 are ranges the schema states with minimum/maximum where they matter.
    if (k === 'format' && (v === 'int32' || v === 'int64')) continue;
    if (k === 'default' || k === 'enum' || k === 'example') out[k] = v;
    else if (k === 'properties') out[k] = Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, toJsonSchema(s)]));
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
export function makeAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true, strictRequired: false, verbose: true });
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i);
  return ajv;
}

/** Validates IPVSProxyConfig objects against the CRD it was built from. */
export class ConfigValidator {
  private readonly validateFn: ValidateFunction;
  private readonly specFields: ReadonlySet<string>;

  /** Compiles the IPVSProxyConfig CRD's schema; throws when it is not a usable schema. */
  constructor(crd: unknown) {
    const schema = crdSchema(crd);
    this.validateFn = makeAjv().compile(toJsonSchema(schema) as object);
    const spec = (schema.properties as Record<string, { properties?: object }> | undefined)?.spec;
    this.specFields = new Set(Object.keys(spec?.properties ?? {}));
  }

  /**
   * Checks a whole IPVSProxyConfig object (apiVersion/kind may be absent, as in a bare YAML
   * document); on success its spec with the schema's defaults filled in, over defaultProxyConfig.
   * The input is not modified.
   */
  validate(obj: unknown): ConfigResult {
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return { ok: false, errors: 'config: must be an object' };
    const o = structuredClone(obj) as Record<string, unknown>;
    const errors: string[] = [];
    if (o.apiVersion !== undefined && o.apiVersion !== CONFIG_API_VERSION) {
      errors.push(`apiVersion: must be ${CONFIG_API_VERSION} (got ${JSON.stringify(o.apiVersion)})`);
    }
    if (o.kind !== undefined && o.kind !== CONFIG_KIND) errors.push(`kind: must be ${CONFIG_KIND} (got ${JSON.stringify(o.kind)})`);
    if (!this.validateFn(o)) errors.push(...(this.validateFn.errors ?? []).map(formatError));
    const spec = o.spec;
    if (typeof spec === 'object' && spec !== null && !Array.isArray(spec)) {
      const s = spec as Record<string, unknown>;
      for (const k of Object.keys(s)) {
        if (!this.specFields.has(k)) errors.push(`spec.${k}: unknown field (allowed: ${[...this.specFields].join(', ')})`);
      }
      if (errors.length === 0) errors.push(...checkBeyondSchema(s as unknown as ProxyConfig));
    }
    if (errors.length) return { ok: false, errors: errors.join('; ') };
    return { ok: true, config: { ...defaultProxyConfig, ...(spec as Partial<ProxyConfig>) } };
  }
}

/** What the schema cannot say: CIDRs parse (not just look like one), minSyncPeriod <= syncPeriod. */
function checkBeyondSchema(spec: ProxyConfig): string[] {
  const errors: string[] = [];
  for (const field of ['clusterCIDRs', 'nodePortAddresses', 'excludeCIDRs'] as const) {
    spec[field].forEach((c, i) => {
      if (!parseCidr(c)) errors.push(`spec.${field}[${i}] = ${JSON.stringify(c)}: not a CIDR (address/prefix, prefix <= 32 for IPv4, <= 128 for IPv6)`);
    });
  }
  if (spec.minSyncPeriod > spec.syncPeriod) {
    errors.push(`spec.minSyncPeriod = ${spec.minSyncPeriod}: must be <= syncPeriod (${spec.syncPeriod})`);
  }
  return errors;
}

/** One ajv error as `spec.field[0] = value: what is wrong`. */
function formatError(e: ErrorObject): string {
  const where = e.instancePath.replace(/^\//, '').replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.') || 'config';
  const value = e.keyword === 'required' || e.keyword === 'additionalProperties' ? '' : ` = ${JSON.stringify(e.data)}`;
  return `${where}${value}: ${e.message ?? 'invalid'}`;
}
