// DesiredState: the desired table kept up to date one Service at a time, and buildDesired, the
// from-scratch form of the same thing. `set*` / `delete*` only mark a Service dirty; `sync()`
// rebuilds just those and returns the virtual server keys whose desired value changed, so one
// endpoint change costs O(its Service), independent of the cluster's size. docs/architecture.md
// ("Desired state") has the whole contract. pure: no I/O.
import type { V1EndpointSlice, V1Node, V1Service } from './kube.js';
import { PluginRegistry } from '../../plugins/index.js';
import { type ServiceEntry, buildServiceEntry } from './service.js';
import type { Desired, DesiredVirtualServer, KernelContext, Problem, SetEntry, Snapshot } from './types.js';
import type { ProxyConfig } from '../config/types.js';
import type { HealthCheck } from './health-checks.js';
import { ApiObjects } from './objects.js';
import { ClaimTable } from './claims.js';
import { VipRefs } from './vip-refs.js';
import { BuildEnvironment } from './environment.js';
import { cmpId, formatSetEntry, keyOf, sameDesired, sameHealthCheck, sameSets } from './compare.js';

/** What one `sync()` did. */
export interface SyncResult {
  /** Virtual server keys whose desired value appeared, changed or disappeared. */
  changed: Set<string>;
  /** Services rebuilt (buildServiceEntry calls). */
  recomputed: number;
}

/** The desired state, maintained incrementally (see the file comment). */
export class DesiredState {
  private readonly objects = new ApiObjects();
  private readonly entries = new Map<string, ServiceEntry>();
  private readonly claims = new ClaimTable();
  private readonly counters = { sets: 0, vips: 0, problems: 0 };
  private readonly vips = new VipRefs(this.counters);
  /** sets(), healthChecks() and problems() as last assembled; undefined when a sync may have changed them. */
  private readonly cache: { sets?: SetEntry[]; healthChecks?: HealthCheck[]; problems?: Problem[] } = {};
  private readonly environment: BuildEnvironment;
  /** What prepare() built since the last sync(): handed to the next sync() with its own. */
  private prepared = { changed: new Set<string>(), recomputed: 0 };

  constructor(config: ProxyConfig, registry: PluginRegistry, nodeName: string, kernel: KernelContext = {}) {
    this.environment = new BuildEnvironment(config, registry, nodeName, kernel, () => {
      this.cache.problems = undefined;
      this.counters.problems++;
    });
  }

  /** Adds or replaces a Service. */
  setService(s: V1Service): void {
    this.objects.setService(s);
  }

  /** The Service's identity for Events ("namespace/name" -> its ref), undefined when unknown. */
  serviceRef(id: string): { namespace: string; name: string; uid?: string } | undefined {
    return this.objects.serviceRef(id);
  }

  /** The configuration in force. */
  get currentConfig(): ProxyConfig {
    return this.environment.config;
  }

  /** A new configuration: every Service is rebuilt with it (the same object changes nothing). */
  setConfig(config: ProxyConfig): void {
    if (config === this.environment.config) return;
    this.environment.setConfig(config);
    this.objects.markAllDirty();
  }

  /** Removes a Service (its slices stay until deleted: they may arrive before the Service). */
  deleteService(namespace: string, name: string): void {
    this.objects.deleteService(namespace, name);
  }

  /** Adds or replaces an EndpointSlice (tied to its Service by the kubernetes.io/service-name label). */
  setSlice(slice: V1EndpointSlice): void {
    this.objects.setSlice(slice);
  }

  /** Removes an EndpointSlice. */
  deleteSlice(slice: Pick<V1EndpointSlice, 'metadata'>): void {
    this.objects.deleteSlice(slice);
  }

  /** This node's Node object changed; everything is rebuilt only if its addresses or zone did. */
  setNode(node: V1Node | undefined): void {
    if (this.environment.setNode(node)) this.objects.markAllDirty();
  }

  /**
   * Rebuilds the dirty Services; the keys that changed. Each Service is built on its own: one that
   * throws keeps its last good virtual servers, VIPs and sets with a BuildFailed problem, and the
   * others sync as usual. The dirty set is always emptied.
   */
  sync(): SyncResult {
    const changed = this.prepared.changed;
    const recomputed = this.prepared.recomputed + this.rebuild(changed);
    this.prepared = { changed: new Set(), recomputed: 0 };
    return { changed, recomputed };
  }

  /**
   * Builds the dirty Services now, as sync() would, and keeps the keys they changed for the next
   * sync(), which returns them with its own: a source's lists can be built as they arrive, so the
   * first sync finds only what came since. Only Services with an EndpointSlice are built (one
   * listed before its slices would be built twice), and nothing until this node's Node is known
   * (its addresses would rebuild every Service again). Compute only: nothing is read or written.
   */
  prepare(): void {
    if (!this.environment.hasNode) return;
    const objects = this.objects;
    const ready = (id: string) => objects.services.has(id) && objects.hasSlices(id);
    const taken = [...this.objects.dirty].filter(ready);
    try {
      this.prepared.recomputed += this.rebuild(this.prepared.changed, ready);
    } catch (e) {
      for (const id of taken) this.objects.dirty.add(id); // the next sync builds them again
      throw e;
    }
  }

  /**
   * Rebuilds one Service from the objects held, as an update of it that changes nothing it is built
   * from would (a new resourceVersion, the same spec): no key changes, and one that did would go
   * to the next sync(). The loop runs it once, to compile a change's code before the first change
   * (sync/rehearsal.ts); it counts in no sync's rebuilt Services.
   */
  rebuildOne(id: string): void {
    if (!this.objects.services.has(id)) return;
    this.objects.dirty.add(id);
    this.rebuild(this.prepared.changed, (x) => x === id);
  }

  /**
   * Rebuilds the dirty Services (those `only` accepts, else all), adding the keys that changed to
   * `changed`; how many were rebuilt.
   */
  private rebuild(changed: Set<string>, only?: (id: string) => boolean): number {
    const dirty = only ? [...this.objects.dirty].filter(only) : [...this.objects.dirty];
    if (only) for (const id of dirty) this.objects.dirty.delete(id);
    else this.objects.dirty.clear();
    for (const id of dirty) {
      const old = this.entries.get(id);
      const svc = this.objects.services.get(id);
      const next = svc ? this.build(id, svc, old) : undefined;
      if (next) this.entries.set(id, next);
      else this.entries.delete(id);
      // Ref before unref: a Service that keeps its VIPs leaves the VIP set (and its version) alone.
      for (const vip of next?.vips ?? []) this.vips.ref(vip);
      for (const vip of old?.vips ?? []) this.vips.unref(vip);
      if (!sameSets(old?.sets, next?.sets)) this.invalidateSets();
      if (!sameHealthCheck(old?.healthCheck, next?.healthCheck)) this.cache.healthChecks = undefined;
      // Problems change with the Service's own, or with a conflict on one of its keys (below).
      if (old?.problems.length || next?.problems.length) this.invalidateProblems();
      const nextKeys = new Set<string>();
      for (const d of next?.vss ?? []) {
        const key = keyOf(d);
        nextKeys.add(key);
        const prev = this.claims.get(key, id);
        if (this.claims.count(key) > (prev ? 1 : 0)) this.invalidateProblems();
        // Keep the old object when nothing changed, so the table (and the planner) sees no change.
        this.claims.set(key, id, prev && sameDesired(prev, d) ? prev : d);
        this.claims.elect(key, changed);
      }
      for (const d of old?.vss ?? []) {
        const key = keyOf(d);
        if (nextKeys.has(key)) continue;
        if (this.claims.count(key) > 1) this.invalidateProblems();
        this.claims.delete(key, id);
        this.claims.elect(key, changed);
      }
    }
    return dirty.length;
  }

  /** buildServiceEntry, or on an exception the last good entry with a BuildFailed problem. */
  private build(id: string, svc: V1Service, old: ServiceEntry | undefined): ServiceEntry {
    try {
      return buildServiceEntry(svc, this.objects.slicesOf(id), this.environment.env);
    } catch (e) {
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      const kept = old?.vss.length ? '; its last good state stays programmed' : '';
      const message = `building the Service failed (${why.slice(0, 300)})${kept}`;
      return {
        id, vss: old?.vss ?? [], vips: old?.vips ?? [], sets: old?.sets ?? [],
        ...(old?.healthCheck ? { healthCheck: old.healthCheck } : {}),
        problems: [{ service: id, reason: 'BuildFailed', message }],
      };
    }
  }

  /**
   * The current desired state (call `sync()` first). Table and VIPs are live views; sets and
   * problems are assembled when a sync changed them, else the previous arrays are returned.
   */
  desired(): Desired {
    return {
      table: this.claims.table,
      vips: this.vips.set,
      nodePortAddresses: new Set(this.environment.env.nodeAddresses),
      sets: this.sets(),
      problems: this.problems(),
    };
  }

  /**
   * Change counters: each grows when a sync (or a node/kernel change) changed the set entries,
   * the VIPs, or may have changed the problems. Equal counters: equal sets(), vips, problems().
   */
  get versions(): Readonly<{ sets: number; vips: number; problems: number }> {
    return this.counters;
  }

  /** The desired table (live view, no copy). */
  get desiredTable(): ReadonlyMap<string, DesiredVirtualServer> {
    return this.claims.table;
  }

  /** Set entries of every Service, sorted and deduplicated. O(all entries). */
  sets(): SetEntry[] {
    if (this.cache.sets) return this.cache.sets;
    const byText = new Map<string, SetEntry>();
    for (const e of this.entries.values()) for (const s of e.sets) byText.set(formatSetEntry(s), s);
    this.cache.sets = [...byText.keys()].sort().map((k) => byText.get(k)!);
    return this.cache.sets;
  }

  /** Health-check NodePorts of every Service, sorted by namespace/name; reassembled only after a change. */
  healthChecks(): readonly HealthCheck[] {
    if (this.cache.healthChecks) return this.cache.healthChecks;
    const out: HealthCheck[] = [];
    for (const e of this.entries.values()) if (e.healthCheck) out.push(e.healthCheck);
    this.cache.healthChecks = out.sort((a, b) => cmpId(a, b));
    return this.cache.healthChecks;
  }

  /** Every problem: configuration, per Service, and conflicts. O(all entries). */
  problems(): Problem[] {
    if (this.cache.problems) return this.cache.problems;
    const out = [...this.environment.problems];
    for (const e of this.entries.values()) out.push(...e.problems);
    this.claims.conflicts(out);
    this.cache.problems = out.sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
    return this.cache.problems;
  }

  private invalidateSets(): void {
    this.cache.sets = undefined;
    this.counters.sets++;
  }

  private invalidateProblems(): void {
    this.cache.problems = undefined;
    this.counters.problems++;
  }
}

/** Builds the desired state from scratch: a DesiredState fed with the whole snapshot. */
export function buildDesired(
  snapshot: Snapshot, config: ProxyConfig, plugins: PluginRegistry = new PluginRegistry(), kernel: KernelContext = {},
): Desired {
  const state = new DesiredState(config, plugins, snapshot.nodeName, kernel);
  state.setNode(snapshot.node);
  for (const s of snapshot.services) state.setService(s);
  for (const s of snapshot.endpointSlices) state.setSlice(s);
  state.sync();
  return state.desired();
}
