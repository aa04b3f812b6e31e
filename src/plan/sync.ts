// planSync: one sync of the node as an inert value. Everything a sync decides is decided here, from
// values only: which virtual servers to plan, which are ours (ownership.ts), the IPVS ops and
// drains (plan.ts), VIP binds, whether the iptables path runs, conntrack filters (conntrack.ts),
// the retry policy (retry.ts) and the record's delta. What depends on the kernel's answers is data
// tied to an op's id. pure: no I/O. docs/plan.md ("planSync") has the text form and the order.
import type { ProxyConfig } from '../config/types.js';
import type { Desired } from '../desired/types.js';
import { type IpvsOp, type IpvsTable, formatOp, virtualServerKey } from '../model/ipvs.js';
import type { IpPortMember } from '../model/addr.js';
import { type ConntrackFilter, formatConntrackFilter, planConntrackFilters } from './conntrack.js';
import { type RecordPlan, makeOwnership, planRecord } from './ownership.js';
import { type DrainState, planVirtualServers } from './plan.js';
import { type RetryPlan, type RetryState, planRetries } from './retry.js';

/** Everything one sync decides from. */
export interface SyncInput {
  /** Current time in ms (graceful termination deadlines). */
  now: number;
  /** Plan every virtual server in desired or actual (start, periodic resync, config change, after a failed sync). */
  full: boolean;
  /** Virtual server keys whose desired value changed since the last sync (DesiredState.sync().changed). */
  changed: ReadonlySet<string>;
  /** Keys re-read from the kernel beyond what changed: retries due, drift a periodic check found. */
  reread: ReadonlySet<string>;
  desired: Desired;
  /** DesiredState.versions: equal counters mean equal VIPs / set entries. */
  versions: Readonly<{ sets: number; vips: number }>;
  config: ProxyConfig;
  /** The kernel's table as last read or written, for at least the keys planned. */
  actual: IpvsTable;
  /** Addresses on the VIP link now (as last read or written). */
  vipsNow: ReadonlySet<string>;
  /** From the previous plan; empty at start. */
  draining: DrainState;
  /** The ownership record (ownership.ts); undefined when there is none yet. */
  recorded?: ReadonlySet<string>;
  /** What the VIP link and the iptables path were last made to match; an absent field: apply. */
  applied: Readonly<{ vips?: number; iptables?: Readonly<{ sets: number; config: ProxyConfig }> }>;
  /** The retry state of refused ops (retry.ts); none: empty. */
  retries?: RetryState;
}

/** VIP changes on the operator's dummy link. */
export interface VipPlan {
  link: string;
  /** Create the link (if missing) and set it up first: there are VIPs to hold or to remove. */
  ensure: boolean;
  add: string[];
  remove: string[];
  /** The DesiredState VIP version this plan brings the link to. */
  version: number;
}

/** One sync as a value: what to change, and what to make of the kernel's answers; see the file comment. */
export interface SyncPlan {
  full: boolean;
  /** Virtual server keys looked at. */
  planned: number;
  ops: IpvsOp[];
  /** Undefined: the link is left alone (nothing VIP-related changed). */
  vips: VipPlan | undefined;
  /** Run the iptables path with `desired` and `config` (set entries or config changed, or a full sync). */
  iptables: Readonly<{ sets: number; config: ProxyConfig; entries: number }> | undefined;
  /** Draining real servers after this plan, for the next one. */
  draining: DrainState;
  /** When the earliest draining real server's grace period ends: plan again then. */
  nextDeadline?: number;
  /** UDP conntrack entries to delete after the ops, each filter tied to the ids of its deletions. */
  conntrack: ConntrackFilter[];
  /** The ops that swap a TCP virtual server's scheduler, by id, run while its new SYNs are held. */
  holds: SynHold[];
  /** Which refused ops are retried, and for which Service (settle.ts applies it). */
  retry: RetryPlan;
  /** The ownership record's delta, its changes tied to op ids (settle.ts applies it). */
  record: RecordPlan;
}

/** An op (by id) that swaps a virtual server's scheduler, and the HOLD set member for its SYNs. */
export interface SynHold {
  op: number;
  member: IpPortMember;
}

/**
 * The update-service ops that change a TCP virtual server's scheduler: the kernel swaps it with a
 * gap in which a SYN is refused (iptables/syn-hold.ts). Other edits (flags, persistence) keep the
 * scheduler bound; UDP and SCTP are not held (a dropped datagram is no better than a refused one),
 * nor are firewall-mark virtual servers (no address and port to hold).
 */
export function planHolds(ops: readonly IpvsOp[], actual: IpvsTable): SynHold[] {
  const out: SynHold[] = [];
  ops.forEach((op, id) => {
    if (op.kind !== 'update-service' || op.vs.fwmark || op.vs.protocol !== 'TCP') return;
    const have = actual.get(virtualServerKey(op.vs));
    if (!have || have.vs.scheduler === op.vs.scheduler) return;
    out.push({ op: id, member: { family: op.vs.family, address: op.vs.address, protocol: 'tcp', port: op.vs.port } });
  });
  return out;
}

/** Plans one sync (see the file comment). */
export function planSync(input: SyncInput): SyncPlan {
  const { desired, config } = input;
  const keys = input.full
    ? new Set([...desired.table.keys(), ...input.actual.keys()])
    : new Set([...input.changed, ...input.draining.keys(), ...input.reread]);
  // Only virtual servers that are not desired are asked about: build the address sets on first use.
  let ownsNow: ReturnType<typeof makeOwnership> | undefined;
  const owns = (vs: IpvsOp['vs']) => (ownsNow ??= makeOwnership({
    assignedAddresses: [...input.vipsNow, ...desired.vips],
    excludeCIDRs: config.excludeCIDRs,
    ...(input.recorded ? { recorded: input.recorded } : {}),
  }))(vs);
  const plan = planVirtualServers(keys, {
    desired: desired.table, actual: input.actual, owns, now: input.now, draining: input.draining,
    gracePeriodMs: config.gracefulTerminationSeconds * 1000,
  });
  const vipsDue = input.full || input.applied.vips !== input.versions.vips;
  const ipt = input.applied.iptables;
  const iptablesDue = input.full || !ipt || ipt.sets !== input.versions.sets || ipt.config !== config;
  return {
    full: input.full,
    planned: keys.size,
    ops: plan.ops,
    vips: vipsDue ? planVips(desired.vips, input.vipsNow, config.interfaceName, input.versions.vips) : undefined,
    iptables: iptablesDue ? { sets: input.versions.sets, config, entries: desired.sets.length } : undefined,
    draining: plan.draining,
    ...(plan.nextDeadline === undefined ? {} : { nextDeadline: plan.nextDeadline }),
    conntrack: planConntrackFilters(plan.ops, desired.table),
    holds: planHolds(plan.ops, input.actual),
    retry: planRetries(input.retries ?? new Map(), input.now, keys, desired.table, input.actual),
    record: planRecord({
      full: input.full, ops: plan.ops, desired: desired.table, actual: input.actual, recorded: input.recorded,
    }),
  };
}

/**
 * The VIPs to bind and unbind so that `have` becomes `want`, sorted. One pass over `want` when the
 * two are equal (a periodic sync's usual case; at 30 000 VIPs a second pass cost a change waiting
 * behind that sync about half its wait on the host); `have` is walked only when it holds more.
 */
export function planVips(want: ReadonlySet<string>, have: ReadonlySet<string>, link: string, version: number): VipPlan {
  const add: string[] = [];
  let found = 0;
  for (const ip of want) {
    if (have.has(ip)) found++;
    else add.push(ip);
  }
  const remove: string[] = [];
  if (found < have.size) for (const ip of have) if (!want.has(ip)) remove.push(ip);
  return { link, ensure: want.size > 0 || have.size > 0, add: add.sort(), remove: remove.sort(), version };
}

/** The plan's text form: one change a line (see the file comment); empty when nothing changes. */
export function formatSyncPlan(plan: SyncPlan): string[] {
  return [...syncPlanLines(plan)];
}

/** formatSyncPlan's lines one at a time: a first plan at 10 000 Services has 100 000 of them. */
export function* syncPlanLines(plan: SyncPlan): Generator<string> {
  for (const h of plan.holds) yield `hold-syns ${h.member.address},tcp:${h.member.port}`;
  for (const op of plan.ops) yield formatOp(op);
  for (const ip of plan.vips?.add ?? []) yield `add-vip ${plan.vips!.link} ${ip}`;
  for (const ip of plan.vips?.remove ?? []) yield `del-vip ${plan.vips!.link} ${ip}`;
  if (plan.iptables) yield `sync-iptables ${plan.iptables.entries} set entries`;
  for (const f of plan.conntrack) yield formatConntrackFilter(f);
}
