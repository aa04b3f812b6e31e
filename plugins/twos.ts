// `twos`: weighted random twos choice (ip_vs_twos, Linux 6.2+). On older kernels, or when the module
// is missing, the registry reports it unavailable (availability.ts) and the Service falls back to
// the default scheduler with a problem. pure: no I/O.
import { makeWeightedPlugin } from './weighted.js';

/** Weighted random twos choice (kernel scheduler `twos`, kernel >= 6.2). */
export const plugin = makeWeightedPlugin({
  name: 'twos',
  description: 'weighted random twos choice (kernel >= 6.2)',
  minKernel: '6.2',
});
