// The virtual servers opted into the cluster load view, indexed so that one change costs O(its
// Service): by key in the order they opted in (ClusterWeights' problems and the keys it adds to a
// sync follow that order), and by Service ("namespace/name"), for a publish that touches one. pure.

/** Opted-in virtual server keys with their view keys, in opt-in order, and by Service. */
export class OptedIn {
  /** Key -> view key; a Map keeps the opt-in order (a key set again keeps its place). */
  readonly byKey = new Map<string, string>();
  private readonly byService = new Map<string, Set<string>>();
  /** Per key, its Service and its place in byKey's order (grows with each opt-in: sorting by it gives that order). */
  private readonly meta = new Map<string, { service: string; place: number }>();
  private next = 0;

  /** Opts `key` of `service` in under `viewKey` (in place when it already is); whether its Service changed. */
  set(key: string, viewKey: string, service: string): boolean {
    const was = this.meta.get(key);
    this.byKey.set(key, viewKey);
    if (was?.service === service) return false;
    if (was) this.unindex(key, was.service);
    this.meta.set(key, { service, place: was?.place ?? this.next++ });
    let keys = this.byService.get(service);
    if (!keys) this.byService.set(service, (keys = new Set()));
    keys.add(key);
    return true;
  }

  /** Opts `key` out; whether it was in. */
  delete(key: string): boolean {
    const was = this.meta.get(key);
    if (!was) return false;
    this.unindex(key, was.service);
    this.byKey.delete(key);
    this.meta.delete(key);
    return true;
  }

  /** The Service of an opted-in key. */
  serviceOf(key: string): string | undefined {
    return this.meta.get(key)?.service;
  }

  /** The opted-in keys of a Service (none: empty). */
  keysOf(service: string): Iterable<string> {
    return this.byService.get(service) ?? [];
  }

  /** `keys` (opted-in ones) in opt-in order. */
  inOrder(keys: Iterable<string>): string[] {
    return [...keys].sort((a, b) => this.meta.get(a)!.place - this.meta.get(b)!.place);
  }

  private unindex(key: string, service: string): void {
    const keys = this.byService.get(service);
    keys?.delete(key);
    if (keys?.size === 0) this.byService.delete(service);
  }
}
