// The lab API server's storage: objects by resource, one resourceVersion counter that every write
// and delete bumps, and the history of changes a watch replays from a resourceVersion (compaction
// forgets it, as etcd's does). In memory; each change is handed to `onChange` as it is made. With
// a persistent store (etcd.ts) it starts from what the store loaded and writes each change, and
// each compaction, through to it, in order: the counter is then etcd's revision.
import type { Change, Obj } from './api-types.js';
import type { StoreSink, StoredState } from './etcd.js';
import { RESOURCES, type ResourceInfo, type ResourceName, apiVersionOf } from './store.js';

/** The key of a namespaced or cluster-wide object in its resource. */
export const objectKey = (ns: string | undefined, name: string): string => `${ns ?? ''}/${name}`;

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

export class ObjectStore {
  private readonly objects = new Map<ResourceName, Map<string, Obj>>();
  private history: Change[] = [];
  /** Watches from before this resourceVersion get 410 Gone. */
  private oldest = 0;
  private rv = 100;
  private uid = 0;
  /** When each object was last written (ms), by resource/key: what Event expiry counts from after a restart. */
  private readonly written = new Map<string, number>();
  private readonly sink: StoreSink | undefined;

  private readonly clock: () => number;

  /**
   * In memory only; or, with `persisted`, starting from its `state` and writing through to its
   * `sink`. `clock` (default Date.now) stamps each write's time.
   */
  constructor(private readonly onChange: (c: Change) => void, o: { persisted?: { state: StoredState; sink: StoreSink }; clock?: () => number } = {}) {
    for (const r of Object.keys(RESOURCES) as ResourceName[]) this.objects.set(r, new Map());
    this.clock = o.clock ?? Date.now;
    const persisted = o.persisted;
    if (!persisted) return;
    const { state } = persisted;
    this.sink = persisted.sink;
    this.rv = state.revision;
    this.oldest = state.compacted;
    this.history = state.history;
    for (const s of state.objects) {
      const k = objectKey(s.object.metadata.namespace, s.object.metadata.name);
      this.objects.get(s.resource)!.set(k, s.object);
      this.written.set(`${s.resource}/${k}`, s.written);
      this.uid = Math.max(this.uid, Number(/^uid-(\d+)$/.exec(s.object.metadata.uid ?? '')?.[1] ?? 0));
    }
    for (const h of state.history) this.uid = Math.max(this.uid, Number(/^uid-(\d+)$/.exec(h.object.metadata.uid ?? '')?.[1] ?? 0));
  }

  /** When an object was last written (ms since the epoch), or undefined when it does not exist. */
  writtenAt(resource: ResourceName, name: string, namespace?: string): number | undefined {
    return this.written.get(`${resource}/${objectKey(namespace, name)}`);
  }

  /** The current resourceVersion. */
  get resourceVersion(): number {
    return this.rv;
  }

  /** The oldest resourceVersion a watch may start from. */
  get oldestResourceVersion(): number {
    return this.oldest;
  }

  /** Creates or replaces a copy of `object` (ADDED or MODIFIED): kind, uid, creation time and a new resourceVersion set. */
  put(resource: ResourceName, object: object): Obj {
    const o = structuredClone(object) as Obj;
    const m = this.objects.get(resource)!;
    const k = objectKey(o.metadata.namespace, o.metadata.name);
    const old = m.get(k);
    const info: ResourceInfo = RESOURCES[resource];
    o.apiVersion = apiVersionOf(info);
    o.kind = info.kind;
    o.metadata.uid = old?.metadata.uid ?? `uid-${++this.uid}`;
    o.metadata.creationTimestamp = old?.metadata.creationTimestamp ?? now();
    o.metadata.resourceVersion = String(++this.rv);
    m.set(k, o);
    this.change(resource, old ? 'MODIFIED' : 'ADDED', o);
    return o;
  }

  /** Deletes an object (DELETED, with a new resourceVersion); returns it, or undefined when it did not exist. */
  remove(resource: ResourceName, name: string, namespace?: string): Obj | undefined {
    const m = this.objects.get(resource)!;
    const old = m.get(objectKey(namespace, name));
    if (!old) return undefined;
    m.delete(objectKey(namespace, name));
    const o = structuredClone(old);
    o.metadata.resourceVersion = String(++this.rv);
    this.change(resource, 'DELETED', o);
    return o;
  }

  get(resource: ResourceName, name: string, namespace?: string): Obj | undefined {
    return this.objects.get(resource)!.get(objectKey(namespace, name));
  }

  list(resource: ResourceName): Obj[] {
    return [...this.objects.get(resource)!.values()];
  }

  /** Every object in `namespace`, of every resource. */
  inNamespace(namespace: string): Array<[ResourceName, Obj]> {
    return [...this.objects].flatMap(([r, objs]) => [...objs.values()].filter((o) => o.metadata.namespace === namespace).map((o) => [r, o] as [ResourceName, Obj]));
  }

  /** Forgets the history: watches from any resourceVersion before now get 410 Gone. */
  compact(): void {
    this.history = [];
    this.oldest = this.rv;
    this.sink?.compact(this.rv);
  }

  /** The changes after resourceVersion `from`, oldest first; undefined when compaction forgot some. */
  changesSince(from: number): Change[] | undefined {
    if (Number.isNaN(from) || from < this.oldest) return undefined;
    return this.history.filter((h) => h.rv > from);
  }

  private change(resource: ResourceName, type: Change['type'], object: Obj): void {
    const c: Change = { rv: this.rv, resource, type, object };
    const k = `${resource}/${objectKey(object.metadata.namespace, object.metadata.name)}`;
    const at = this.clock();
    if (type === 'DELETED') this.written.delete(k);
    else this.written.set(k, at);
    this.sink?.write(c, at);
    this.history.push(c);
    this.onChange(c);
  }
}
