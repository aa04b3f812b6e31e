// `ovf`: weighted overflow. The kernel sends new connections to the highest-weight server until its
// active connections exceed its weight, then to the next: weights are connection capacities, so the
// default weight is 100 rather than 1 (equal capacities, still "equal weights"). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** Weighted overflow (kernel scheduler `ovf`): weight = active connections before overflowing. */
export const plugin = makeWeightedPlugin({
  name: 'ovf',
  description: 'weighted overflow: fill the highest-weight server up to its weight in active connections',
  defaultWeight: 100,
});
