// `lc`: least connections. The kernel ignores weights here except that 0 keeps a server idle, so
// the only option is `affinityNetmask`. pure: no I/O.
import { makeUnweightedPlugin } from './weighted.js';

/** Least connections (kernel scheduler `lc`): the server with the fewest active+inactive conns. */
export const plugin = makeUnweightedPlugin({ name: 'lc', description: 'least connections' });
