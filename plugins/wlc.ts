// `wlc`: weighted least connections. Weights from the `weights` option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** weighted least connections (kernel scheduler `wlc`). */
export const plugin = makeWeightedPlugin({
  name: 'wlc',
  description: 'weighted least connections',
});
