// Carries a SyncPlan out: the IPVS ops (pipelined, one result each), then the VIP changes, then the
// iptables path. It decides nothing: what to change was decided by planSync. An op the kernel
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
  const failures: OpFailure[] = [];
  if (plan.ops.length) {
    const results = await deps.ipvs.apply(plan.ops);
    results.forEach((error, i) => {
      const op = plan.ops[i]!;
      if (error) failures.push({ op, error });
      else cache.record(op);
    });
  }
  const v = plan.vips;
  if (v) {
    if (v.ensure) await deps.vips.ensure(v.link);
    for (const ip of v.add) {
      await deps.vips.add(v.link, ip);
      vipsNow.add(ip);
    }
    for (const ip of v.remove) {
      await deps.vips.remove(v.link, ip);
      vipsNow.delete(ip);
    }
  }
  if (plan.iptables) await deps.iptables.sync(desired, config);
  return failures;
}
