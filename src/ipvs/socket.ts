// The IPVS socket: the pipelined netlink socket (src/netlink/socket.ts) on NETLINK_GENERIC, failing
// with IpvsError. What its messages say is requests.ts's, attrs.ts's and decode.ts's business.
import { DUMP_RECEIVE_BYTES, NetlinkSocket } from '../netlink/socket.js';
import { IpvsError } from './errors.js';

export { CHUNK, type Outgoing, type Reply } from '../netlink/socket.js';

const NETLINK_GENERIC = 16;

/**
 * A generic netlink socket for IPVS with pipelined, sequence-matched request/reply, reading into a
 * 32 KiB buffer so that the kernel's dumps come in 32 KiB datagrams (see DUMP_RECEIVE_BYTES).
 */
export class GenlSocket extends NetlinkSocket {
  constructor() {
    super(NETLINK_GENERIC, IpvsError, DUMP_RECEIVE_BYTES);
  }
}
