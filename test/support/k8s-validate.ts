// Validation of YAML documents against the Kubernetes API schemas, for the tests of manifests/,
// crds/ and examples/. Built-in kinds are checked with kubernetes-models (the API's OpenAPI
// schemas compiled to validators; the package ships them, nothing is downloaded), our own kinds
// with the CRDs' openAPIV3Schema through src/config/ (the same code the operator validates with).
//
// kubernetes-models' validators do not reject unknown fields (the schemas have no
// additionalProperties: false), while the API server does (kubectl's default --validate=strict).
// So the document is validated through a Proxy that records every property the validator reads:
// the generated code reads each property its schema declares (present or not) and every key of
// a map-typed object, so a key present in an object the validator looked into but never read is
// a field that schema does not have, a typo like `readOnlyRootFilesytem`. Objects the validator
// never looked into (free-form values such as a CRD's `default`) are not judged. One gap of the
// package, bridged by name: its generator drops properties named `description` and `x-kubernetes-*`
// from the compiled validators (they are in its .d.ts types, e.g. JSONSchemaProps,
// CustomResourceColumnDefinition), so those are never reported as unknown.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { crdSchema, makeAjv, toJsonSchema } from '../../src/config/schema.js';
import { readCrd, validateConfig } from '../../src/config/load.js';

/** A YAML document of a file, parsed. */
export interface K8sDoc {
  file: string;
  index: number;
  object: Record<string, unknown>;
}

/** Every file under `dir` (recursively) whose name ends in .yaml/.yml, sorted. */
export function yamlFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...yamlFiles(p));
    else if (/\.ya?ml$/.test(name)) out.push(p);
  }
  return out;
}

/** The non-empty documents of a YAML file; throws on a syntax error or a duplicate key. */
export function readDocs(file: string, root = process.cwd()): K8sDoc[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'), { uniqueKeys: true, prettyErrors: true });
  return docs.flatMap((d, index) => {
    if (d.errors.length) throw new Error(`${relative(root, file)} document ${index}: ${d.errors.map((e) => e.message).join('; ')}`);
    const object = d.toJS() as unknown;
    if (object === null || object === undefined) return [];
    if (typeof object !== 'object' || Array.isArray(object)) throw new Error(`${relative(root, file)} document ${index}: not a mapping`);
    return [{ file: relative(root, file), index, object: object as Record<string, unknown> }];
  });
}

type ModelClass = { prototype: { validate(): void } };

/** The kubernetes-models class of an apiVersion/kind, or undefined when the package has none. */
async function modelOf(apiVersion: string, kind: string): Promise<ModelClass | undefined> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (!/^[a-z0-9.]*$/.test(group ?? '') || !/^v\d+(alpha\d+|beta\d+)?$/.test(version ?? '')) return undefined;
  try {
    const mod = (await import(`kubernetes-models/${group ? `${group}/` : ''}${version}`)) as Record<string, unknown>;
    const cls = mod[kind] as (ModelClass & { apiVersion?: string; kind?: string }) | undefined;
    return cls && cls.apiVersion === apiVersion && cls.kind === kind ? cls : undefined;
  } catch {
    return undefined;
  }
}

/** Property names kubernetes-models' validators never read although the schemas declare them. */
const UNCOMPILED = /^(description|x-kubernetes-[a-z-]+)$/;

/** Runs `validate` on a deep proxy of `value`; the paths of fields the validator never read. */
function unreadFields(value: unknown, validate: (data: unknown) => void): string[] {
  const touched = new Map<object, Set<PropertyKey>>();
  const proxies = new WeakMap<object, object>();
  const wrap = (v: unknown): unknown => {
    if (typeof v !== 'object' || v === null) return v;
    const known = proxies.get(v);
    if (known) return known;
    const p = new Proxy(v, {
      get(t, k, r) {
        if (!Array.isArray(t)) (touched.get(t) ?? touched.set(t, new Set()).get(t)!).add(k);
        return wrap(Reflect.get(t, k, r));
      },
      has(t, k) {
        if (!Array.isArray(t)) (touched.get(t) ?? touched.set(t, new Set()).get(t)!).add(k);
        return Reflect.has(t, k);
      },
    });
    proxies.set(v, p);
    return p;
  };
  validate(wrap(value));
  const out: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (typeof v !== 'object' || v === null) return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
      return;
    }
    const read = touched.get(v);
    for (const [k, x] of Object.entries(v)) {
      if (read && !read.has(k) && !UNCOMPILED.test(k)) out.push(`${path}.${k}`.replace(/^\./, ''));
      else walk(x, `${path}.${k}`);
    }
  };
  walk(value, '');
  return out;
}

const nodeStateSchema = (() => {
  let fn: ((o: unknown) => boolean) & { errors?: unknown } | undefined;
  return () => (fn ??= makeAjv().compile(toJsonSchema(crdSchema(readCrd('ipvsnodestates'))) as object));
})();

/**
 * What is wrong with one document ([] when it is valid): a built-in kind against the Kubernetes
 * schemas (unknown fields included), IPVSProxyConfig / IPVSNodeState against our CRDs' schemas.
 * A kind neither knows is an error.
 */
export async function validateDoc(object: Record<string, unknown>): Promise<string[]> {
  const { apiVersion, kind } = object;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['apiVersion and kind must be set'];
  if (apiVersion === 'ipvs-operator.io/v1alpha1' && kind === 'IPVSProxyConfig') {
    const r = validateConfig(object);
    return r.ok ? [] : [r.errors];
  }
  if (apiVersion === 'ipvs-operator.io/v1alpha1' && kind === 'IPVSNodeState') {
    const validate = nodeStateSchema();
    return validate(structuredClone(object)) ? [] : [JSON.stringify(validate.errors)];
  }
  const model = await modelOf(apiVersion, kind);
  if (!model) return [`no Kubernetes schema for ${apiVersion} ${kind}`];
  const errors: string[] = [];
  const unknown = unreadFields(object, (data) => {
    try {
      model.prototype.validate.call(data);
    } catch (e) {
      errors.push((e as Error).message);
    }
  });
  return [...errors, ...unknown.map((f) => `${f}: unknown field`)];
}
