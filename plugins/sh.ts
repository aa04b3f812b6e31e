// `sh`: source hashing. Options `sh-fallback` (IP_VS_SVC_F_SCHED_SH_FALLBACK: pick another server
// when the hashed one is unavailable) and `sh-port` (IP_VS_SVC_F_SCHED_SH_PORT: hash the source port
// too), as ipvsadm names them; weights size each server's share of the hash table. pure: no I/O.
import { SCHED_SH_FALLBACK, SCHED_SH_PORT } from '../src/model/ipvs.js';
import type { WeightedOptions } from './options.js';
import { makeWeightedPlugin } from './weighted.js';

/** Options of `sh` and `mh`. */
export interface HashOptions extends WeightedOptions {
  'sh-fallback'?: boolean;
  'sh-port'?: boolean;
  'mh-fallback'?: boolean;
  'mh-port'?: boolean;
}

/** Source hashing (kernel scheduler `sh`). */
export const plugin = makeWeightedPlugin<HashOptions>({
  name: 'sh',
  description: 'source hashing (options sh-fallback, sh-port)',
  extraOptions: { 'sh-fallback': { type: 'boolean' }, 'sh-port': { type: 'boolean' } },
  flags: (o) => (o['sh-fallback'] ? SCHED_SH_FALLBACK : 0) | (o['sh-port'] ? SCHED_SH_PORT : 0),
});
