// The sync loop: source events in, kernel state out.
//
//   SourceEvent ─► DesiredState (incremental) ─► planVirtualServers(changed keys) ─► ipvs.apply
//                                                        ▲ actual: a cached copy of what the kernel
//                                                        │ holds for the keys we touch, re-read in
//                                                        │ full at start and on every periodic sync
//   then: VIPs on the dummy interface, the iptables path, Events, node status, metrics.
//
// Every step of an incremental sync is O(what changed), not O(cluster): the link's addresses are
// cached like the IPVS table (re-read on full syncs), and the VIPs and the iptables path are only
// touched when DesiredState's VIP or set-entry counters (or the config) moved since they were last
// applied; full syncs apply both unconditionally.
//
// Start never flushes: the first sync reads the kernel's table and plans against it, so a restart
// under traffic changes nothing that is already right (a restart issues 0 ops). Incremental syncs
// plan only the virtual servers whose desired value changed, plus those with draining real
// servers (whose connection counters are re-read from the kernel) and those whose ops failed.
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { PluginRegistry } from '../../plugins/index.js';
import { DesiredState } from '../desired/state.js';
import type { Desired, ProxyConfig } from '../desired/types.js';
import type { IpvsClient } from '../ipvs/types.js';
import {
  type IpvsOp, type RealServer, type VirtualServerEntry, formatOp, realServerKey, virtualServerKey,
} from '../model/ipvs.js';
import { type DrainState, makeOwnership, planVirtualServers } from '../plan/index.js';
import type { EventSink, ServiceRef, SourceEvent, StatusSink } from '../source/types.js';
import type { IptablesSync } from './iptables.js';
import type { Log } from './log.js';
import type { Metrics } from './metrics.js';
import { BoundedFrequencyRunner, type Clock, type SyncReason, realClock } from './runner.js';

/** The dummy interface holding the VIPs (rtnetlink in production, a fake in unit tests). */
export interface VipLink {
  /** Creates the dummy link if missing and sets it up. */
  ensure(name: string): Promise<void>;
  /** Addresses on the link ([] when it does not exist). */
  list(name: string): Promise<string[]>;
  add(name: string, address: string): Promise<void>;
  remove(name: string, address: string): Promise<void>;
}

/** What the kernel offers, probed once at start. */
export interface KernelInfo {
  release: string;
  ipvsVersion: string;
  schedulers: ReadonlySet<string>;
}

export interface OperatorDeps {
  ipvs: IpvsClient;
  vips: VipLink;
  iptables: IptablesSync;
  events: EventSink;
  status: StatusSink;
  log: Log;
  kernel: KernelInfo;
  registry: PluginRegistry;
  nodeName: string;
  metrics?: Metrics;
  clock?: Clock;
  /** Dry run: plans are handed here instead of being applied; nothing on the host changes. */
  dryRun?: (ops: readonly IpvsOp[]) => void;
}

/** The outcome of the last sync, for /readyz, status and tests. */
export interface SyncReport {
  at: number;
  durationMs: number;
  ops: number;
  failed: number;
  full: boolean;
  error?: string;
}

/** The runner's intervals for a configuration (a failed sync is retried after minSyncPeriod, at least 1 s). */
function intervals(c: ProxyConfig): { minIntervalMs: number; maxIntervalMs: number; retryIntervalMs: number } {
  return { minIntervalMs: c.minSyncPeriod * 1000, maxIntervalMs: c.syncPeriod * 1000, retryIntervalMs: Math.max(1000, c.minSyncPeriod * 1000) };
}

type MutableEntry = { vs: VirtualServerEntry['vs']; dests: Map<string, RealServer> };

/** Programs IPVS (and through its seams, VIPs and iptables) from source events. */
export class Operator {
  private state: DesiredState;
  private config: ProxyConfig;
  private readonly services = new Map<string, V1Service>();
  private readonly slices = new Map<string, V1EndpointSlice>();
  private node: V1Node | undefined;
  /** The kernel's table as last read or written, for the keys the operator looks at. */
  private actual = new Map<string, MutableEntry>();
  private draining: DrainState = new Map();
  /** Real servers in `actual`, kept up to date with it (status reports it every sync). */
  private realServers = 0;
  /** The VIP link's addresses as last read or written; re-read on every full sync, like `actual`. */
  private vipsNow: Set<string> | undefined;
  /**
   * What the VIP link and the iptables path were last made to match (DesiredState.versions, the
   * config object): an incremental sync where neither changed leaves both alone.
   */
  private vipsDone: number | undefined;
  private iptablesDone: { sets: number; config: ProxyConfig } | undefined;
  /** Keys to plan again next sync (failed ops, grace deadlines). */
  private readonly retryKeys = new Set<string>();
  private needFull = true;
  private deadlineTimer: unknown;
  private pendingSince: number | undefined;
  private readonly clock: Clock;
  private readonly runner: BoundedFrequencyRunner;
  /** Report of the last sync; undefined before the first. */
  last: SyncReport | undefined;
  /** True once a sync succeeded (readiness). */
  ready = false;

  constructor(config: ProxyConfig, private readonly deps: OperatorDeps) {
    this.config = config;
    this.clock = deps.clock ?? realClock;
    this.state = this.newState();
    this.runner = new BoundedFrequencyRunner((why) => this.sync(why), {
      ...intervals(config),
      clock: this.clock,
      onError: (e) => deps.log('error', 'sync failed; will retry', { error: (e as Error).message }),
    });
  }

  private newState(): DesiredState {
    const s = new DesiredState(this.config, this.deps.registry, this.deps.nodeName, {
      availableSchedulers: this.deps.kernel.schedulers, kernelVersion: this.deps.kernel.release,
    });
    for (const svc of this.services.values()) s.setService(svc);
    for (const sl of this.slices.values()) s.setSlice(sl);
    s.setNode(this.node);
    return s;
  }

  /** Starts the runner: the first sync reads the kernel and plans everything. */
  start(): void {
    this.runner.start();
  }

  /** Stops syncing; resolves when a sync in progress ended. The kernel is left as it is. */
  async stop(): Promise<void> {
    if (this.deadlineTimer !== undefined) this.clock.clearTimeout(this.deadlineTimer);
    await this.runner.stop();
  }

  /** The configuration in force. */
  get currentConfig(): ProxyConfig {
    return this.config;
  }

  /** Feeds one source event; a sync follows within minSyncPeriod. */
  handle(e: SourceEvent): void {
    this.pendingSince ??= this.clock.now();
    this.deps.metrics?.pendingChanges.inc();
    switch (e.kind) {
      case 'service': {
        const id = `${e.object.metadata?.namespace ?? ''}/${e.object.metadata?.name ?? ''}`;
        if (e.type === 'delete') {
          this.services.delete(id);
          this.state.deleteService(e.object.metadata?.namespace ?? '', e.object.metadata?.name ?? '');
        } else {
          this.services.set(id, e.object);
          this.state.setService(e.object);
        }
        break;
      }
      case 'endpointslice': {
        const id = `${e.object.metadata?.namespace ?? ''}/${e.object.metadata?.name ?? ''}`;
        if (e.type === 'delete') {
          this.slices.delete(id);
          this.state.deleteSlice(e.object);
        } else {
          this.slices.set(id, e.object);
          this.state.setSlice(e.object);
        }
        break;
      }
      case 'node':
        this.node = e.type === 'delete' ? undefined : e.object;
        this.state.setNode(this.node);
        break;
      case 'config':
        this.config = e.config;
        this.state = this.newState();
        this.vipsDone = undefined;
        this.iptablesDone = undefined;
        this.runner.setIntervals(intervals(e.config));
        this.needFull = true;
        this.deps.log('info', 'configuration changed; full resync', { defaultScheduler: e.config.defaultScheduler });
        break;
    }
    this.runner.run();
  }

  /** Reads the kernel's whole table into the cache. */
  private async readAll(): Promise<void> {
    const actual = new Map<string, MutableEntry>();
    for (const vs of await this.deps.ipvs.listVirtualServers()) {
      const dests = new Map<string, RealServer>();
      for (const rs of await this.deps.ipvs.listRealServers(vs)) dests.set(realServerKey(rs), rs);
      actual.set(virtualServerKey(vs), { vs, dests });
    }
    this.actual = actual;
    this.countRealServers();
  }

  private countRealServers(): void {
    let n = 0;
    for (const e of this.actual.values()) n += e.dests.size;
    this.realServers = n;
  }

  /** Re-reads the real servers (and their connection counters) of some virtual servers. */
  private async readSome(keys: Iterable<string>): Promise<void> {
    for (const key of keys) {
      const e = this.actual.get(key);
      if (!e) continue;
      const dests = new Map<string, RealServer>();
      for (const rs of await this.deps.ipvs.listRealServers(e.vs)) dests.set(realServerKey(rs), rs);
      this.realServers += dests.size - e.dests.size;
      e.dests = dests;
    }
  }

  /** Whether a real server of `key` in the cache, not desired any more, has unknown connection counters. */
  private goneWithoutCounters(key: string, table: Desired['table']): boolean {
    const have = this.actual.get(key);
    const want = table.get(key);
    if (!have || !want || have.dests.size === 0) return false;
    const wanted = new Set(want.dests.map(realServerKey));
    for (const [rkey, rs] of have.dests) if (!wanted.has(rkey) && rs.activeConns === undefined) return true;
    return false;
  }

  /** One sync; the runner calls it. Throws when something must be retried. */
  async sync(why: SyncReason = { periodic: false, retry: false }): Promise<void> {
    const t0 = this.clock.now();
    const pendingSince = this.pendingSince;
    this.pendingSince = undefined;
    // A retry follows a failure, which means the cache and the kernel disagree: re-read it all.
    const full = this.needFull || why.periodic || why.retry || !this.ready;
    let ops: IpvsOp[] = [];
    let failed = 0;
    try {
      const { changed } = this.state.sync();
      const desired = this.state.desired();
      if (full) {
        await this.readAll();
      } else {
        // Draining real servers, and real servers about to go whose connection counters the
        // cache does not know (it holds what we wrote, not what the kernel counts): read them, so
        // one that carries no connections is deleted at once rather than drained a sync later.
        await this.readSome(new Set([...this.draining.keys(), ...[...changed].filter((k) => this.goneWithoutCounters(k, desired.table))]));
      }
      const keys = full ? new Set([...desired.table.keys(), ...this.actual.keys()]) : new Set([...changed, ...this.draining.keys(), ...this.retryKeys]);
      this.retryKeys.clear();
      // The link's addresses are cached like the IPVS table: re-read on full syncs only.
      if (full || !this.vipsNow) {
        this.vipsNow = new Set(await this.deps.vips.list(this.config.interfaceName));
        this.vipsDone = undefined;
      }
      const vipsNow = this.vipsNow;
      // Only virtual servers that are not desired are asked about: build the address sets on first use.
      let ownsNow: ((vs: IpvsOp['vs']) => boolean) | undefined;
      const owns = (vs: IpvsOp['vs']) => (ownsNow ??= makeOwnership({
        assignedAddresses: [...vipsNow, ...desired.vips],
        nodePortAddresses: desired.nodePortAddresses,
        excludeCIDRs: this.config.excludeCIDRs,
      }))(vs);
      const plan = planVirtualServers(keys, {
        desired: desired.table, actual: this.actual, owns, now: t0, draining: this.draining,
        gracePeriodMs: this.config.gracefulTerminationSeconds * 1000,
      });
      ops = plan.ops;
      if (this.deps.dryRun) {
        this.deps.dryRun(ops);
      } else {
        failed = await this.applyOps(ops);
        this.draining = plan.draining;
        this.armDeadline(plan.nextDeadline);
        const versions = this.state.versions;
        if (full || this.vipsDone !== versions.vips) {
          this.vipsDone = undefined;
          await this.syncVips(desired, vipsNow);
          this.vipsDone = versions.vips;
        }
        // The iptables path depends only on the set entries and the config; full syncs always
        // re-apply it (repairing drift, as the periodic IPVS re-read does).
        const done = this.iptablesDone;
        if (full || !done || done.sets !== versions.sets || done.config !== this.config) {
          this.iptablesDone = undefined;
          await this.deps.iptables.sync(desired, this.config);
          this.iptablesDone = { sets: versions.sets, config: this.config };
        }
      }
      await this.report(desired);
      this.needFull = failed > 0;
      if (failed) throw new Error(`${failed} of ${ops.length} IPVS ops failed`);
      this.ready = true;
      this.finish(t0, ops.length, failed, full, pendingSince);
    } catch (e) {
      this.needFull = this.needFull || !this.ready;
      this.finish(t0, ops.length, failed, full, pendingSince, (e as Error).message);
      throw e;
    }
  }

  /** Applies ops, updates the cache for those that succeeded, remembers the keys of those that failed. */
  private async applyOps(ops: readonly IpvsOp[]): Promise<number> {
    if (!ops.length) return 0;
    const results = await this.deps.ipvs.apply(ops);
    let failed = 0;
    // Counted per kind and result, then added to the metric once per label pair.
    const counts = new Map<string, number>();
    results.forEach((err, i) => {
      const op = ops[i]!;
      const key = virtualServerKey(op.vs);
      const label = `${op.kind} ${err ? 'error' : 'ok'}`;
      counts.set(label, (counts.get(label) ?? 0) + 1);
      if (err) {
        failed++;
        this.retryKeys.add(key);
        this.deps.log('warn', 'IPVS op failed', { op: formatOp(op), errno: err.code, error: err.message });
        return;
      }
      this.deps.log('debug', 'IPVS op', { op: formatOp(op) });
      switch (op.kind) {
        case 'add-service':
        case 'update-service': {
          const e = this.actual.get(key);
          this.actual.set(key, { vs: op.vs, dests: e?.dests ?? new Map() });
          break;
        }
        case 'delete-service':
          this.realServers -= this.actual.get(key)?.dests.size ?? 0;
          this.actual.delete(key);
          break;
        case 'add-dest':
        case 'update-dest': {
          const dests = this.actual.get(key)?.dests;
          if (!dests) break;
          const before = dests.size;
          dests.set(realServerKey(op.rs), op.rs);
          this.realServers += dests.size - before;
          break;
        }
        case 'delete-dest':
          if (this.actual.get(key)?.dests.delete(realServerKey(op.rs))) this.realServers--;
          break;
      }
    });
    for (const [label, n] of counts) {
      const [kind, result] = label.split(' ');
      this.deps.metrics?.opsApplied.inc({ kind, result }, n);
    }
    return failed;
  }

  /** Plans the draining virtual servers again when the earliest grace period ends. */
  private armDeadline(deadline: number | undefined): void {
    if (this.deadlineTimer !== undefined) this.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    if (deadline === undefined) return;
    this.deadlineTimer = this.clock.setTimeout(() => this.runner.run(), Math.max(0, deadline - this.clock.now()));
  }

  /** Binds desired VIPs to the dummy interface and unbinds the ones no longer desired (after their virtual servers went). */
  private async syncVips(desired: Desired, current: Set<string>): Promise<void> {
    const name = this.config.interfaceName;
    if (desired.vips.size || current.size) await this.deps.vips.ensure(name);
    // `current` is the cache (this.vipsNow): kept in step with each address added or removed.
    const have = current;
    for (const ip of desired.vips) {
      if (!have.has(ip)) {
        await this.deps.vips.add(name, ip);
        have.add(ip);
      }
    }
    for (const ip of [...have]) {
      if (!desired.vips.has(ip)) {
        await this.deps.vips.remove(name, ip);
        have.delete(ip);
      }
    }
  }

  /** Events for problems, and the node status. Failures are logged: they never fail a sync. */
  private async report(desired: Desired): Promise<void> {
    const refs = new Map<string, ServiceRef>();
    for (const p of desired.problems) {
      const s = this.services.get(p.service);
      if (s) refs.set(p.service, { namespace: s.metadata?.namespace ?? '', name: s.metadata?.name ?? '', uid: s.metadata?.uid });
    }
    try {
      await this.deps.events.report(desired.problems, refs);
    } catch (e) {
      this.deps.log('warn', 'posting events failed', { error: (e as Error).message });
    }
  }

  private finish(t0: number, ops: number, failed: number, full: boolean, pendingSince: number | undefined, error?: string): void {
    const now = this.clock.now();
    this.last = { at: now, durationMs: now - t0, ops, failed, full, ...(error ? { error } : {}) };
    const m = this.deps.metrics;
    if (m) {
      m.syncDuration.observe((now - t0) / 1000);
      if (!error) m.lastSync.set(now / 1000);
      if (error) m.syncFailures.inc();
      m.pendingChanges.set(0);
      if (pendingSince !== undefined && !error) m.programmingLatency.observe((now - pendingSince) / 1000);
    }
    const realServers = this.realServers;
    const table = this.state.desiredTable;
    this.deps.status.write({
      kernelIPVSVersion: this.deps.kernel.ipvsVersion,
      schedulersAvailable: [...this.deps.kernel.schedulers].sort(),
      virtualServers: table.size,
      realServers,
      lastSyncTime: new Date(now).toISOString(),
      lastSyncDurationSeconds: (now - t0) / 1000,
      lastError: error ?? '',
      problems: this.state.problems().length,
    }).catch((e: unknown) => this.deps.log('warn', 'writing node status failed', { error: (e as Error).message }));
    this.deps.log(error ? 'error' : 'info', error ? 'sync failed' : 'synced', {
      ops, failed, full, durationMs: now - t0, virtualServers: table.size, ...(error ? { error } : {}),
    });
  }

  /** The desired state's origin of each virtual server key (for status / explain / metrics labels). */
  origins(): ReadonlyMap<string, { namespace: string; name: string; portName: string; plugin: string }> {
    const out = new Map<string, { namespace: string; name: string; portName: string; plugin: string }>();
    for (const [k, d] of this.state.desiredTable) out.set(k, d.origin);
    return out;
  }
}
