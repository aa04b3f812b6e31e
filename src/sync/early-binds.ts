// A full sync's VIP binds, started as soon as its desired state is built, before the read of IPVS
// and the plan. The VIPs depend on the Services alone, and binding them is the kernel's work on the
// helper thread (address-batches.ts): in the lab VM at 10 000 Services it was what ended a first
// sync, started only with the plan's other writes. The sync's read takes the link's listing from
// here, so its plan holds the same VIP plan (planVips over the same two sets); the executor then
// awaits these binds instead of sending them again. What the sync does is unchanged, so are its
// plan lines: only when the binds start. Unbinds still wait for the IPVS batch (executor.ts).
import { planVips, type VipPlan } from '../plan/sync.js';
import type { VipLink, VipResult } from '../rtnl/vips.js';

/** The binds of one full sync, under way: see the file comment. */
export class EarlyBinds {
  /** The link's addresses before any bind: the read takes them as the link's. */
  readonly listed: Promise<string[]>;
  /** The VIP plan made from that listing, once made. */
  private planned: VipPlan | undefined;
  private readonly bound: Promise<VipResult[]>;

  /** Readies the binds' thread (VipLink.prepare) and starts them. */
  static start(vips: VipLink, want: ReadonlySet<string>, link: string, version: number): EarlyBinds {
    vips.prepare(want.size);
    return new EarlyBinds(vips, want, link, version);
  }

  /** Lists `link`, plans `want` against it and binds what is missing (ensure first, as the executor does). */
  constructor(vips: VipLink, want: ReadonlySet<string>, link: string, version: number) {
    this.listed = vips.list(link);
    this.bound = this.listed.then(async (have) => {
      const plan = (this.planned = planVips(want, new Set(have), link, version));
      if (plan.ensure) await vips.ensure(link);
      return plan.add.length ? vips.addMany(link, plan.add) : [];
    });
    // Awaited by the read and the executor; a sync that fails before them awaits settled() instead.
    this.listed.catch(() => undefined);
    this.bound.catch(() => undefined);
  }

  /** The VIP plan made from the listing (undefined until it is listed): the sync's plan takes it. */
  get plan(): VipPlan | undefined {
    return this.planned;
  }

  /**
   * The binds of `v` (each address's result, in the order of v.add), when `v` is the plan made
   * here; undefined for any other plan, whose binds are not under way.
   */
  binding(v: VipPlan): Promise<VipResult[]> | undefined {
    return v === this.planned ? this.bound : undefined;
  }

  /** Resolves once the binds have ended, whichever way: no sync's binds outlive it. */
  settled(): Promise<void> {
    return this.bound.then(() => undefined, () => undefined);
  }
}
