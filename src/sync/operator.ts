// The sync loop: source events in, kernel state out. One sync is four steps, each one place:
//
//   read      what the plan needs from the kernel (kernel-read.ts: the whole table, a drift check
//             kept to a tenth of syncPeriod, or only what drains and what is due for a retry; a
//             change arriving meanwhile also puts the periodic iptables check off)
//   plan      planSync (src/plan/sync.ts): pure; the whole decision: ops, VIP changes, whether
//             iptables runs, conntrack filters, the retry policy and the record's delta
//   execute   executeSyncPlan (executor.ts): applies the plan through the kernel interfaces and
//             reports each item's result
//
//   settle    settleSync (src/plan/settle.ts): pure; the plan and the results give the retry state
//             and the ownership record (record-keeper.ts saves it)
//
// then Events for problems, node status, metrics, and the health verdict
// (src/healthcheck/health.ts; outcome.ts says each of them).
// DesiredState owns the API objects; this file keeps only what a sync must carry to the next: the
// copy of the kernel (kernel-read.ts: the table cache, the VIP link's addresses), the draining
// real servers, what the VIP link and the iptables path were last made to match, and the retry
// state of ops the kernel refused.
//
// Containment: an op the kernel refuses is a Problem of its Service (an Event, a log line, a
// metric); its virtual server is re-read and planned again after a backoff (1 s doubling to
// 5 min), while every other Service keeps syncing. Only a failure of the node's own machinery (a
// kernel read, the VIP link, the iptables path) fails the sync; the runner then retries it with a
// full re-read.
//
// Start never flushes: the first sync reads the kernel's table and plans against it, so a restart
// under traffic changes nothing that is already right (a restart issues 0 ops).
import type { PluginRegistry } from '../../plugins/index.js';
import { DesiredState } from '../desired/state.js';
import { SlowStartTracker } from '../balance/slow-start.js';
import type { ClusterWeights } from '../balance/cluster-view.js';
import type { Desired, Problem } from '../desired/types.js';
import type { HealthCheck } from '../desired/health-checks.js';
import type { ProxyConfig } from '../config/types.js';
import type { IpvsClient } from '../ipvs/types.js';
import { formatOp, realServerKey } from '../model/ipvs.js';
import type { DrainState } from '../plan/index.js';
import { type RetryState, dueRetries, nextRetryAt, retryProblems } from '../plan/retry.js';
import { type Settled, settleSync } from '../plan/settle.js';
import { type SyncPlan, planSync } from '../plan/sync.js';
import type { VipLink } from '../rtnl/vips.js';
import type { EventSink, SourceEvent, StatusSink } from '../source/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { ConntrackClient } from '../conntrack/client.js';
import { reportCleanup } from './conntrack-cleanup.js';
import { executeSyncPlan } from './executor.js';
import { logPlan, recordSyncEnd, reportProblems } from './outcome.js';
import { type ComponentHealth, type HealthVerdict, evaluateHealth } from '../healthcheck/health.js';
import { MemoryOwnershipRecord, type OwnershipRecord } from './record.js';
import { RecordKeeper } from './record-keeper.js';
import type { Log } from '../util/log.js';
import type { Metrics } from '../metrics/metrics.js';
import { BoundedFrequencyRunner, type Clock, type SyncReason, realClock } from './runner.js';
import { KernelReader } from './kernel-read.js';

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
  /** The source's health (Source.health), for /healthz. */
  sourceHealth?: () => ComponentHealth;
  /** The kernel socket's health, for /healthz. */
  kernelHealth?: () => ComponentHealth;
  /**
   * Which IPVS the client talks to (NetlinkIpvs.familyId; undefined while disconnected): when it
   * changes, ip_vs was loaded again and its table, timeouts and sysctls start from scratch.
   */
  kernelGeneration?: () => number | undefined;
  /** Called when kernelGeneration changed, before the full resync it causes (sysctls, timeouts). */
  onKernelReset?: () => Promise<void>;
  /** How long a failure may last before /healthz fails; default health.ts's. */
  healthBoundMs?: number;
  /** The ownership record (record.ts); default: one in memory (tests). */
  record?: OwnershipRecord;
  /**
   * ctnetlink, for deleting the UDP conntrack entries a sync left leading to removed real servers
   * (plan/conntrack.ts says why); none: no conntrack cleanup (dry runs, tests without it).
   */
  conntrack?: ConntrackClient;
  /** Called with each plan before it is carried out: `--dry-run` prints it (formatSyncPlan). */
  onPlan?: (plan: SyncPlan) => void;
  /**
   * After each successful sync, before Events: edge work that follows the desired state (the
   * health-check servers, health-edge.ts). Its problems are reported with the others; a throw is
   * logged and keeps the previous problems.
   */
  afterSync?: (view: AfterSyncView) => Promise<readonly Problem[]>;
  /** Cluster load view weights (balance/cluster-view.ts), applied before slow start; none: local weights only. */
  clusterWeights?: ClusterWeights;
}

/** What afterSync sees: the desired state just programmed and the configuration in force. */
export interface AfterSyncView {
  desired: Desired;
  healthChecks: readonly HealthCheck[];
  config: ProxyConfig;
}

/** The outcome of the last sync, for status and tests. */
export interface SyncReport {
  at: number;
  durationMs: number;
  ops: number;
  /** Ops the kernel refused (each a Problem of its Service). */
  failed: number;
  full: boolean;
  /** Set when the sync itself failed. */
  error?: string;
}

/** Periodic iptables checks that may be put off in a row because a change was waiting. */
const MAX_DEFERRED_CHECKS = 3;

/** The runner's intervals for a configuration (a failed sync is retried after minSyncPeriod, at least 1 s). */
function intervals(c: ProxyConfig): { minIntervalMs: number; maxIntervalMs: number; retryIntervalMs: number } {
  return { minIntervalMs: c.minSyncPeriod * 1000, maxIntervalMs: c.syncPeriod * 1000, retryIntervalMs: Math.max(1000, c.minSyncPeriod * 1000) };
}

/** Programs IPVS (and through its seams, VIPs and iptables) from source events. */
export class Operator {
  private readonly state: DesiredState;
  /** The copy of the kernel: table cache and VIP link addresses (kernel-read.ts). */
  private readonly reader: KernelReader;
  private draining: DrainState = new Map();
  /** Slow-start ramps (balance/slow-start.ts): the weights the planner gets. */
  private readonly slowStart: SlowStartTracker;
  /** What the VIP link and the iptables path were last made to match (planSync's `applied`). */
  private applied: { vips?: number; iptables?: { sets: number; config: ProxyConfig } } = {};
  private retries: RetryState = new Map();
  /** Periodic iptables checks put off in a row because a change was waiting (sync()). */
  private iptablesChecksDeferred = 0;
  /** Problems afterSync returned last. */
  private edgeProblems: readonly Problem[] = [];
  /** The ownership record (record-keeper.ts). */
  private readonly record: RecordKeeper;
  private needFull = true;
  /** kernelGeneration as last seen. */
  private generation: number | undefined;
  private deadlineTimer: unknown;
  private retryTimer: unknown;
  private pendingSince: number | undefined;
  private failingSince: number | undefined;
  private everSynced = false;
  private failedInARow = 0;
  private readonly clock: Clock;
  private readonly runner: BoundedFrequencyRunner;
  /** Report of the last sync; undefined before the first. */
  last: SyncReport | undefined;

  constructor(config: ProxyConfig, private readonly deps: OperatorDeps) {
    this.slowStart = new SlowStartTracker((name) => {
      const plugin = deps.registry.get(name);
      return plugin?.ramp ? (endpoints) => plugin.ramp!(endpoints) : undefined;
    });
    this.clock = deps.clock ?? realClock;
    this.reader = new KernelReader(deps.ipvs, deps.vips, this.clock);
    this.record = new RecordKeeper(deps.record ?? new MemoryOwnershipRecord(), deps.log);
    this.state = new DesiredState(config, deps.registry, deps.nodeName, {
      availableSchedulers: deps.kernel.schedulers, kernelVersion: deps.kernel.release,
    });
    this.runner = new BoundedFrequencyRunner((why) => this.sync(why), {
      ...intervals(config),
      clock: this.clock,
      onError: (e) => deps.log('error', 'sync failed; will retry', { error: (e as Error).message }),
    });
  }

  /** Starts the runner: the first sync reads the kernel and plans everything. */
  start(): void {
    this.runner.start();
  }

  /** Stops syncing; resolves when a sync in progress ended. The kernel is left as it is. */
  async stop(): Promise<void> {
    for (const t of [this.deadlineTimer, this.retryTimer]) if (t !== undefined) this.clock.clearTimeout(t);
    await this.runner.stop();
  }

  /** The configuration in force. */
  get currentConfig(): ProxyConfig {
    return this.state.currentConfig;
  }

  /** True after a successful sync while healthy (/readyz). */
  get ready(): boolean {
    return this.health().ready;
  }

  /** The /healthz and /readyz verdict now (health.ts). */
  health(): HealthVerdict {
    return evaluateHealth({
      now: this.clock.now(),
      syncPeriodMs: this.currentConfig.syncPeriod * 1000,
      ...(this.deps.healthBoundMs === undefined ? {} : { boundMs: this.deps.healthBoundMs }),
      ...(this.last ? { lastSyncEnd: this.last.at } : {}),
      ...(this.failingSince === undefined ? {} : { failingSince: this.failingSince }),
      ...(this.last?.error ? { lastError: this.last.error } : {}),
      everSynced: this.everSynced,
      ...(this.deps.sourceHealth ? { source: this.deps.sourceHealth() } : {}),
      ...(this.deps.kernelHealth ? { kernel: this.deps.kernelHealth() } : {}),
    });
  }

  /** Asks for a sync (within minSyncPeriod) when something outside the source changed what is desired (cluster weights). */
  poke(): void {
    this.runner.run();
  }

  /** Feeds one source event; a sync follows within minSyncPeriod. */
  handle(e: SourceEvent): void {
    this.pendingSince ??= this.clock.now();
    const m = this.deps.metrics;
    if (e.kind === 'service') {
      m?.serviceChangesPending.inc();
      m?.serviceChanges.inc();
    } else if (e.kind === 'endpointslice') {
      m?.endpointChangesPending.inc();
      m?.endpointChanges.inc();
    }
    switch (e.kind) {
      case 'service':
        if (e.type === 'delete') this.state.deleteService(e.object.metadata?.namespace ?? '', e.object.metadata?.name ?? '');
        else this.state.setService(e.object);
        break;
      case 'endpointslice':
        if (e.type === 'delete') this.state.deleteSlice(e.object);
        else this.state.setSlice(e.object);
        break;
      case 'node':
        this.state.setNode(e.type === 'delete' ? undefined : e.object);
        break;
      case 'config':
        this.state.setConfig(e.config);
        this.applied = {};
        this.runner.setIntervals(intervals(e.config));
        this.needFull = true;
        this.deps.log('info', 'configuration changed; full resync', { defaultScheduler: e.config.defaultScheduler });
        break;
    }
    this.runner.run();
  }

  /** One sync; the runner calls it. Throws when the node's machinery failed (retried in full). */
  async sync(why: SyncReason = { periodic: false, retry: false }): Promise<void> {
    const t0 = this.clock.now();
    const pendingSince = this.pendingSince;
    this.pendingSince = undefined;
    // A retry follows a failed sync, after which the copy of the kernel may be wrong: read it all.
    // So does a reloaded ip_vs (its table is empty, whatever the cache says).
    const reset = await this.kernelReset();
    const full = this.needFull || why.retry || !this.everSynced || reset;
    // Taken now: a configuration that arrives during this sync asks for the next one in full.
    this.needFull = false;
    const periodic = why.periodic && !full;
    let plan: SyncPlan | undefined;
    let settled: Settled | undefined;
    try {
      const { changed } = this.state.sync();
      const built = this.state.desired();
      const cluster = this.deps.clusterWeights?.apply(built.table, changed, t0);
      const ramp = this.slowStart.apply(cluster?.table ?? built.table, changed, t0);
      const desired = { ...built, table: ramp.table };
      const config = this.state.currentConfig;
      const due = full ? new Set<string>() : dueRetries(this.retries, t0);
      await this.record.load();
      const reread = await this.reader.read({
        full, periodic, changed, due, draining: this.draining, table: desired.table, t0, link: config.interfaceName,
        syncPeriodMs: config.syncPeriod * 1000, changeWaiting: () => this.pendingSince !== undefined,
      });
      if (full) this.applied = {};
      const readEnd = this.clock.now();
      // The client connected to a new IPVS during the read: a full read was all on it, a partial
      // one describes a table that is gone.
      if ((await this.kernelReset()) && !full) throw new Error('ip_vs was loaded again during the read; syncing in full');
      // A periodic sync re-applies the VIP link (a diff against the listed addresses), and the
      // iptables path when it has drifted (a read-only check; a full restore costs tens of seconds
      // at 10 000 Services under TCG), repairing their drift too.
      if (periodic) {
        // A change that arrived during the read waits for this sync to end: the iptables check (two
        // saves and a set listing, subprocesses: hundreds of ms on a loaded node) is put off to a
        // later period, at most MAX_DEFERRED_CHECKS times in a row, so drift is still caught.
        if (this.pendingSince !== undefined && this.iptablesChecksDeferred < MAX_DEFERRED_CHECKS) {
          this.iptablesChecksDeferred++;
          this.applied = this.applied.iptables ? { iptables: this.applied.iptables } : {};
        } else {
          this.iptablesChecksDeferred = 0;
          this.applied = (await this.iptablesInStep(desired, config)) ? { iptables: this.applied.iptables! } : {};
        }
      }
      plan = planSync({
        now: t0, full, changed, reread, desired, versions: this.state.versions, config,
        actual: this.reader.cache.view, vipsNow: this.reader.vipsNow!, draining: this.draining, applied: this.applied,
        ...(this.record.keys ? { recorded: this.record.keys } : {}), retries: this.retries,
      });
      logPlan(this.deps.log, plan);
      this.deps.onPlan?.(plan);
      // The link and the iptables path count as done only once applied: a failure re-applies them.
      if (plan.vips) delete this.applied.vips;
      if (plan.iptables) delete this.applied.iptables;
      const results = await executeSyncPlan(plan, desired, config, this.deps, this.reader.cache, this.reader.vipsNow!);
      settled = settleSync(plan, results.ops, { retries: this.retries, record: this.record.keys });
      if (results.conntrack) reportCleanup(results.conntrack, this.deps.log, this.deps.metrics);
      this.draining = plan.draining;
      this.armDeadline(earliest(earliest(plan.nextDeadline, ramp.nextAt), cluster?.nextAt));
      if (plan.vips) this.applied.vips = plan.vips.version;
      if (plan.iptables) this.applied.iptables = { sets: plan.iptables.sets, config: plan.iptables.config };
      this.settleRetries(settled);
      await this.record.update(settled.record);
      if (this.deps.afterSync) {
        try {
          this.edgeProblems = await this.deps.afterSync({ desired, healthChecks: this.state.healthChecks(), config });
        } catch (e) {
          this.deps.log('warn', 'after-sync step failed', { error: (e as Error).message });
        }
      }
      const { events, metrics, log } = this.deps;
      await reportProblems(this.problems(), (s) => this.state.serviceRef(s), events, metrics, log);
      if (periodic) this.reader.periodicTailMs = this.clock.now() - readEnd;
      this.failingSince = undefined;
      this.everSynced = true;
      this.finish(t0, plan, settled, full, pendingSince);
    } catch (e) {
      this.needFull = true;
      this.failingSince ??= t0;
      this.finish(t0, plan, settled, full, pendingSince, (e as Error).message);
      throw e;
    }
  }

  /** Whether the client now talks to another IPVS than at the last look (ip_vs loaded again); then onKernelReset. */
  private async kernelReset(): Promise<boolean> {
    const g = this.deps.kernelGeneration?.();
    if (g === undefined) return false;
    const before = this.generation;
    this.generation = g;
    if (before === undefined || before === g) return false;
    this.deps.log('warn', 'ip_vs was loaded again (its generic netlink family changed): full resync, sysctls and timeouts set again',
      { familyBefore: before, familyNow: g });
    try {
      await this.deps.onKernelReset?.();
    } catch (e) {
      this.deps.log('warn', 'setting up the reloaded ip_vs failed', { error: (e as Error).message });
    }
    return true;
  }

  /** Whether the iptables path is as the last sync left it (never re-read: false, so it is re-applied). */
  private async iptablesInStep(desired: Desired, config: ProxyConfig): Promise<boolean> {
    const ipt = this.deps.iptables;
    if (!this.applied.iptables || !ipt.drift) return false;
    try {
      const reason = await ipt.drift(desired, config);
      if (reason) this.deps.log('info', 'iptables path drifted; applying it again', { reason });
      return reason === undefined;
    } catch (e) {
      this.deps.log('warn', 'iptables drift check failed; applying the path again', { error: (e as Error).message });
      return false;
    }
  }

  /** Takes the retry state a sync settled, logs its refused ops and re-arms the retry timer. */
  private settleRetries(settled: Settled): void {
    for (const f of settled.refused) this.deps.log('warn', 'IPVS op refused', { op: formatOp(f.op), errno: f.error.code, error: f.error.message });
    this.retries = settled.retries;
    const next = nextRetryAt(this.retries);
    if (this.retryTimer !== undefined) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = next === undefined ? undefined : this.clock.setTimeout(() => this.runner.run(), Math.max(0, next - this.clock.now()));
  }

  /** Plans the draining virtual servers again when the earliest grace period ends. */
  private armDeadline(deadline: number | undefined): void {
    if (this.deadlineTimer !== undefined) this.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    if (deadline === undefined) return;
    this.deadlineTimer = this.clock.setTimeout(() => this.runner.run(), Math.max(0, deadline - this.clock.now()));
  }

  /** Every problem now: the desired state's, and one per Service whose ops the kernel refuses. */
  problems(): Problem[] {
    return [...this.state.problems(), ...retryProblems(this.retries), ...this.edgeProblems, ...(this.deps.clusterWeights?.lastProblems ?? []), ...this.slowStart.problems];
  }

  /** The sync's metrics, the node's status and its log line (outcome.ts). */
  private finish(
    t0: number, plan: SyncPlan | undefined, settled: Settled | undefined, full: boolean,
    pendingSince: number | undefined, error?: string,
  ): void {
    const now = this.clock.now();
    const ops = plan?.ops.length ?? 0;
    this.last = { at: now, durationMs: now - t0, ops, failed: settled?.refused.length ?? 0, full, ...(error ? { error } : {}) };
    this.failedInARow = error ? this.failedInARow + 1 : 0;
    const health = this.health();
    recordSyncEnd({ t0, now, full, ops, settled, pendingSince, error }, {
      kernelIPVSVersion: this.deps.kernel.ipvsVersion,
      schedulersAvailable: [...this.deps.kernel.schedulers].sort(),
      virtualServers: this.state.desiredTable.size,
      realServers: this.reader.cache.realServers,
      lastSyncTime: new Date(now).toISOString(),
      lastSyncDurationSeconds: (now - t0) / 1000,
      lastError: error ?? '',
      problems: this.problems().length,
      consecutiveFailedSyncs: this.failedInARow,
      healthy: health.healthy,
      healthReason: health.reason,
    }, this.deps);
  }

  /** Per opted-in Service port (view key), its backends (`ip:port`) over every virtual server of that port. */
  clusterBackends(opted: ReadonlyMap<string, string>): Map<string, string[]> {
    const out = new Map<string, Set<string>>();
    for (const [key, vk] of opted) {
      const d = this.state.desiredTable.get(key);
      if (!d) continue;
      const set = out.get(vk) ?? new Set<string>();
      for (const rs of d.dests) set.add(realServerKey(rs));
      out.set(vk, set);
    }
    return new Map([...out].map(([k, v]) => [k, [...v].sort()]));
  }

  /** The desired state's origin of each virtual server key (for status / explain / metrics labels). */
  origins(): ReadonlyMap<string, { namespace: string; name: string; portName: string; plugin: string }> {
    const out = new Map<string, { namespace: string; name: string; portName: string; plugin: string }>();
    for (const [k, d] of this.state.desiredTable) out.set(k, d.origin);
    return out;
  }
}

/** The earlier of two optional times (ms); undefined when both are. */
function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
