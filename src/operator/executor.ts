// Carries a SyncPlan out: the IPVS ops (pipelined, one result each), the VIP binds and the iptables
// path at once, then the VIP unbinds. It decides nothing: what to change was decided by planSync. An op the kernel
// refuses is returned as a failure for its Service (the others are applied regardless); a VIP or
// iptables failure rejects, since it concerns the whole node.
import type { Desired, ProxyConfig } from '../desired/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { IpvsError } from '../ipvs/errors.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { IpvsOp } from '../model/ipvs.js';
import type { SyncPlan } from '../plan/sync.js';
import type { VipLink } from '../rtnl/vips.js';
import type { TableCache } from './table-cache.js';

/** The kernel interfaces a plan is applied through (real ones, fakes, or dry-run wrappers). */
export interface ExecutorDeps {
  ipvs: IpvsClient;
  vips: VipLink;
  iptables: IptablesSync;
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
  // The IPVS batch, the VIP binds and the iptables path do not depend on each other: they run at
  // once. VIPs are unbound only after the IPVS batch, which deleted the virtual servers on them.
  const [ipvs, bound, iptables] = await Promise.allSettled([
    plan.ops.length ? deps.ipvs.apply(plan.ops) : Promise.resolve([]),
    (async () => {
      if (!v) return;
      if (v.ensure) await deps.vips.ensure(v.link);
      for (const ip of v.add) {
        await deps.vips.add(v.link, ip);
        vipsNow.add(ip);
      }
    })(),
    plan.iptables ? deps.iptables.sync(desired, config) : Promise.resolve(),
  ]);
  if (ipvs.status === 'rejected') throw ipvs.reason;
  const failures: OpFailure[] = [];
  ipvs.value.forEach((error, i) => {
    const op = plan.ops[i]!;
    if (error) failures.push({ op, error });
    else cache.record(op);
  });
  if (bound.status === 'rejected') throw bound.reason;
  for (const ip of v?.remove ?? []) {
    await deps.vips.remove(v!.link, ip);
    vipsNow.delete(ip);
  }
  if (iptables.status === 'rejected') throw iptables.reason;
  return failures;
}
