// `dh`: destination hashing, weighted. Weights from the `weights` option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** destination hashing, weighted (kernel scheduler `dh`). */
export const plugin = makeWeightedPlugin({
  name: 'dh',
  description: 'destination hashing, weighted',
});
