// `lblcr`: locality-based least connections with replication, weighted. Weights from the `weights`
// option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** locality-based least connections with replication, weighted (kernel scheduler `lblcr`). */
export const plugin = makeWeightedPlugin({
  name: 'lblcr',
  description: 'locality-based least connections with replication, weighted',
});
