// IPVS errors: the NetlinkError kind of the IPVS generic netlink family. pure: no I/O.
import { NetlinkError } from '../netlink/errors.js';

/** An error of the IPVS generic netlink family (or of our IPVS client's checks). */
export class IpvsError extends NetlinkError {}

/**
 * The request went to an IPVS family that is gone or was replaced (ip_vs unloaded or loaded again,
 * client.ts): a fault of the node's kernel, never an answer about the object.
 */
export function isStaleFamily(e: unknown): boolean {
  return e instanceof IpvsError && e.code === 'ESTALEFAMILY';
}
