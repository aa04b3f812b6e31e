// `nq`: never queue: an idle server if any, else shortest expected delay. Weights from the
// `weights` option (see options.ts). pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** never queue: an idle server if any, else shortest expected delay (kernel scheduler `nq`). */
export const plugin = makeWeightedPlugin({
  name: 'nq',
  description: 'never queue: an idle server if any, else shortest expected delay',
});
