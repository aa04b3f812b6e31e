// planSync: one sync of the node as an inert value. Everything a sync decides is decided here, from
// values only: which virtual servers to plan (all of them, or what changed plus what drains and
// what was re-read: retries due, drift), which non-desired ones are ours (ownership.ts), the IPVS
// ops and the draining state (plan.ts), which VIPs to bind and unbind, and whether the iptables
// path runs.
// The executor (src/sync/executor.ts) only carries a SyncPlan out, and `--dry-run` prints it.
//
// Text form, one change a line:
//   add-service TCP 10.200.1.10:80 rr
//   add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq
//   add-vip ipvs-op0 10.200.1.10
//   del-vip ipvs-op0 10.200.1.99
//   sync-iptables 3 set entries
// The executor runs the IPVS batch, the VIP binds and the iptables path at once (none needs
// another), and unbinds VIPs after the batch deleted the virtual servers on them. pure: no I/O.
import type { ProxyConfig } from '../config/types.js';
import type { Desired } from '../desired/types.js';
import { type IpvsOp, type IpvsTable, formatOp } from '../model/ipvs.js';
import { makeOwnership } from './ownership.js';
import { type DrainState, planVirtualServers } from './plan.js';

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

/** One sync as a value: `ops`, `vips` and (if set) the iptables path; see the file comment for the order. */
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
  };
}

/** The VIPs to bind and unbind so that `have` becomes `want`, sorted. */
export function planVips(want: ReadonlySet<string>, have: ReadonlySet<string>, link: string, version: number): VipPlan {
  const add = [...want].filter((ip) => !have.has(ip)).sort();
  const remove = [...have].filter((ip) => !want.has(ip)).sort();
  return { link, ensure: want.size > 0 || have.size > 0, add, remove, version };
}

/** The plan's text form: one change a line (see the file comment); empty when nothing changes. */
export function formatSyncPlan(plan: SyncPlan): string[] {
  const lines = plan.ops.map(formatOp);
  for (const ip of plan.vips?.add ?? []) lines.push(`add-vip ${plan.vips!.link} ${ip}`);
  for (const ip of plan.vips?.remove ?? []) lines.push(`del-vip ${plan.vips!.link} ${ip}`);
  if (plan.iptables) lines.push(`sync-iptables ${plan.iptables.entries} set entries`);
  return lines;
}
