// Carries a SyncPlan out: first the ops that swap a scheduler, with their SYNs held (when the
// iptables path can hold them); then the other IPVS ops (pipelined, one result each), the VIP binds
// (one pipelined batch) and the iptables path at once, then the VIP unbinds (one batch), then the
// plan's conntrack filters whose deletions the kernel accepted. It decides nothing: what to
// change, and what each answer means, was decided by planSync. It reports the kernel's answer to
// each op by id (a refused op is its Service's; the others are applied regardless) and what the
// conntrack step did; a VIP or iptables failure, or an op sent to an IPVS family that is gone
// (ip_vs reloaded), rejects, since it concerns the whole node, and then no conntrack entry is
// deleted.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import { type IpvsError, isStaleFamily } from '../ipvs/errors.js';
import type { IpvsClient, OpResult } from '../ipvs/types.js';
import { sameServerKeys } from '../model/ipvs.js';
import type { ConntrackClient } from '../conntrack/client.js';
import { dueConntrack } from '../plan/conntrack.js';
import type { SyncPlan } from '../plan/sync.js';
import { type CleanupResult, cleanStaleFlows } from './conntrack-cleanup.js';
import type { VipLink, VipResult } from '../rtnl/vips.js';
import type { TableCache } from './table-cache.js';

/** The kernel interfaces a plan is applied through (real ones, fakes, or dry-run wrappers). */
export interface ExecutorDeps {
  ipvs: IpvsClient;
  vips: VipLink;
  iptables: IptablesSync;
  /** ctnetlink; none: the plan's conntrack filters are not run (dry runs, tests without it). */
  conntrack?: ConntrackClient;
}

/**
 * Records each address of a VIP batch that was done, then throws the first refusal (EEXIST,
 * EADDRNOTAVAIL, ...): as before batching, a refused VIP fails the sync for the node and the next
 * sync lists the link again; the batch's other addresses are applied regardless.
 */
function keep(results: readonly VipResult[], ips: readonly string[], done: (ip: string) => void): void {
  results.forEach((e, i) => { if (!e) done(ips[i]!); });
  const refused = results.find((e) => e);
  if (refused) throw refused;
}

/** What carrying out a plan did, item by item. */
export interface SyncResults {
  /** The kernel's answer to each op, by id (index in the plan's ops): undefined when applied. */
  ops: OpResult[];
  /** The conntrack step; undefined when no filter was due (or there is no conntrack client). */
  conntrack?: CleanupResult;
  /** Why the plan's SYN hold could not be set (its swaps ran unheld); undefined when it was, or none was due. */
  holdError?: unknown;
}

/** The plan's scheduler swaps, done: their op ids (ascending), the kernel's answers, the hold's error. */
interface Swapped {
  ids: number[];
  results: OpResult[];
  holdError?: unknown;
}

/** Scheduler swaps held at once: a default scheduler changed at 30 000 Services holds none for long. */
const SWAPS_PER_HOLD = 256;

/**
 * Applies the plan's scheduler swaps with their SYNs held, SWAPS_PER_HOLD at a time, before
 * anything else of the sync starts (the iptables step may read our sets, the HOLD set among them).
 * Undefined: none due, or the iptables path cannot hold (they go with the other ops, unheld).
 */
async function holdSwaps(plan: SyncPlan, deps: ExecutorDeps): Promise<Swapped | undefined> {
  const hold = deps.iptables.holdSyns?.bind(deps.iptables);
  if (!plan.holds.length || !hold) return undefined;
  const out: Swapped = { ids: [], results: [] };
  for (let i = 0; i < plan.holds.length; i += SWAPS_PER_HOLD) {
    const chunk = plan.holds.slice(i, i + SWAPS_PER_HOLD);
    const ids = chunk.map((h) => h.op);
    const swap = await hold(chunk.map((h) => h.member), () => deps.ipvs.apply(ids.map((id) => plan.ops[id]!)));
    out.ids.push(...ids);
    out.results.push(...swap.value);
    if (swap.error !== undefined) out.holdError ??= swap.error;
  }
  return out;
}

/** The other ops (all when nothing was swapped first), and every op's answer in the plan's order. */
async function applyRest(plan: SyncPlan, deps: ExecutorDeps, swapped: Swapped | undefined): Promise<OpResult[]> {
  if (!swapped) return plan.ops.length ? deps.ipvs.apply(plan.ops) : [];
  const done = new Set(swapped.ids);
  const rest = plan.ops.map((_, i) => i).filter((i) => !done.has(i));
  const others = rest.length ? await deps.ipvs.apply(rest.map((i) => plan.ops[i]!)) : [];
  const results = new Array<OpResult>(plan.ops.length);
  swapped.ids.forEach((id, k) => { results[id] = swapped.results[k]; });
  rest.forEach((id, k) => { results[id] = others[k]; });
  return results;
}

/**
 * Applies `plan`: records each accepted op in `cache` and keeps `vipsNow` (the link's addresses)
 * in step with each address added or removed. Resolves with each item's result.
 */
export async function executeSyncPlan(
  plan: SyncPlan, desired: Desired, config: ProxyConfig, deps: ExecutorDeps, cache: TableCache, vipsNow: Set<string>,
): Promise<SyncResults> {
  const v = plan.vips;
  // The IPVS batch, the VIP binds and the iptables path do not depend on each other: they start at
  // once. VIPs are unbound as soon as the IPVS batch (which deleted the virtual servers on them)
  // and the binds are done; the iptables path may still run meanwhile. (A full sync's iptables
  // path started beside its read instead was measured three times and gained nothing in the lab
  // VM: docs/performance.md, "Starting the iptables path beside the table read".)
  const settle = <T>(p: Promise<T>) =>
    p.then((value) => ({ ok: true as const, value }), (reason: unknown) => ({ ok: false as const, reason }));
  const swapped = await holdSwaps(plan, deps);
  const ipvs = settle(applyRest(plan, deps, swapped));
  const bound = settle((async () => {
    if (!v) return;
    if (v.ensure) await deps.vips.ensure(v.link);
    if (v.add.length) keep(await deps.vips.addMany(v.link, v.add), v.add, (ip) => vipsNow.add(ip));
  })());
  const iptables = settle(plan.iptables ? deps.iptables.sync(desired, config) : Promise.resolve());
  let nodeFault: IpvsError | undefined;
  const applied = await ipvs;
  if (applied.ok) {
    const keyOf = sameServerKeys();
    applied.value.forEach((error, i) => {
      if (error && isStaleFamily(error)) nodeFault ??= error;
      else if (!error) cache.record(plan.ops[i]!, keyOf(plan.ops[i]!.vs));
    });
  }
  const binds = await bound;
  let unbind: { ok: true } | { ok: false; reason: unknown } = { ok: true };
  if (applied.ok && binds.ok) {
    unbind = await settle((async () => {
      if (v?.remove.length) keep(await deps.vips.removeMany(v.link, v.remove), v.remove, (ip) => vipsNow.delete(ip));
    })());
  }
  // Whatever failed, the iptables path is waited for: no sync overlaps the next one.
  const rules = await iptables;
  for (const r of [applied, binds, unbind, rules]) if (!r.ok) throw r.reason;
  if (nodeFault) throw nodeFault;
  const results = applied.ok ? applied.value : [];
  const hold = swapped?.holdError === undefined ? {} : { holdError: swapped.holdError };
  const due = deps.conntrack ? dueConntrack(plan.conntrack, results) : [];
  if (!deps.conntrack || due.length === 0) return { ops: results, ...hold };
  return { ops: results, ...hold, conntrack: await cleanStaleFlows(deps.conntrack, due) };
}
