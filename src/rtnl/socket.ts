// A NETLINK_ROUTE socket for batches of acknowledged requests (address adds and deletes): the
// pipelined netlink socket (src/netlink/socket.ts), failing with RtnlError. Why not the `netlink`
// package's RtNetlinkSocket: it sends one datagram per request, so 10 000 VIPs cost 10 000
// sendmsg() calls and 10 000 receive callbacks (about 155 s at 10 000 Services in the TCG lab VM,
// one at a time); rtnetlink_rcv() processes every message of one datagram in order inside
// sendmsg() and queues one NLMSG_ERROR per message. Dumps (the VIP link's addresses) read 32 KB
// datagrams, as the IPVS client's do: the kernel walks a link's address list from its start for
// every datagram it fills (inet_dump_ifaddr), so fewer, larger ones cost it less.
import { DUMP_RECEIVE_BYTES, NetlinkSocket, type Reply } from '../netlink/socket.js';
import { RtnlError } from './errors.js';

export { CHUNK } from '../netlink/socket.js';

/** The route-netlink protocol number. */
export const NETLINK_ROUTE = 0;

/** A request to send: its bytes, numbered with `seq` (from nextSeq) and asking for an ACK. */
export interface RouteRequest {
  seq: number;
  bytes: Buffer;
}

/** A route-netlink socket with pipelined, sequence-matched acknowledged requests. */
export class RouteSocket {
  private readonly sock: NetlinkSocket;

  /**
   * `dumps`: read every datagram into a 32 KB buffer (DUMP_RECEIVE_BYTES: fewer, larger dump
   * datagrams); else into one of its own size, for a socket that only sends acknowledged requests:
   * a batch of refused requests is answered one datagram each, 30 000 datagrams of 32 KB held until
   * collected (1 GB of RSS on the host without --optimize-for-size).
   */
  constructor(dumps = true) {
    this.sock = new NetlinkSocket(NETLINK_ROUTE, RtnlError, dumps ? DUMP_RECEIVE_BYTES : undefined);
  }

  /** The socket's netlink port id, read once at open. */
  get port(): number {
    return this.sock.port;
  }

  /** Why the socket failed (it is then replaced), or undefined while it works. */
  get failed(): Error | undefined {
    return this.sock.failed;
  }

  /** A fresh sequence number. */
  nextSeq(): number {
    return this.sock.nextSeq();
  }

  /**
   * Sends the requests many per datagram and resolves with each one's errno (0 = ACK), in order.
   * Rejects only when the socket itself fails (closed, ENOBUFS, no answer in 30 s).
   */
  async exchange(out: readonly RouteRequest[]): Promise<number[]> {
    return (await this.sock.exchange(out.map((o) => ({ ...o, dump: false })))).map((r) => r.errno);
  }

  /**
   * Sends one dump request (`bytes`, numbered with `seq`) and resolves with its messages and the
   * errno of its DONE. Rejects only when the socket fails, or when 30 s pass without a datagram.
   */
  async dump(seq: number, bytes: Buffer): Promise<Reply> {
    const [reply] = await this.sock.exchange([{ seq, bytes, dump: true }]);
    return reply!;
  }

  /** Closes the socket; a pending exchange rejects. */
  close(): void {
    this.sock.close();
  }
}
