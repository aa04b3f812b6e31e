// The lab API server's OpenAPI v3 documents and its server-side field validation, pure.
//
// kubectl (1.27 and later) reads /openapi/v3, then /openapi/v3/<api/v1 | apis/<group>/<version>>:
// - `kubectl apply/create/replace` look for a `fieldValidation` query parameter on the PATCH
//   operation of the object's group-version-kind; finding it, they leave validation to the server
//   and send `?fieldValidation=Strict` (`--validate=warn`: Warn, `--validate=false`: Ignore);
// - `kubectl explain` renders the schema whose `x-kubernetes-group-version-kind` is the resource's.
// Without these documents kubectl refuses to apply anything unless told `--validate=false`.
//
// The built-in kinds' schemas are generated from kubernetes-models (openapi-gen.ts, committed as
// openapi-builtin.json); the project's CRDs bring theirs (crds/, passed in by the caller), named
// as kube-apiserver names them (`io.ipvs-operator.v1alpha1.IPVSProxyConfig`).
//
// Field validation, as kube-apiserver's for the three directives:
// - Strict: an object with a field its schema does not declare is refused (400, "strict decoding
//   error: unknown field "spec.foo"");
// - Warn: the field is dropped and named in a `Warning` header (kubectl prints it);
// - Ignore: the field is dropped silently.
// Approximated: without a directive nothing is checked or dropped (kube-apiserver warns and drops);
// only unknown fields are checked, not types, formats, enums or required fields; duplicate fields
// in a body are not seen (the body is parsed before); /openapi/v2 (protobuf) is not served.
import { createHash } from 'node:crypto';
import builtin from './openapi-builtin.json' with { type: 'json' };
import { RESOURCES, type ResourceInfo } from './store.js';

/** An OpenAPI (JSON Schema subset) schema object. */
export type Schema = {
  type?: string; description?: string; $ref?: string; properties?: Record<string, Schema>; items?: Schema;
  additionalProperties?: Schema | boolean; required?: string[]; 'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-group-version-kind'?: Array<{ group: string; version: string; kind: string }>;
} & Record<string, unknown>;

/** Definitions by name, as in an OpenAPI document's components.schemas. */
export type Definitions = Record<string, Schema>;

/** A field validation directive (the `fieldValidation` query parameter). */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

const REF = '#/components/schemas/';
const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

/** The group reversed, as kube-apiserver names CRD schemas: `ipvs-operator.io` -> `io.ipvs-operator`. */
function reversedGroup(group: string): string {
  return group.split('.').reverse().join('.');
}

/**
 * The served definitions: the generated built-ins, plus one per version of each CRD given
 * (apiextensions.k8s.io/v1 objects), with apiVersion, kind and metadata as kube-apiserver adds them.
 */
export function buildDefinitions(crds: readonly unknown[]): Definitions {
  const defs: Definitions = { ...(builtin.definitions as unknown as Definitions) };
  for (const crd of crds) {
    const spec = (crd as { spec: { group: string; names: { kind: string }; versions: Array<{ name: string; schema?: { openAPIV3Schema?: Schema } }> } }).spec;
    for (const v of spec.versions) {
      const s = v.schema?.openAPIV3Schema ?? { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
      const gv = `${spec.group}/${v.name}`;
      defs[`${reversedGroup(spec.group)}.${v.name}.${spec.names.kind}`] = {
        ...s,
        properties: {
          apiVersion: { type: 'string', description: `APIVersion defines the versioned schema of this representation of an object: ${gv}.` },
          kind: { type: 'string', description: `Kind is a string value representing the REST resource this object represents: ${spec.names.kind}.` },
          ...s.properties,
          metadata: { $ref: `${REF}${OBJECT_META}`, description: "Standard object's metadata." },
        },
        'x-kubernetes-group-version-kind': [{ group: spec.group, version: v.name, kind: spec.names.kind }],
      };
    }
  }
  return defs;
}

/** The name of the definition of a group-version-kind, or undefined. */
export function definitionOf(defs: Definitions, group: string, version: string, kind: string): string | undefined {
  return Object.keys(defs).find((n) => defs[n]!['x-kubernetes-group-version-kind']?.some((g) => g.group === group && g.version === version && g.kind === kind));
}

/** A group-version's path in /openapi/v3: `api/v1` or `apis/<group>/<version>`. */
function gvPath(info: ResourceInfo): string {
  return info.group ? `apis/${info.group}/${info.version}` : `api/${info.version}`;
}

/** The OpenAPI v3 documents of the served resources: the /openapi/v3 index and one per group-version. */
export class OpenApiDocuments {
  private readonly docs = new Map<string, { text: string; hash: string }>();

  constructor(readonly defs: Definitions) {
    const byGv = new Map<string, ResourceInfo[]>();
    for (const info of Object.values(RESOURCES) as ResourceInfo[]) byGv.set(gvPath(info), [...byGv.get(gvPath(info)) ?? [], info]);
    for (const [path, infos] of byGv) {
      const text = JSON.stringify(groupVersionDocument(defs, infos));
      this.docs.set(path, { text, hash: createHash('sha512').update(text).digest('hex').slice(0, 128).toUpperCase() });
    }
  }

  /** The body of /openapi/v3 (path without leading slash, e.g. `openapi/v3/api/v1`), or undefined. */
  document(path: string): string | undefined {
    const p = path.replace(/^\/+|\/+$/g, '');
    if (p === 'openapi/v3') {
      return JSON.stringify({ paths: Object.fromEntries([...this.docs].map(([gv, d]) => [gv, { serverRelativeURL: `/openapi/v3/${gv}?hash=${d.hash}` }])) });
    }
    return p.startsWith('openapi/v3/') ? this.docs.get(p.slice('openapi/v3/'.length))?.text : undefined;
  }
}

/** One group-version's document: the paths of its resources (their operations carry the GVK and fieldValidation) and the schemas they use. */
function groupVersionDocument(defs: Definitions, infos: ResourceInfo[]): unknown {
  const paths: Record<string, unknown> = {};
  const roots: string[] = [];
  const param = (name: string, where = 'query') => ({ name, in: where, ...(where === 'path' ? { required: true } : {}), schema: { type: 'string', uniqueItems: true } });
  for (const info of infos) {
    const def = definitionOf(defs, info.group, info.version, info.kind);
    if (!def) continue;
    roots.push(def);
    const gvk = { group: info.group, version: info.version, kind: info.kind };
    const body = { content: { 'application/json': { schema: { $ref: `${REF}${def}` } } }, required: true };
    const ok = { '200': { description: 'OK', content: { 'application/json': { schema: { $ref: `${REF}${def}` } } } } };
    const write = [param('dryRun'), param('fieldManager'), param('fieldValidation')];
    const op = (action: string, id: string, extra: object) => ({ operationId: `${id}${info.kind}`, 'x-kubernetes-action': action, 'x-kubernetes-group-version-kind': gvk, responses: ok, ...extra });
    const base = `/${gvPath(info)}${info.namespaced ? '/namespaces/{namespace}' : ''}/${info.plural}`;
    const scope = info.namespaced ? [param('namespace', 'path')] : [];
    paths[base] = {
      get: op('list', 'list', {}),
      post: op('post', 'create', { requestBody: body, parameters: write }),
      parameters: scope,
    };
    paths[`${base}/{name}`] = {
      get: op('get', 'read', {}),
      put: op('put', 'replace', { requestBody: body, parameters: write }),
      patch: op('patch', 'patch', { requestBody: { content: { 'application/merge-patch+json': { schema: { type: 'object' } } }, required: true }, parameters: [...write, param('force')] }),
      delete: op('delete', 'delete', {}),
      parameters: [param('name', 'path'), ...scope],
    };
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.32.0-ipvs-operator-lab' },
    paths,
    components: { schemas: closure(defs, roots) },
  };
}

/** The definitions reachable from `roots` through $ref. */
function closure(defs: Definitions, roots: string[]): Definitions {
  const out: Definitions = {};
  const todo = [...roots];
  while (todo.length) {
    const n = todo.pop()!;
    if (out[n] || !defs[n]) continue;
    out[n] = defs[n];
    JSON.stringify(defs[n], (k, v: unknown) => {
      if (k === '$ref' && typeof v === 'string' && v.startsWith(REF)) todo.push(v.slice(REF.length));
      return v;
    });
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * The fields of `obj` that the definition `name` does not declare, as kube-apiserver names them
 * (`spec.ports[0].foo`); with `prune`, they are removed from `obj` too. A field under
 * x-kubernetes-preserve-unknown-fields (or a schema without properties) is never unknown.
 */
export function unknownFields(defs: Definitions, name: string, obj: unknown, prune = false): string[] {
  const out: string[] = [];
  const walk = (schema: Schema | undefined, v: unknown, path: string): void => {
    while (schema?.$ref) schema = defs[schema.$ref.slice(REF.length)];
    if (!schema || schema['x-kubernetes-preserve-unknown-fields'] || typeof v !== 'object' || v === null) return;
    if (Array.isArray(v)) {
      if (schema.items) v.forEach((e, i) => walk(schema.items, e, `${path}[${i}]`));
      return;
    }
    const o = v as Record<string, unknown>;
    const props = schema.properties;
    const extra = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined;
    if (!props && !extra) return;
    for (const k of Object.keys(o)) {
      if (o[k] === undefined) continue; // not sent (JSON has no undefined)
      const sub = props?.[k] ?? extra;
      const at = path ? `${path}.${k}` : k;
      if (sub) walk(sub, o[k], at);
      else if (schema.additionalProperties !== true) {
        out.push(at);
        if (prune) delete o[k];
      }
    }
  };
  walk(defs[name], obj, '');
  return out;
}
