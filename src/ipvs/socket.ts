// The IPVS socket: the pipelined netlink socket (src/netlink/socket.ts) on NETLINK_GENERIC, failing
// with IpvsError. What its messages say is requests.ts's, attrs.ts's and decode.ts's business.
import { NetlinkSocket } from '../netlink/socket.js';
import { IpvsError } from './errors.js';

export { CHUNK, DUMP_RECEIVE_BYTES, type Outgoing, type Reply } from '../netlink/socket.js';

const NETLINK_GENERIC = 16;

/**
 * A generic netlink socket for IPVS with pipelined, sequence-matched request/reply. `receiveBytes`
 * (the client's connection: DUMP_RECEIVE_BYTES) reads each datagram into a buffer of that size, so
 * that the kernel sends long dumps in datagrams as large; without it the socket peeks at each
 * datagram's size (the dump pool's sockets: their dumps are short, and a 32 KiB buffer per datagram
 * made each cost 3 times as much, docs/performance.md).
 */
export class GenlSocket extends NetlinkSocket {
  constructor(receiveBytes?: number) {
    super(NETLINK_GENERIC, IpvsError, receiveBytes);
  }
}
