// IPVS errors: the NetlinkError kind of the IPVS generic netlink family. pure: no I/O.
import { NetlinkError } from '../netlink/errors.js';

/** An error of the IPVS generic netlink family (or of our IPVS client's checks). */
export class IpvsError extends NetlinkError {}
