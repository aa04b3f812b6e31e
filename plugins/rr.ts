// `rr`: round robin. The kernel ignores weights here except that 0 keeps a server idle, so the
// only option is `affinityNetmask`. pure: no I/O.
import { makeUnweightedPlugin } from './weighted.js';

/** Round robin (kernel scheduler `rr`), the default. */
export const plugin = makeUnweightedPlugin({ name: 'rr', description: 'round robin' });
