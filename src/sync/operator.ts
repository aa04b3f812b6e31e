// The sync loop: source events in, kernel state out. Each sync reads what the plan needs from the
// kernel (kernel-read.ts), plans (planSync, pure), executes (executor.ts) and settles (settleSync,
// pure), then reports (outcome.ts). A refused op is a Problem of its Service only; a failure of
// the node's own machinery fails the sync, retried in full. docs/architecture.md ("The sync loop")
// says what each step keeps and why start never flushes.
import { DesiredState } from '../desired/state.js';
import type { Problem } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import { formatOp, realServerKey } from '../model/ipvs.js';
import { dueRetries, nextRetryAt, retryProblems } from '../plan/retry.js';
import { type Settled, settleSync } from '../plan/settle.js';
import { type SyncPlan, planSync } from '../plan/sync.js';
import type { SourceEvent } from '../source/types.js';
import { reportCleanup } from './conntrack-cleanup.js';
import { executeSyncPlan } from './executor.js';
import { type SyncMarks, logPlan, recordSyncEnd, reportHolds, reportProblems, syncPhases } from './outcome.js';
import { type HealthVerdict, evaluateHealth } from '../healthcheck/health.js';
import { MemoryOwnershipRecord } from './record.js';
import { type SyncReason, realClock } from './runner.js';
import { KernelReader } from './kernel-read.js';
import type { OperatorDeps, SyncReport } from './operator-types.js';
import { SyncCarry, SyncProgress, syncInput } from './loop-state.js';
import { SyncTimers, intervals } from './timers.js';
import { collectAfterFirstSync, rehearseChange } from './rehearsal.js';
import { Weighting } from './weighting.js';
import { KernelGeneration } from './kernel-generation.js';

export type { AfterSyncView, KernelInfo, OperatorDeps, SyncReport } from './operator-types.js';

/** Programs IPVS (and through its seams, VIPs and iptables) from source events. */
export class Operator {
  private readonly state: DesiredState;
  /** The copy of the kernel: table cache and VIP link addresses (kernel-read.ts). */
  private readonly reader: KernelReader;
  /** Cluster weights and slow-start ramps: the weights the planner gets. */
  private readonly weights: Weighting;
  private readonly kernel: KernelGeneration;
  /** What a sync hands the next: drains, applied paths, retries, the record, edge problems. */
  private readonly carry: SyncCarry;
  private readonly progress = new SyncProgress();
  private readonly timers: SyncTimers;

  constructor(config: ProxyConfig, private readonly deps: OperatorDeps) {
    this.weights = new Weighting(deps.registry, deps.clusterWeights);
    const clock = deps.clock ?? realClock;
    this.reader = new KernelReader(deps.ipvs, deps.vips, clock, deps.log);
    this.kernel = new KernelGeneration(deps);
    this.carry = new SyncCarry(deps.record ?? new MemoryOwnershipRecord(), deps.log);
    this.state = new DesiredState(config, deps.registry, deps.nodeName, {
      availableSchedulers: deps.kernel.schedulers, kernelVersion: deps.kernel.release,
    });
    this.timers = new SyncTimers((why) => this.sync(why), {
      ...intervals(config),
      clock,
      onError: (e) => deps.log('error', 'sync failed; will retry', { error: (e as Error).message }),
    }, clock);
  }

  /** Report of the last sync; undefined before the first. */
  get last(): SyncReport | undefined {
    return this.progress.last;
  }

  /** Starts the runner: the first sync reads the kernel and plans everything. */
  start(): void {
    this.timers.runner.start();
  }

  /** Stops syncing; resolves when a sync in progress ended. The kernel is left as it is. */
  async stop(): Promise<void> {
    await this.timers.stop();
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
    const p = this.progress;
    return evaluateHealth({
      now: this.timers.clock.now(),
      syncPeriodMs: this.currentConfig.syncPeriod * 1000,
      ...(this.deps.healthBoundMs === undefined ? {} : { boundMs: this.deps.healthBoundMs }),
      ...(p.last ? { lastSyncEnd: p.last.at } : {}),
      ...(p.failingSince === undefined ? {} : { failingSince: p.failingSince }),
      ...(p.last?.error ? { lastError: p.last.error } : {}),
      everSynced: p.everSynced,
      ...(this.deps.sourceHealth ? { source: this.deps.sourceHealth() } : {}),
      ...(this.deps.kernelHealth ? { kernel: this.deps.kernelHealth() } : {}),
    });
  }

  /** Asks for a sync (within minSyncPeriod): something outside the source (cluster weights) changed. */
  poke(): void {
    this.timers.runner.run();
  }

  /** Builds what the source sent so far (DesiredState.prepare; between the first lists' pages). */
  prepare(): void {
    this.state.prepare();
  }

  /** Feeds one source event; a sync follows within minSyncPeriod. */
  handle(e: SourceEvent): void {
    this.progress.pendingSince ??= this.timers.clock.now();
    this.carry.iptablesCheck.changeArrived();
    const m = this.deps.metrics;
    if (e.kind === 'service') {
      m?.sync.serviceChangesPending.inc();
      m?.sync.serviceChanges.inc();
    } else if (e.kind === 'endpointslice') {
      m?.sync.endpointChangesPending.inc();
      m?.sync.endpointChanges.inc();
    }
    switch (e.kind) {
      case 'service':
        if (e.type === 'delete') {
          this.state.deleteService(e.object.metadata?.namespace ?? '', e.object.metadata?.name ?? '');
        } else this.state.setService(e.object);
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
        this.carry.applied = {};
        this.timers.runner.setIntervals(intervals(e.config));
        this.progress.needFull = true;
        this.deps.log('info', 'configuration changed; full resync', { defaultScheduler: e.config.defaultScheduler });
        break;
    }
    this.timers.runner.run();
  }

  /** One sync; the runner calls it. Throws when the node's machinery failed (retried in full). */
  async sync(why: SyncReason = { periodic: false, retry: false }): Promise<void> {
    const { clock } = this.timers;
    const { carry, progress } = this;
    const t0 = clock.now();
    const pendingSince = progress.pendingSince;
    progress.pendingSince = undefined;
    // A retry follows a failed sync, after which the copy of the kernel may be wrong: read it all.
    // So does a reloaded ip_vs (its table is empty, whatever the cache says).
    const reset = await this.kernel.reset();
    const full = progress.needFull || why.retry || !progress.everSynced || reset;
    // Taken now: a configuration that arrives during this sync asks for the next one in full.
    progress.needFull = false;
    const periodic = why.periodic && !full;
    if (full) this.reader.openListing(); // its thread reads the kernel while the desired state is built
    let plan: SyncPlan | undefined;
    let settled: Settled | undefined;
    const marks: SyncMarks = {};
    try {
      const { changed } = this.state.sync();
      const built = this.state.desired();
      if (full) this.deps.vips.prepare(built.vips.size); // the binds' thread, readied beside the read
      const weighted = this.weights.apply(built.table, changed, t0);
      const desired = { ...built, table: weighted.table };
      const config = this.state.currentConfig;
      marks.built = clock.now();
      const due = full ? new Set<string>() : dueRetries(carry.retries, t0);
      // A periodic sync re-applies the VIP link and, if it drifted, the iptables path: its check runs
      // beside the read of IPVS; a change that arrives puts either off (iptables-check.ts).
      const checked = periodic ? carry.iptablesCheck.run(
        carry, progress.pendingSince !== undefined, this.deps.iptables, this.deps.log, desired, config,
      ) : undefined;
      const read = carry.record.load().then(() => this.reader.read({
        full, periodic, changed, due, draining: carry.draining, table: desired.table, t0, link: config.interfaceName,
        syncPeriodMs: config.syncPeriod * 1000, changeWaiting: () => progress.pendingSince !== undefined,
      }));
      // Both end before the sync goes on or fails: the check never outlives its sync.
      const reread = await read.finally(() => checked);
      if (full) carry.applied = {};
      else if (periodic && carry.vipCheck.due(progress.pendingSince !== undefined)) delete carry.applied.vips;
      const readEnd = (marks.read = clock.now());
      // The client connected to a new IPVS during the read: a full read was all on it, a partial
      // one describes a table that is gone.
      if ((await this.kernel.reset()) && !full) {
        throw new Error('ip_vs was loaded again during the read; syncing in full');
      }
      plan = planSync(syncInput(carry, this.reader, {
        now: t0, full, changed, reread, desired, versions: this.state.versions, config,
      }));
      logPlan(this.deps.log, plan);
      this.deps.onPlan?.(plan);
      marks.planned = clock.now();
      // The link and the iptables path count as done only once applied: a failure re-applies them.
      if (plan.vips) delete carry.applied.vips;
      if (plan.iptables) delete carry.applied.iptables;
      const results = await executeSyncPlan(plan, desired, config, this.deps, this.reader.cache, this.reader.vipsNow!);
      marks.written = clock.now();
      settled = settleSync(plan, results.ops, { retries: carry.retries, record: carry.record.keys });
      if (results.conntrack) reportCleanup(results.conntrack, this.deps.log, this.deps.metrics);
      if (this.deps.iptables.holdSyns) reportHolds(plan, results.holdError, this.deps.log);
      carry.draining = plan.draining;
      this.timers.armDeadline(plan.nextDeadline, weighted.rampAt, weighted.clusterAt);
      if (plan.vips) carry.applied.vips = plan.vips.version;
      if (plan.iptables) carry.applied.iptables = { sets: plan.iptables.sets, config: plan.iptables.config };
      this.settleRetries(settled);
      await carry.record.update(settled.record);
      if (this.deps.afterSync) {
        try {
          carry.edgeProblems = await this.deps.afterSync({ desired, healthChecks: this.state.healthChecks(), config });
        } catch (e) {
          this.deps.log('warn', 'after-sync step failed', { error: (e as Error).message });
        }
      }
      const { events, metrics, log } = this.deps;
      await reportProblems(this.problems(), (s) => this.state.serviceRef(s), events, metrics, log);
      const first = !progress.everSynced;
      if (first) {
        const { state, reader, deps } = this;
        await rehearseChange({ state, reader, desired, config, carry, clock, deps });
      }
      if (periodic) this.reader.periodicTailMs = clock.now() - readEnd;
      progress.failingSince = undefined;
      progress.everSynced = true;
      this.finish(t0, marks, plan, settled, full, pendingSince);
      if (first) collectAfterFirstSync(this.deps.collect, clock, this.deps.log);
    } catch (e) {
      progress.needFull = true;
      progress.failingSince ??= t0;
      this.finish(t0, marks, plan, settled, full, pendingSince, (e as Error).message);
      throw e;
    }
  }

  /** Takes the retry state a sync settled, logs its refused ops and re-arms the retry timer. */
  private settleRetries(settled: Settled): void {
    for (const f of settled.refused) {
      this.deps.log('warn', 'IPVS op refused', { op: formatOp(f.op), errno: f.error.code, error: f.error.message });
    }
    this.carry.retries = settled.retries;
    this.timers.armRetry(nextRetryAt(this.carry.retries));
  }

  /** Every problem now: the desired state's, and one per Service whose ops the kernel refuses. */
  problems(): Problem[] {
    return [
      ...this.state.problems(), ...retryProblems(this.carry.retries), ...this.carry.edgeProblems,
      ...this.weights.problems,
    ];
  }

  /** The sync's metrics, the node's status and its log line (outcome.ts). */
  private finish(
    t0: number, marks: SyncMarks, plan: SyncPlan | undefined, settled: Settled | undefined, full: boolean,
    pendingSince: number | undefined, error?: string,
  ): void {
    const [p, now, ops] = [this.progress, this.timers.clock.now(), plan?.ops.length ?? 0];
    const failed = settled?.refused.length ?? 0;
    const phasesMs = syncPhases(t0, marks, now);
    p.last = { at: now, durationMs: now - t0, phasesMs, ops, failed, full, ...(error ? { error } : {}) };
    p.failedInARow = error ? p.failedInARow + 1 : 0;
    const health = this.health();
    recordSyncEnd({ t0, now, phasesMs, full, ops, settled, pendingSince, error }, {
      kernelIPVSVersion: this.deps.kernel.ipvsVersion,
      schedulersAvailable: [...this.deps.kernel.schedulers].sort(),
      virtualServers: this.state.desiredTable.size,
      realServers: this.reader.cache.realServers,
      lastSyncTime: new Date(now).toISOString(),
      lastSyncDurationSeconds: (now - t0) / 1000,
      lastError: error ?? '', problems: this.problems().length,
      consecutiveFailedSyncs: p.failedInARow,
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
