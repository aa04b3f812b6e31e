// The API objects DesiredState builds from: Services, their EndpointSlices, and which Services
// changed since the last sync (dirty). pure.
import type { V1EndpointSlice, V1Service } from './kube.js';
import { SERVICE_NAME_LABEL } from './endpoints.js';
import { obj, str } from './fields.js';
import { serviceId } from './service-parse.js';
import { Groups } from '../util/groups.js';

/** Services and slices by Service id ("namespace/name"); a change marks its Service dirty. */
export class ApiObjects {
  readonly services = new Map<string, V1Service>();
  /** Each Service's slices, by slice name. */
  private readonly slices = new Groups<string, string, V1EndpointSlice>(sliceName);
  /** Services to rebuild at the next sync. */
  readonly dirty = new Set<string>();

  /** Adds or replaces a Service. */
  setService(s: V1Service): void {
    const id = serviceId(s);
    if (sameObject(this.services.get(id), s)) return;
    this.services.set(id, s);
    this.dirty.add(id);
  }

  /** Removes a Service (its slices stay until deleted: they may arrive before the Service). */
  deleteService(namespace: string, name: string): void {
    const id = `${namespace}/${name}`;
    if (this.services.delete(id)) this.dirty.add(id);
  }

  /** Adds or replaces an EndpointSlice (tied to its Service by the kubernetes.io/service-name label). */
  setSlice(slice: V1EndpointSlice): void {
    const id = sliceOwner(slice);
    if (!id) return;
    if (sameObject(this.slices.get(id, sliceName(slice)), slice)) return;
    this.slices.set(id, slice);
    this.dirty.add(id);
  }

  /** Whether the Service has a slice. */
  hasSlices(id: string): boolean {
    return this.slices.has(id);
  }

  /** The Service's slices. */
  slicesOf(id: string): V1EndpointSlice[] {
    return this.slices.values(id);
  }

  /** Removes an EndpointSlice. */
  deleteSlice(slice: Pick<V1EndpointSlice, 'metadata'>): void {
    const id = sliceOwner(slice);
    if (id && this.slices.delete(id, sliceName(slice))) this.dirty.add(id);
  }

  /** Marks every Service dirty (a new configuration or environment). */
  markAllDirty(): void {
    for (const id of this.services.keys()) this.dirty.add(id);
  }

  /** The Service's identity for Events ("namespace/name" -> its ref), undefined when unknown. */
  serviceRef(id: string): { namespace: string; name: string; uid?: string } | undefined {
    const m = obj(this.services.get(id)?.metadata);
    if (!m) return undefined;
    const uid = str(m.uid);
    return { namespace: str(m.namespace) ?? '', name: str(m.name) ?? '', ...(uid ? { uid } : {}) };
  }
}

function sliceOwner(slice: Pick<V1EndpointSlice, 'metadata'>): string | undefined {
  const meta = obj(slice.metadata);
  const name = str(obj(meta?.labels)?.[SERVICE_NAME_LABEL]);
  return name ? [str(meta?.namespace) ?? '', name].join('/') : undefined; // flat: see serviceId
}

function sliceName(slice: Pick<V1EndpointSlice, 'metadata'>): string {
  return slice.metadata?.name ?? '';
}

type Versioned = { metadata?: { resourceVersion?: string } };

/** Same object, or same non-empty resourceVersion (informers hand out new objects on resync). */
function sameObject(a: Versioned | undefined, b: Versioned): boolean {
  if (!a) return false;
  if (a === b) return true;
  const rv = a.metadata?.resourceVersion;
  return rv !== undefined && rv !== '' && rv === b.metadata?.resourceVersion;
}
