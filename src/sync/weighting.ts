// The weights the planner gets: the cluster load view's (when on), then slow-start ramps over them.
import type { PluginRegistry } from '../../plugins/index.js';
import { SlowStartTracker } from '../balance/slow-start.js';
import type { ClusterWeights } from '../balance/cluster-view.js';
import type { DesiredTable, Problem } from '../desired/types.js';

/** The desired table with the weights applied, and when either stage wants the next sync. */
export interface WeightedTable {
  table: DesiredTable;
  rampAt: number | undefined;
  clusterAt: number | undefined;
}

/** Cluster weights (optional) then slow start (balance/slow-start.ts), as one step of the sync. */
export class Weighting {
  private readonly slowStart: SlowStartTracker;

  constructor(registry: PluginRegistry, private readonly cluster?: ClusterWeights) {
    this.slowStart = new SlowStartTracker((name) => {
      const plugin = registry.get(name);
      return plugin?.ramp ? (endpoints) => plugin.ramp!(endpoints) : undefined;
    });
  }

  /** Applies both stages to the table built from the API objects. */
  apply(table: DesiredTable, changed: Set<string>, now: number): WeightedTable {
    const cluster = this.cluster?.apply(table, changed, now);
    const ramp = this.slowStart.apply(cluster?.table ?? table, changed, now);
    return { table: ramp.table, rampAt: ramp.nextAt, clusterAt: cluster?.nextAt };
  }

  /** The cluster view's last problems, then the refused ramp() answers. */
  get problems(): Problem[] {
    return [...(this.cluster?.lastProblems ?? []), ...this.slowStart.problems];
  }
}
