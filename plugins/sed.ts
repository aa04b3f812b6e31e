// `sed`: shortest expected delay: least (active+1)/weight. Weights from the `weights` option (see
// options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** shortest expected delay: least (active+1)/weight (kernel scheduler `sed`). */
export const plugin = makeWeightedPlugin({
  name: 'sed',
  description: 'shortest expected delay: least (active+1)/weight',
});
