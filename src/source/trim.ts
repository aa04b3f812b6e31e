// What a source keeps of each object (the informers, and the files source alike): only the fields
// the desired state (src/desired/), the Events and the status read, as plain objects. Applied to
// every listed item and every watch event before client-node's ListWatch caches it, so the cache
// and DesiredState share one small copy: no managedFields, no last-applied annotation, no typed
// class instances with Dates. Values are kept as they came (a wrong-typed field still reaches the
// desired state, which makes it a Problem); only whole fields nobody reads are dropped. The common
// endpoint conditions object is shared (frozen). pure: no I/O.
import type { KubernetesObject, V1EndpointSlice, V1Service } from '@kubernetes/client-node';

/** Annotations no reader uses and that can be as large as the object itself. */
const DROPPED_ANNOTATIONS = new Set(['kubectl.kubernetes.io/last-applied-configuration']);

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A value as the watch's JSON has it: plain objects and arrays, Dates as ISO strings, no
 * undefined-valued keys (client-node's typed list items set every attribute of their class).
 */
export function plain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Date) return v.toISOString().replace(/\.\d{3}Z$/, 'Z');
  if (!isRec(v)) return v;
  const out: Rec = {};
  for (const k of Object.keys(v)) {
    if (v[k] === undefined) continue;
    // A "__proto__" key (JSON.parse and the YAML parser make it an own property) is data:
    // assigning it would set the copy's prototype, and its fields would show through.
    if (k === '__proto__') Object.defineProperty(out, k, { value: plain(v[k]), enumerable: true, writable: true,
      configurable: true });
    else out[k] = plain(v[k]);
  }
  return out;
}

/** metadata: identity, resourceVersion, labels, annotations (minus the dropped ones), deletionTimestamp. */
export function trimMeta(meta: unknown): Rec | undefined {
  if (!isRec(meta)) return meta as undefined;
  const out: Rec = {};
  for (const k of ['name', 'namespace', 'uid', 'resourceVersion', 'labels', 'deletionTimestamp'] as const) {
    if (meta[k] !== undefined) out[k] = plain(meta[k]);
  }
  const a = meta.annotations;
  if (isRec(a)) {
    const keep = Object.keys(a).filter((k) => !DROPPED_ANNOTATIONS.has(k) && a[k] !== undefined);
    if (keep.length) out.annotations = Object.fromEntries(keep.map((k) => [k, a[k]]));
  } else if (a !== undefined) out.annotations = a;
  return out;
}

/** A Service: metadata (trimMeta), spec as is, status.loadBalancer only (one literal each, see trimEndpoint). */
export function trimService(s: V1Service): V1Service {
  if (!isRec(s)) return s;
  const metadata = trimMeta(s.metadata);
  const status = (s as Rec).status;
  const lb = isRec(status) && status.loadBalancer !== undefined
    ? { loadBalancer: plain(status.loadBalancer) }
    : undefined;
  if (s.spec === undefined) return (lb ? { metadata, status: lb } : { metadata }) as V1Service;
  const spec = plain(s.spec);
  return (lb ? { metadata, spec, status: lb } : { metadata, spec }) as V1Service;
}

const sharedConditions = new Map<string, Readonly<Rec>>();

/** Conditions made only of booleans (or absent ones) are one shared frozen object per combination. */
function conditions(c: unknown): unknown {
  if (!isRec(c)) return c;
  const keys = Object.keys(c).filter((k) => c[k] !== undefined);
  const known = (k: string) => (k === 'ready' || k === 'serving' || k === 'terminating') && typeof c[k] === 'boolean';
  if (!keys.every(known)) return plain(c);
  const key = `${String(c.ready)}/${String(c.serving)}/${String(c.terminating)}`;
  let shared = sharedConditions.get(key);
  if (!shared) {
    const o: Rec = {};
    for (const k of keys) o[k] = c[k];
    sharedConditions.set(key, (shared = Object.freeze(o)));
  }
  return shared;
}

/** targetRef: its kind and name only. */
function trimTargetRef(ref: unknown): unknown {
  if (!isRec(ref)) return ref === null ? undefined : ref;
  // One literal when both are there (the usual case): see trimEndpoint.
  if (ref.kind !== undefined && ref.name !== undefined) return { kind: plain(ref.kind), name: plain(ref.name) };
  return plain({ kind: ref.kind, name: ref.name });
}

/**
 * One endpoint: addresses, conditions, nodeName, zone, hostname, hints, targetRef (kind and
 * name). The usual shapes are built in one object literal each: V8 gives a literal exactly its
 * fields inside the object, while fields added to it later go to a separate property array, about
 * 30 bytes more per endpoint (3 MB at 100 000 endpoints).
 */
function trimEndpoint(e: unknown): unknown {
  if (!isRec(e)) return e;
  const addresses = plain(e.addresses);
  const cond = e.conditions !== undefined ? conditions(e.conditions) : undefined;
  const ref = trimTargetRef(e.targetRef);
  if (cond !== undefined && e.nodeName !== undefined && ref !== undefined && e.hostname === undefined
    && e.hints === undefined) {
    const nodeName = plain(e.nodeName);
    return e.zone === undefined ? { addresses, conditions: cond, nodeName, targetRef: ref }
      : { addresses, conditions: cond, nodeName, zone: plain(e.zone), targetRef: ref };
  }
  const out: Rec = { addresses };
  if (cond !== undefined) out.conditions = cond;
  for (const k of ['nodeName', 'zone', 'hostname', 'hints'] as const) if (e[k] !== undefined) out[k] = plain(e[k]);
  if (ref !== undefined) out.targetRef = ref;
  return out;
}

/** An EndpointSlice: metadata (trimMeta), addressType, ports, endpoints (trimEndpoint each). */
export function trimEndpointSlice(s: V1EndpointSlice): V1EndpointSlice {
  if (!isRec(s)) return s;
  const endpoints = Array.isArray(s.endpoints) ? s.endpoints.map(trimEndpoint) : s.endpoints;
  const out: Rec = { metadata: trimMeta(s.metadata), addressType: s.addressType, ports: plain(s.ports), endpoints };
  return out as unknown as V1EndpointSlice;
}

/** The watch event types whose object is a resource (ERROR carries a Status, BOOKMARK only a resourceVersion). */
export function trimsEvent(phase: string): boolean {
  return phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED';
}

/** A transform for one resource's objects. */
export type Trim<T extends KubernetesObject> = (o: T) => T;
