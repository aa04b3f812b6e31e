// Whether the cluster load view is live on this node: the leader's view-at stamp on the Lease
// changed within the stale window, on this node's own clock (never compared with the leader's).
// While it is not, the node applies its local weights (docs/balance.md, "Stale view").
import type { ClusterViewOptions } from './cluster-view-options.js';
import { VIEW_AT_ANNOTATION } from './cluster-view-options.js';
import type { Observed } from './lease.js';

/** The stamp before the Lease was ever read: the view counts as live for its first staleMs. */
const NOT_SEEN = '(not read yet)';

/** Tracks the leader's stamp and tells the node's ClusterWeights whether the view is alive. */
export class ViewLiveness {
  /** The leader's stamp as last seen and when it changed (this node's clock); NOT_SEEN before the first read. */
  private viewAt: { value: string | undefined; changedAt: number } = { value: NOT_SEEN, changedAt: 0 };

  constructor(
    private readonly o: Pick<ClusterViewOptions, 'weights' | 'log' | 'nodeName' | 'poke'>,
    private readonly staleMs: number, private readonly now: () => number,
  ) {
    this.viewAt.changedAt = this.now();
  }

  /** The view is alive while the leader's stamp changed within staleMs (on this node's clock). */
  observed(obs: Observed | undefined): void {
    const value = obs?.record.holderIdentity ? obs.annotations[VIEW_AT_ANNOTATION] : undefined;
    if (value !== this.viewAt.value) this.viewAt = { value, changedAt: this.now() };
    this.checkAlive();
  }

  /** No Lease read any more (nothing opts in): no stamp. */
  forget(): void {
    this.viewAt = { value: undefined, changedAt: this.now() };
  }

  /** Sets the tracker alive or not; a change is logged and asks for a sync. */
  checkAlive(): void {
    const now = this.now();
    const alive = this.viewAt.value !== undefined && now - this.viewAt.changedAt < this.staleMs;
    const changed = alive !== this.o.weights.isAlive;
    this.o.weights.setAlive(alive, now);
    if (!changed) return;
    const message = alive ? 'cluster load view is live' : 'cluster load view is stale; local weights';
    this.o.log(alive ? 'info' : 'warn', message, { node: this.o.nodeName });
    this.o.poke();
  }
}
