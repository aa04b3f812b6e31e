// What the loop tells the world after a sync: the plan's text at debug level (the form `--dry-run`
// prints and tests check), Events and the problems metric, the sync metrics, the node's status and
// the "synced" / "sync failed" log line. Each failure here is logged; none fails a sync.
import type { Problem } from '../desired/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Settled } from '../plan/settle.js';
import { type SyncPlan, formatSyncPlan } from '../plan/sync.js';
import type { EventSink, NodeStatus, ServiceRef, StatusSink } from '../source/types.js';
import type { Log } from '../util/log.js';

/** How many IPVS ops (and conntrack filters) of a plan the debug log shows. */
const PLAN_LOG_LINES = 50;

/**
 * The plan at debug level, in the form tests and `--dry-run` use (formatSyncPlan), its first
 * PLAN_LOG_LINES IPVS ops and conntrack filters only: a first sync at 10 000 Services has 100 000
 * ops, formatted whatever the log level.
 */
export function logPlan(log: Log, plan: SyncPlan): void {
  const shown = {
    ...plan, ops: plan.ops.slice(0, PLAN_LOG_LINES), conntrack: plan.conntrack.slice(0, PLAN_LOG_LINES),
    holds: plan.holds.slice(0, PLAN_LOG_LINES),
  };
  const changes = formatSyncPlan(shown);
  if (changes.length) log('debug', 'sync plan', { ops: plan.ops.length, changes });
}

/**
 * The scheduler swaps of a sync: at info, how many virtual servers swapped with their new SYNs
 * held (the first few named); at warn, a hold that could not be set (those swaps ran unheld).
 */
export function reportHolds(plan: SyncPlan, holdError: unknown, log: Log): void {
  if (!plan.holds.length) return;
  const virtualServers = plan.holds.slice(0, 10).map((h) => `${h.member.address},tcp:${h.member.port}`);
  const fields = { swaps: plan.holds.length, virtualServers };
  if (holdError === undefined) log('info', 'scheduler swapped with new SYNs held', fields);
  else {
    const error = holdError instanceof Error ? holdError.message : String(holdError);
    log('warn', 'could not hold new SYNs; the scheduler swap ran unheld', { ...fields, error });
  }
}

/** Events for problems (each on its Service when `refOf` knows it) and the problems metric, per reason. */
export async function reportProblems(
  problems: readonly Problem[], refOf: (service: string) => ServiceRef | undefined,
  events: EventSink, metrics: Metrics | undefined, log: Log,
): Promise<void> {
  const refs = new Map<string, ServiceRef>();
  for (const p of problems) {
    const ref = p.service ? refOf(p.service) : undefined;
    if (ref) refs.set(p.service, ref);
  }
  if (metrics) {
    metrics.source.serviceProblems.reset();
    const byReason = new Map<string, number>();
    for (const p of problems) byReason.set(p.reason, (byReason.get(p.reason) ?? 0) + 1);
    for (const [reason, n] of byReason) metrics.source.serviceProblems.set({ reason }, n);
  }
  try {
    await events.report(problems, refs);
  } catch (e) {
    log('warn', 'posting events failed', { error: (e as Error).message });
  }
}

/** One sync's end, as the loop saw it. */
/** Where a sync's time went, in ms: each phase it reached; a failed sync's last is the one it failed in. */
export interface SyncPhases {
  /** The desired state (the Services changed since the last sync rebuilt) and the weights. */
  build?: number;
  /** The kernel's table read: all of it (full), the changed virtual servers, or the drift check's share. */
  read?: number;
  plan?: number;
  /** IPVS, the VIPs, the iptables path and conntrack, written. */
  write?: number;
  /** Settling the results, the record, the health-check edge, problems (the first sync: its rehearsal too). */
  after?: number;
}

/** The clock when each phase of a sync ended (Operator.sync marks them as it goes). */
export type SyncMarks = Partial<Record<'built' | 'read' | 'planned' | 'written', number>>;

const PHASE_ENDS = [['build', 'built'], ['read', 'read'], ['plan', 'planned'], ['write', 'written']] as const;

/** The phases between `t0`, the marks and `end`; the first phase with no mark ran until `end`. */
export function syncPhases(t0: number, marks: SyncMarks, end: number): SyncPhases {
  const phases: SyncPhases = {};
  let from = t0;
  for (const [phase, mark] of PHASE_ENDS) {
    const at = marks[mark];
    if (at === undefined) {
      phases[phase] = end - from;
      return phases;
    }
    phases[phase] = at - from;
    from = at;
  }
  phases.after = end - from;
  return phases;
}

export interface SyncEnd {
  t0: number;
  now: number;
  /** Where its time went (syncPhases). */
  phasesMs: SyncPhases;
  full: boolean;
  /** Ops planned (0 when planning failed). */
  ops: number;
  /** The settled results; undefined when the sync failed before them. */
  settled: Settled | undefined;
  /** When the oldest change this sync took was handed in. */
  pendingSince: number | undefined;
  /** Set when the sync failed. */
  error: string | undefined;
}

/** The sync metrics, the node's status (`status` as the loop fills it; a failed write is logged) and the log line. */
export function recordSyncEnd(
  end: SyncEnd, status: NodeStatus, sinks: { status: StatusSink; metrics?: Metrics | undefined; log: Log },
): void {
  const { t0, now, error, settled } = end;
  const m = sinks.metrics;
  if (m) {
    m.sync.duration.observe((now - t0) / 1000);
    if (!error) m.sync.lastSync.set(now / 1000);
    if (error) m.sync.failures.inc();
    m.sync.serviceChangesPending.set(0);
    m.sync.endpointChangesPending.set(0);
    if (end.pendingSince !== undefined && !error) m.sync.programmingLatency.observe((now - end.pendingSince) / 1000);
    if (settled && !error) {
      for (const c of settled.counts) m.kernel.opsApplied.inc({ kind: c.kind, result: c.result }, c.n);
    }
  }
  sinks.status.write(status).catch((e: unknown) =>
    sinks.log('warn', 'writing node status failed', { error: (e as Error).message }));
  sinks.log(error ? 'error' : 'info', error ? 'sync failed' : 'synced', {
    ops: end.ops, failed: settled?.refused.length ?? 0, full: end.full, durationMs: now - t0, phasesMs: end.phasesMs,
    virtualServers: status.virtualServers, ...(error ? { error } : {}),
  });
}
