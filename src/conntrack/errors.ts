// conntrack errors: a NetlinkError of their own kind (ctnetlink over NETLINK_NETFILTER), so a failed
// conntrack deletion is never mistaken for an IPVS or rtnetlink one; isNotFound works on it (a flow
// that ended before it was deleted answers ENOENT). pure: no I/O.
import { NetlinkError } from '../netlink/errors.js';

/** A ctnetlink request that failed, or a conntrack message that could not be read. */
export class ConntrackError extends NetlinkError {}
