// `mh`: Maglev hashing. The kernel reads the same two flag bits as `sh` (SCHED1 = fallback,
// SCHED2 = port); both ipvsadm spellings are accepted: `sh-fallback`/`sh-port` and
// `mh-fallback`/`mh-port`. Weights size each server's share of the lookup table. pure: no I/O.
import { SCHED_SH_FALLBACK, SCHED_SH_PORT } from '../src/model/ipvs.js';
import type { HashOptions } from './sh.js';
import { makeWeightedPlugin } from './weighted.js';

/** Maglev hashing (kernel scheduler `mh`). */
export const plugin = makeWeightedPlugin<HashOptions>({
  name: 'mh',
  description: 'Maglev hashing (options sh-fallback/mh-fallback, sh-port/mh-port)',
  extraOptions: {
    'sh-fallback': { type: 'boolean' }, 'sh-port': { type: 'boolean' },
    'mh-fallback': { type: 'boolean' }, 'mh-port': { type: 'boolean' },
  },
  flags: (o) => (o['sh-fallback'] || o['mh-fallback'] ? SCHED_SH_FALLBACK : 0)
    | (o['sh-port'] || o['mh-port'] ? SCHED_SH_PORT : 0),
});
