// Carries a SyncPlan out: the IPVS ops (pipelined, one result each), the VIP binds (one pipelined
// batch) and the iptables path at once, then the VIP unbinds (one batch). It decides nothing: what
// to change was decided by planSync. An op the kernel refuses is returned as a failure for its
// Service (the others are applied regardless); a VIP or iptables failure, or an op sent to an IPVS
// family that is gone (ip_vs reloaded), rejects, since it concerns the whole node.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import { type IpvsError, isStaleFamily } from '../ipvs/errors.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { IpvsOp } from '../model/ipvs.js';
import type { SyncPlan } from '../plan/sync.js';
import type { VipLink, VipResult } from '../rtnl/vips.js';
import type { TableCache } from './table-cache.js';

/** The kernel interfaces a plan is applied through (real ones, fakes, or dry-run wrappers). */
export interface ExecutorDeps {
  ipvs: IpvsClient;
  vips: VipLink;
  iptables: IptablesSync;
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

/** An op the kernel refused. */
export interface OpFailure {
  op: IpvsOp;
  error: IpvsError;
}

/**
 * Applies `plan`: records each accepted op in `cache` and keeps `vipsNow` (the link's addresses)
 * in step with each address added or removed. Resolves with the refused ops.
 */
export async function executeSyncPlan(
  plan: SyncPlan, desired: Desired, config: ProxyConfig, deps: ExecutorDeps, cache: TableCache, vipsNow: Set<string>,
): Promise<OpFailure[]> {
  const v = plan.vips;
  // The IPVS batch, the VIP binds and the iptables path do not depend on each other: they start at
  // once. VIPs are unbound as soon as the IPVS batch (which deleted the virtual servers on them)
  // and the binds are done; the iptables path may still run meanwhile.
  const settle = <T>(p: Promise<T>) => p.then((value) => ({ ok: true as const, value }), (reason: unknown) => ({ ok: false as const, reason }));
  const ipvs = settle(plan.ops.length ? deps.ipvs.apply(plan.ops) : Promise.resolve([]));
  const bound = settle((async () => {
    if (!v) return;
    if (v.ensure) await deps.vips.ensure(v.link);
    if (v.add.length) keep(await deps.vips.addMany(v.link, v.add), v.add, (ip) => vipsNow.add(ip));
  })());
  const iptables = settle(plan.iptables ? deps.iptables.sync(desired, config) : Promise.resolve());
  const failures: OpFailure[] = [];
  let nodeFault: IpvsError | undefined;
  const applied = await ipvs;
  if (applied.ok) {
    applied.value.forEach((error, i) => {
      const op = plan.ops[i]!;
      if (error && isStaleFamily(error)) nodeFault ??= error;
      else if (error) failures.push({ op, error });
      else cache.record(op);
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
  return failures;
}
