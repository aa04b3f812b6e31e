// `wrr`: weighted round robin. Weights from the `weights` option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** weighted round robin (kernel scheduler `wrr`). */
export const plugin = makeWeightedPlugin({
  name: 'wrr',
  description: 'weighted round robin',
});
