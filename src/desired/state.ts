// DesiredState: the desired table kept up to date one Service at a time, and buildDesired, the
// from-scratch form of the same thing.
//
// Incremental contract: `setService` / `deleteService` / `setSlice` / `deleteSlice` only mark the
// Service dirty (an object with the same identity or resourceVersion as the stored one changes
// nothing); `sync()` rebuilds just the dirty Services and returns the virtual server keys whose
// desired value changed, so the planner can plan exactly those. One endpoint change in a cluster of
// N Services costs one buildServiceEntry and O(its virtual servers) merging, independent of N.
// `setNode` changes the environment of every Service and so mark all dirty, but only
// when what Services read from them (node addresses, zone, kernel schedulers) actually changed.
//
// Two Services claiming one virtual server (e.g. the same external IP and port): the
// lexicographically first "namespace/name" wins and the other gets a VirtualServerConflict problem.
// pure: no I/O.
import type { V1EndpointSlice, V1Node, V1Service } from './kube.js';
import { PluginRegistry } from '../../plugins/index.js';
import type { PluginContext } from '../../plugins/types.js';
import { realServerEqual, virtualServerEqual, virtualServerKey } from '../model/ipvs.js';
import { SERVICE_NAME_LABEL } from './endpoints.js';
import { obj, str } from './fields.js';
import { chooseDefault } from './scheduler.js';
import { type ServiceEntry, buildServiceEntry } from './service.js';
import { type BuildEnv, nodePortAddressesOf, serviceId } from './service-parse.js';
import type { Desired, DesiredVirtualServer, KernelContext, Problem, SetEntry, Snapshot } from './types.js';
import type { ProxyConfig } from '../config/types.js';
import type { HealthCheck } from './health-checks.js';

/** What one `sync()` did. */
export interface SyncResult {
  /** Virtual server keys whose desired value appeared, changed or disappeared. */
  changed: Set<string>;
  /** Services rebuilt (buildServiceEntry calls). */
  recomputed: number;
}

const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** The desired state, maintained incrementally (see the file comment). */
export class DesiredState {
  private readonly services = new Map<string, V1Service>();
  private readonly slices = new Map<string, Map<string, V1EndpointSlice>>();
  private readonly entries = new Map<string, ServiceEntry>();
  private readonly dirty = new Set<string>();
  /** Every Service's claim per virtual server key; the winner is in `table`. */
  private readonly claims = new Map<string, Map<string, DesiredVirtualServer>>();
  private readonly table = new Map<string, DesiredVirtualServer>();
  private readonly vipRefs = new Map<string, number>();
  /** The keys of vipRefs, kept as a Set so desired() hands out a live view instead of a copy. */
  private readonly vipSet = new Set<string>();
  /** sets() and problems() as last assembled; undefined when a sync may have changed them. */
  private setsCache: SetEntry[] | undefined;
  private healthChecksCache: HealthCheck[] | undefined;
  private problemsCache: Problem[] | undefined;
  private readonly counters = { sets: 0, vips: 0, problems: 0 };
  private env: BuildEnv;
  private envProblems: Problem[] = [];
  private node: V1Node | undefined;
  private readonly kernel: KernelContext;

  constructor(
    private config: ProxyConfig,
    private readonly registry: PluginRegistry,
    private readonly nodeName: string,
    kernel: KernelContext = {},
  ) {
    this.kernel = kernel;
    this.env = this.makeEnv();
  }

  /** Adds or replaces a Service. */
  setService(s: V1Service): void {
    const id = serviceId(s);
    if (sameObject(this.services.get(id), s)) return;
    this.services.set(id, s);
    this.dirty.add(id);
  }

  /** The Service's identity for Events ("namespace/name" -> its ref), undefined when unknown. */
  serviceRef(id: string): { namespace: string; name: string; uid?: string } | undefined {
    const m = obj(this.services.get(id)?.metadata);
    if (!m) return undefined;
    const uid = str(m.uid);
    return { namespace: str(m.namespace) ?? '', name: str(m.name) ?? '', ...(uid ? { uid } : {}) };
  }

  /** The configuration in force. */
  get currentConfig(): ProxyConfig {
    return this.config;
  }

  /** A new configuration: every Service is rebuilt with it (the same object changes nothing). */
  setConfig(config: ProxyConfig): void {
    if (config === this.config) return;
    this.config = config;
    this.env = this.makeEnv();
    for (const id of this.services.keys()) this.dirty.add(id);
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
    let m = this.slices.get(id);
    if (!m) this.slices.set(id, (m = new Map()));
    const name = slice.metadata?.name ?? '';
    if (sameObject(m.get(name), slice)) return;
    m.set(name, slice);
    this.dirty.add(id);
  }

  /** Removes an EndpointSlice. */
  deleteSlice(slice: Pick<V1EndpointSlice, 'metadata'>): void {
    const id = sliceOwner(slice);
    const m = id ? this.slices.get(id) : undefined;
    if (!id || !m?.delete(slice.metadata?.name ?? '')) return;
    if (m.size === 0) this.slices.delete(id);
    this.dirty.add(id);
  }

  /** This node's Node object changed; everything is rebuilt only if its addresses or zone did. */
  setNode(node: V1Node | undefined): void {
    this.node = node;
    this.refreshEnv();
  }

  /**
   * Rebuilds the dirty Services; the keys that changed. Each Service is built on its own: one that
   * throws keeps its last good virtual servers, VIPs and sets with a BuildFailed problem, and the
   * others sync as usual. The dirty set is always emptied.
   */
  sync(): SyncResult {
    const changed = new Set<string>();
    const dirty = [...this.dirty];
    this.dirty.clear();
    for (const id of dirty) {
      const old = this.entries.get(id);
      const svc = this.services.get(id);
      const next = svc ? this.build(id, svc, old) : undefined;
      if (next) this.entries.set(id, next);
      else this.entries.delete(id);
      for (const vip of old?.vips ?? []) this.unref(vip);
      for (const vip of next?.vips ?? []) this.ref(vip);
      if (!sameSets(old?.sets, next?.sets)) this.invalidateSets();
      if (!sameHealthCheck(old?.healthCheck, next?.healthCheck)) this.healthChecksCache = undefined;
      // Problems change with the Service's own, or with a conflict on one of its keys (below).
      if (old?.problems.length || next?.problems.length) this.invalidateProblems();
      const nextKeys = new Set<string>();
      for (const d of next?.vss ?? []) {
        const key = keyOf(d);
        nextKeys.add(key);
        let c = this.claims.get(key);
        if (!c) this.claims.set(key, (c = new Map()));
        const prev = c.get(id);
        if (c.size > (prev ? 1 : 0)) this.invalidateProblems();
        // Keep the old object when nothing changed, so the table (and the planner) sees no change.
        c.set(id, prev && sameDesired(prev, d) ? prev : d);
        this.elect(key, changed);
      }
      for (const d of old?.vss ?? []) {
        const key = keyOf(d);
        if (nextKeys.has(key)) continue;
        const c = this.claims.get(key);
        if (c && c.size > 1) this.invalidateProblems();
        c?.delete(id);
        if (c?.size === 0) this.claims.delete(key);
        this.elect(key, changed);
      }
    }
    return { changed, recomputed: dirty.length };
  }

  /** buildServiceEntry, or on an exception the last good entry with a BuildFailed problem. */
  private build(id: string, svc: V1Service, old: ServiceEntry | undefined): ServiceEntry {
    try {
      return buildServiceEntry(svc, [...(this.slices.get(id)?.values() ?? [])], this.env);
    } catch (e) {
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      const kept = old?.vss.length ? '; its last good state stays programmed' : '';
      return {
        id, vss: old?.vss ?? [], vips: old?.vips ?? [], sets: old?.sets ?? [], ...(old?.healthCheck ? { healthCheck: old.healthCheck } : {}),
        problems: [{ service: id, reason: 'BuildFailed', message: `building the Service failed (${why.slice(0, 300)})${kept}` }],
      };
    }
  }

  /**
   * The current desired state (call `sync()` first). Table and VIPs are live views; sets and
   * problems are assembled when a sync changed them, else the previous arrays are returned.
   */
  desired(): Desired {
    return {
      table: this.table,
      vips: this.vipSet,
      nodePortAddresses: new Set(this.env.nodeAddresses),
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
    return this.table;
  }

  /** Set entries of every Service, sorted and deduplicated. O(all entries). */
  sets(): SetEntry[] {
    if (this.setsCache) return this.setsCache;
    const byText = new Map<string, SetEntry>();
    for (const e of this.entries.values()) for (const s of e.sets) byText.set(formatSetEntry(s), s);
    this.setsCache = [...byText.keys()].sort().map((k) => byText.get(k)!);
    return this.setsCache;
  }

  /** Health-check NodePorts of every Service, sorted by namespace/name; reassembled only after a change. */
  healthChecks(): readonly HealthCheck[] {
    if (this.healthChecksCache) return this.healthChecksCache;
    const out: HealthCheck[] = [];
    for (const e of this.entries.values()) if (e.healthCheck) out.push(e.healthCheck);
    this.healthChecksCache = out.sort((a, b) => cmpId(a, b));
    return this.healthChecksCache;
  }

  /** Every problem: configuration, per Service, and conflicts. O(all entries). */
  problems(): Problem[] {
    if (this.problemsCache) return this.problemsCache;
    const out = [...this.envProblems];
    for (const e of this.entries.values()) out.push(...e.problems);
    for (const [key, c] of this.claims) {
      if (c.size < 2) continue;
      const winner = this.table.get(key)!;
      for (const [id] of c) {
        if (id === `${winner.origin.namespace}/${winner.origin.name}`) continue;
        out.push({ service: id, reason: 'VirtualServerConflict', message: `${key} is already served by Service ${winner.origin.namespace}/${winner.origin.name}; not programmed for this one` });
      }
    }
    this.problemsCache = out.sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
    return this.problemsCache;
  }

  private invalidateSets(): void {
    this.setsCache = undefined;
    this.counters.sets++;
  }

  private invalidateProblems(): void {
    this.problemsCache = undefined;
    this.counters.problems++;
  }

  private elect(key: string, changed: Set<string>): void {
    const c = this.claims.get(key);
    let winner: DesiredVirtualServer | undefined;
    let winnerId: string | undefined;
    for (const [id, d] of c ?? []) if (winnerId === undefined || id < winnerId) { winnerId = id; winner = d; }
    const before = this.table.get(key);
    if (winner) this.table.set(key, winner);
    else this.table.delete(key);
    if (before !== winner) changed.add(key);
  }

  private ref(vip: string): void {
    const n = this.vipRefs.get(vip) ?? 0;
    this.vipRefs.set(vip, n + 1);
    if (n === 0) {
      this.vipSet.add(vip);
      this.counters.vips++;
    }
  }

  private unref(vip: string): void {
    const n = (this.vipRefs.get(vip) ?? 0) - 1;
    if (n <= 0) {
      this.vipRefs.delete(vip);
      if (this.vipSet.delete(vip)) this.counters.vips++;
    } else this.vipRefs.set(vip, n);
  }

  private refreshEnv(): void {
    const next = this.makeEnv();
    const same = next.nodeAddresses.join(',') === this.env.nodeAddresses.join(',')
      && next.context.nodeZone === this.env.context.nodeZone
      && next.context.kernelVersion === this.env.context.kernelVersion
      && [...(next.context.availableSchedulers ?? [])].sort().join(',') === [...(this.env.context.availableSchedulers ?? [])].sort().join(',')
      && (next.context.availableSchedulers === undefined) === (this.env.context.availableSchedulers === undefined);
    if (same) return;
    this.env = next;
    for (const id of this.services.keys()) this.dirty.add(id);
  }

  private makeEnv(): BuildEnv {
    const problems: Problem[] = [];
    const zone = str(obj(obj(this.node?.metadata)?.labels)?.[ZONE_LABEL]);
    const context: PluginContext = { nodeName: this.nodeName, ...this.kernel, ...(zone ? { nodeZone: zone } : {}) };
    const nodeAddresses = nodePortAddressesOf(this.node, this.config, problems);
    const fallback = chooseDefault(this.registry, this.config.defaultScheduler, context, problems);
    this.envProblems = problems;
    this.problemsCache = undefined;
    this.counters.problems++;
    return { config: this.config, registry: this.registry, context, nodeAddresses, fallback };
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

/** One-line form of a set entry, e.g. `KUBE-CLUSTER-IP IPv4 TCP 10.200.1.10:80`. */
export function formatSetEntry(s: SetEntry): string {
  const where = s.address === undefined ? `${s.port}` : s.address.includes(':') ? `[${s.address}]:${s.port}` : `${s.address}:${s.port}`;
  const from = s.cidr ?? s.source;
  return `${s.set} ${s.family} ${s.protocol} ${where}${from ? ` from ${from}` : ''}`;
}

/** Same set entries in the same order (a rebuilt Service whose sets did not change). */
function sameSets(a: readonly SetEntry[] | undefined, b: readonly SetEntry[] | undefined): boolean {
  if (!a?.length || !b?.length) return !a?.length && !b?.length;
  return a.length === b.length && a.every((x, i) => formatSetEntry(x) === formatSetEntry(b[i]!));
}

function sameHealthCheck(a: HealthCheck | undefined, b: HealthCheck | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.port === b.port && a.localEndpoints === b.localEndpoints
    && a.namespace === b.namespace && a.name === b.name);
}

function cmpId(a: { namespace: string; name: string }, b: { namespace: string; name: string }): number {
  const x = `${a.namespace}/${a.name}`;
  const y = `${b.namespace}/${b.name}`;
  return x < y ? -1 : x > y ? 1 : 0;
}

function keyOf(d: DesiredVirtualServer): string {
  return virtualServerKey(d.vs);
}

/** Same virtual server, real servers and origin: a rebuilt entry that changed nothing here. */
function sameDesired(a: DesiredVirtualServer, b: DesiredVirtualServer): boolean {
  return virtualServerEqual(a.vs, b.vs) && a.vs.timeout === b.vs.timeout && a.vs.netmask === b.vs.netmask
    && a.dests.length === b.dests.length && a.dests.every((r, i) => realServerEqual(r, b.dests[i]!))
    && a.slowStartMs === b.slowStartMs && a.clusterBalance === b.clusterBalance && a.origin.kind === b.origin.kind && a.origin.portName === b.origin.portName
    && a.origin.plugin === b.origin.plugin && a.origin.name === b.origin.name && a.origin.namespace === b.origin.namespace;
}

function sliceOwner(slice: Pick<V1EndpointSlice, 'metadata'>): string | undefined {
  const meta = obj(slice.metadata);
  const name = str(obj(meta?.labels)?.[SERVICE_NAME_LABEL]);
  return name ? `${str(meta?.namespace) ?? ''}/${name}` : undefined;
}

/** Same object, or same non-empty resourceVersion (informers hand out new objects on resync). */
function sameObject(a: { metadata?: { resourceVersion?: string } } | undefined, b: { metadata?: { resourceVersion?: string } }): boolean {
  if (!a) return false;
  if (a === b) return true;
  const rv = a.metadata?.resourceVersion;
  return rv !== undefined && rv !== '' && rv === b.metadata?.resourceVersion;
}
