// `lblc`: locality-based least connections (per destination IP), weighted. Weights from the
// `weights` option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** locality-based least connections (per destination IP), weighted (kernel scheduler `lblc`). */
export const plugin = makeWeightedPlugin({
  name: 'lblc',
  description: 'locality-based least connections (per destination IP), weighted',
});
