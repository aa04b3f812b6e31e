// Parsing a YAML file of Kubernetes objects the way `kubectl get -o yaml` and `kubectl apply -f`
// read them: several documents separated by `---`, and `kind: List` (or any `...List`) whose
// `items` are the objects. Objects of kinds the operator does not read are skipped. pure: no I/O.
import { parseAllDocuments } from 'yaml';
import { checkJsonShape } from '../config/schema.js';

/** The kinds a source reads. */
export type ManifestKind = 'Service' | 'EndpointSlice' | 'Node' | 'IPVSProxyConfig';

/** One object found in a file. */
export interface Manifest {
  kind: ManifestKind;
  /** kind/namespace/name ("" namespace for cluster-scoped kinds): unique per source. */
  key: string;
  object: Record<string, unknown>;
}

/** A file's objects, or why the file cannot be used (then `manifests` is empty). */
export interface ParsedFile {
  manifests: Manifest[];
  /** Errors, each naming the document; a file with any error is malformed as a whole. */
  errors: string[];
  /** `Kind/name` of objects of other kinds (skipped, for a debug log). */
  skipped: string[];
}

const API_VERSIONS: Record<ManifestKind, readonly string[]> = {
  Service: ['v1'],
  EndpointSlice: ['discovery.k8s.io/v1'],
  Node: ['v1'],
  IPVSProxyConfig: ['ipvs-operator.io/v1alpha1'],
};
const NAMESPACED: ReadonlySet<ManifestKind> = new Set(['Service', 'EndpointSlice']);

/** Limits on what a file may hold, checked before any of it is used. */
export const MANIFEST_LIMITS = Object.freeze({
  /** Aliases expanded per document (YAML's "billion laughs"): the yaml package's default. */
  maxAliasCount: 100,
  /** Nesting of a document: Kubernetes objects are a dozen levels deep at most. */
  maxDepth: 64,
  /** Values in one document, aliases counted at each place they expand. */
  maxNodes: 200_000,
});

/**
 * The objects of a multi-document YAML text; any error makes the whole file malformed. Never
 * throws: hostile YAML (alias bombs, circular aliases, nesting thousands deep, prototype names
 * as kinds) is an error naming the document.
 */
export function parseManifests(text: string): ParsedFile {
  const out: ParsedFile = { manifests: [], errors: [], skipped: [] };
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text, { uniqueKeys: true });
  } catch (e) {
    out.errors.push(`not YAML this parser can read (nested too deep?): ${firstLine(e)}`);
    return out;
  }
  // parseAllDocuments returns an EmptyStream (not an array) for a text without documents.
  if (!Array.isArray(docs)) return out;
  docs.forEach((doc, i) => {
    const where = `document ${i + 1}`;
    if (doc.errors.length) {
      out.errors.push(`${where}: ${firstLine(doc.errors[0])}`);
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: MANIFEST_LIMITS.maxAliasCount });
    } catch (e) {
      out.errors.push(`${where}: ${firstLine(e)}`);
      return;
    }
    if (value === null || value === undefined) return;
    const bad = checkJsonShape(value, MANIFEST_LIMITS.maxDepth, MANIFEST_LIMITS.maxNodes, where);
    if (bad) {
      out.errors.push(bad.startsWith(where) ? bad : `${where}: ${bad}`);
      return;
    }
    collect(value, where, out);
  });
  if (out.errors.length) out.manifests = [];
  return out;
}

/**
 * The text's documents as separate texts, split at the `---` lines that start them, or undefined
 * when the text has directives (`%YAML`, `%TAG`: they belong to the document after them). A
 * line that starts with `---` is always a document marker (YAML forbids it inside a scalar), and
 * anchors never reach across documents, so parsing the pieces one by one gives what parsing the
 * whole text gives: a reader can keep what it parsed of a document whose text did not change.
 */
export function splitDocuments(text: string): string[] | undefined {
  if (/^%/m.test(text)) return undefined;
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(/^---(?=[ \t\r\n]|$)/gm)) {
    if (m.index > start) out.push(text.slice(start, m.index));
    start = m.index;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 300);
}

function collect(value: unknown, where: string, out: ParsedFile): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    out.errors.push(`${where}: not a Kubernetes object (a mapping with kind and metadata)`);
    return;
  }
  const o = value as Record<string, unknown>;
  const kind = o.kind;
  if (typeof kind !== 'string') {
    out.errors.push(`${where}: no kind`);
    return;
  }
  if (kind.endsWith('List') && Object.hasOwn(o, 'items')) {
    if (!Array.isArray(o.items)) {
      out.errors.push(`${where}: ${kind}.items is not a list`);
      return;
    }
    o.items.forEach((item, j) => collect(item, `${where} item ${j + 1}`, out));
    return;
  }
  const meta = typeof o.metadata === 'object' && o.metadata !== null && !Array.isArray(o.metadata)
    ? o.metadata as Record<string, unknown>
    : undefined;
  const name = meta?.name;
  // Own properties only: `kind: constructor` or `kind: toString` must not find Object's members.
  if (!Object.hasOwn(API_VERSIONS, kind)) {
    out.skipped.push(`${kind}/${typeof name === 'string' ? name : '?'}`);
    return;
  }
  const k = kind as ManifestKind;
  if (typeof name !== 'string' || name === '') {
    out.errors.push(`${where}: ${kind} without metadata.name`);
    return;
  }
  if (o.apiVersion !== undefined && !API_VERSIONS[k].includes(o.apiVersion as string)) {
    const use = API_VERSIONS[k].join(' or ');
    out.errors.push(`${where}: ${kind} ${name}: apiVersion ${JSON.stringify(o.apiVersion)} is not read (use ${use})`);
    return;
  }
  let namespace = '';
  if (NAMESPACED.has(k)) {
    // As `kubectl apply` does for a manifest without a namespace.
    if (meta!.namespace === undefined) meta!.namespace = 'default';
    if (typeof meta!.namespace !== 'string' || meta!.namespace === '') {
      out.errors.push(`${where}: ${kind} ${name}: metadata.namespace must be a non-empty string`);
      return;
    }
    namespace = meta!.namespace;
  }
  out.manifests.push({ kind: k, key: `${k}/${namespace}/${name}`, object: o });
}
