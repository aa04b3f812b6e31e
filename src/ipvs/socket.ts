// The IPVS socket: the pipelined netlink socket (src/netlink/socket.ts) on NETLINK_GENERIC, failing
// with IpvsError. What its messages say is requests.ts's, attrs.ts's and decode.ts's business.
import { NetlinkSocket } from '../netlink/socket.js';
import { IpvsError } from './errors.js';

export { CHUNK, type Outgoing, type Reply } from '../netlink/socket.js';

const NETLINK_GENERIC = 16;

/** A generic netlink socket for IPVS with pipelined, sequence-matched request/reply. */
export class GenlSocket extends NetlinkSocket {
  constructor() {
    super(NETLINK_GENERIC, IpvsError);
  }
}
