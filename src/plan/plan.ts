// planIpvs: the smallest ordered list of ops turning the kernel's table into the desired one:
// adds before updates before deletes, each phase sorted by key. Graceful termination is explicit
// data (`draining`, no hidden clock), and only owned virtual servers are touched (ownership.ts).
// pure: no I/O. docs/plan.md ("planIpvs") has the order, the drain rules and why.
import {
  type IpvsOp, type IpvsTable, type RealServer, SvcFlag, type VirtualServer, realServerKey,
} from '../model/ipvs.js';
import type { Owns } from './ownership.js';

/** A virtual server we want: the desired table's entries fit this shape. */
export interface WantedVirtualServer {
  vs: VirtualServer;
  dests: readonly RealServer[];
}

/** Draining real servers: virtual server key -> real server key -> when draining started (ms). */
export type DrainState = ReadonlyMap<string, ReadonlyMap<string, number>>;

/** Everything the planner reads. */
export interface PlanInput {
  desired: ReadonlyMap<string, WantedVirtualServer>;
  actual: IpvsTable;
  owns: Owns;
  /** Current time in ms (for graceful termination). */
  now: number;
  /** From the previous plan; empty at start. */
  draining: DrainState;
  gracePeriodMs: number;
}

/** A plan: the ops, and the draining state to pass to the next plan. */
export interface Plan {
  ops: IpvsOp[];
  draining: DrainState;
  /** Earliest time a draining real server's grace period ends; plan its virtual server again then. */
  nextDeadline?: number;
}

interface Phases {
  addService: IpvsOp[];
  updateService: IpvsOp[];
  dest: IpvsOp[];
  deleteDest: IpvsOp[];
  deleteService: IpvsOp[];
}

/** Plans every virtual server in desired or actual. */
export function planIpvs(input: PlanInput): Plan {
  const keys = new Set<string>(input.desired.keys());
  for (const k of input.actual.keys()) keys.add(k);
  return planVirtualServers(keys, input);
}

/**
 * Plans only `keys` (e.g. DesiredState.sync().changed plus the keys in `draining`): O(those
 * virtual servers), whatever the size of the tables. Draining entries of other keys are kept.
 */
export function planVirtualServers(keys: Iterable<string>, input: PlanInput): Plan {
  const phases: Phases = { addService: [], updateService: [], dest: [], deleteDest: [], deleteService: [] };
  const draining = new Map(input.draining);
  for (const key of [...keys].sort()) planVirtualServer(key, input, phases, draining);
  let nextDeadline: number | undefined;
  for (const m of draining.values()) {
    for (const since of m.values()) {
      const deadline = since + input.gracePeriodMs;
      if (nextDeadline === undefined || deadline < nextDeadline) nextDeadline = deadline;
    }
  }
  const ops = [...phases.addService, ...phases.updateService, ...phases.dest, ...phases.deleteDest,
    ...phases.deleteService];
  return nextDeadline === undefined ? { ops, draining } : { ops, draining, nextDeadline };
}

/** Plans one virtual server into `phases`, updating `draining` for it. */
export function planVirtualServer(
  key: string, input: PlanInput, phases: Phases, draining: Map<string, ReadonlyMap<string, number>>,
): void {
  const want = input.desired.get(key);
  const have = input.actual.get(key);
  if (!want) {
    draining.delete(key);
    if (have && input.owns(have.vs)) phases.deleteService.push({ kind: 'delete-service', vs: have.vs });
    return;
  }
  const vs = want.vs;
  if (!have) {
    draining.delete(key);
    phases.addService.push({ kind: 'add-service', vs });
    for (const rs of want.dests) phases.dest.push({ kind: 'add-dest', vs, rs });
    return;
  }
  if (!serviceSettingsEqual(vs, have.vs)) phases.updateService.push({ kind: 'update-service', vs });
  let matched = 0;
  for (const rs of want.dests) {
    const rkey = realServerKey(rs);
    const cur = have.dests.get(rkey);
    if (!cur) phases.dest.push({ kind: 'add-dest', vs, rs });
    else {
      matched++;
      if (!destSettingsEqual(rs, cur)) phases.dest.push({ kind: 'update-dest', vs, rs });
    }
  }
  // Every actual destination is wanted (the common case): nothing to drain or delete.
  if (matched === have.dests.size && !draining.has(key)) return;
  const wanted = new Set(want.dests.map(realServerKey));
  const before = draining.get(key);
  const still = new Map<string, number>();
  for (const [rkey, cur] of have.dests) {
    if (wanted.has(rkey)) continue;
    const conns = cur.activeConns === undefined || cur.inactiveConns === undefined
      ? undefined : cur.activeConns + cur.inactiveConns;
    const since = before?.get(rkey) ?? input.now;
    const graceful = vs.protocol === 'TCP' || vs.fwmark !== 0;
    if (!graceful || conns === 0 || input.now - since >= input.gracePeriodMs) {
      phases.deleteDest.push({ kind: 'delete-dest', vs, rs: cur });
      continue;
    }
    still.set(rkey, since);
    if (cur.weight !== 0) phases.dest.push({ kind: 'update-dest', vs, rs: { ...stripCounters(cur), weight: 0 } });
  }
  if (still.size) draining.set(key, still);
  else draining.delete(key);
}

// The two comparisons below are virtualServerEqual / realServerEqual (model/ipvs.ts) without the
// key comparison: the entries were looked up by key, so keys are equal by construction, and
// building key strings three times per destination made a no-change re-plan of 10 000 Services
// five times slower than planning them from scratch. test/unit/plan/plan.test.ts checks they agree.

/** virtualServerEqual for two virtual servers known to have the same key. */
export function serviceSettingsEqual(a: VirtualServer, b: VirtualServer): boolean {
  if (a.scheduler !== b.scheduler || a.peName !== b.peName) return false;
  if ((a.flags & ~SvcFlag.HASHED) !== (b.flags & ~SvcFlag.HASHED)) return false;
  if (!(a.flags & SvcFlag.PERSISTENT)) return true;
  return a.timeout === b.timeout && a.netmask === b.netmask;
}

/** realServerEqual for two real servers known to have the same key. */
export function destSettingsEqual(a: RealServer, b: RealServer): boolean {
  return a.weight === b.weight && a.forward === b.forward
    && a.upperThreshold === b.upperThreshold && a.lowerThreshold === b.lowerThreshold
    && (a.forward !== 'tunnel'
      || (a.tunnelType === b.tunnelType && a.tunnelPort === b.tunnelPort && a.tunnelFlags === b.tunnelFlags));
}

function stripCounters(rs: RealServer): RealServer {
  const { activeConns: _a, inactiveConns: _i, persistentConns: _p, stats: _s, ...rest } = rs;
  return rest;
}
