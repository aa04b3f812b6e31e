// The pure half of the Reflector: whether a watch line or a list item is a well-formed object of
// the watched kind (and why not), an object's cache key and resourceVersion. The reasons are
// the `reason` label of ipvsop_api_malformed_total (docs/kube-client.md, "Bad input").
import type { KubernetesObject } from '@kubernetes/client-node';

const EVENT_TYPES = new Set(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Why `o` is not a well-formed object of the watched kind (undefined: it is). */
export function malformedObject(o: unknown): string | undefined {
  if (!isRecord(o)) return 'object not an object';
  const m = o.metadata;
  if (!isRecord(m)) return 'object without metadata';
  if (typeof m.name !== 'string' || m.name === '') return 'object without metadata.name';
  if (m.namespace !== undefined && typeof m.namespace !== 'string') return 'metadata.namespace not a string';
  return undefined;
}

/** A watch line, checked: the event, or the reason it is skipped. */
export function parseWatchLine(
  line: string,
): { type: string; object: Record<string, unknown> } | { malformed: string } {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { malformed: 'not JSON' };
  }
  if (!isRecord(v)) return { malformed: 'event not an object' };
  if (typeof v.type !== 'string' || !EVENT_TYPES.has(v.type)) return { malformed: 'unknown event type' };
  if (v.type === 'ERROR') {
    return isRecord(v.object) ? { type: 'ERROR', object: v.object } : { malformed: 'ERROR without a Status' };
  }
  if (v.type === 'BOOKMARK') {
    const rv = isRecord(v.object) && isRecord(v.object.metadata) ? v.object.metadata.resourceVersion : undefined;
    return typeof rv === 'string' && rv
      ? { type: 'BOOKMARK', object: v.object as Record<string, unknown> }
      : { malformed: 'BOOKMARK without resourceVersion' };
  }
  const why = malformedObject(v.object);
  return why ? { malformed: why } : { type: v.type, object: v.object as Record<string, unknown> };
}

/** `namespace/name` of an object whose metadata.name was checked. */
export const keyOf = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata!.name!}`;
/** metadata.resourceVersion, when it is a string. */
export const rvOf = (o: unknown) =>
  (isRecord(o) && isRecord(o.metadata) && typeof o.metadata.resourceVersion === 'string'
    ? o.metadata.resourceVersion
    : undefined);

/** A watch ERROR event other than 410 Gone as an Error: its Status message, its code when a number. */
export function watchError(status: Record<string, unknown>): Error {
  const code = status.code;
  const message = typeof status.message === 'string' ? status.message : JSON.stringify(status).slice(0, 200);
  return Object.assign(new Error(`watch ERROR: ${message}`), typeof code === 'number' ? { code } : {});
}
