// The IPVS client interface. `NetlinkIpvs` (client.ts) implements it over the kernel's generic
// netlink family; `FakeIpvs` (fake.ts) implements it in memory with the kernel's semantics
// (duplicate add -> EEXIST, missing -> ENOENT/ESRCH) for unit tests of everything above it.
import type { ListingReader } from './proc.js';
import type { IpvsInfo, IpvsOp, IpvsTimeouts, RealServer, VirtualServer } from '../model/ipvs.js';
import type { IpvsError } from './errors.js';

/** Outcome of one op in a batch: undefined on success, else its IpvsError. */
export type OpResult = IpvsError | undefined;

/** What a read of the table decodes. */
export interface ReadOptions {
  /**
   * The kernel's traffic counters of each entry (the STATS and STATS64 nests: connections,
   * packets, bytes and their rates), `stats` in the model; default true. The sync's copy of the
   * table reads without them: it uses none, and 5 000 virtual servers x 10 read from Linux 6.1 held
   * 31.2 MB of heap with them, 15.2 MB without (docs/performance.md). Connection counts
   * (activeConns, ...) are always read.
   */
  stats?: boolean;
}

/** A client of the kernel's IPVS table. Every method rejects with an IpvsError. */
export interface IpvsClient {
  /** GET_INFO: kernel IPVS version and connection table size. */
  info(): Promise<IpvsInfo>;
  /** GET_SERVICE dump: every virtual server, with stats unless `opts.stats` is false. */
  listVirtualServers(opts?: ReadOptions): Promise<VirtualServer[]>;
  /** GET_DEST dump for one virtual server; empty when it does not exist (the kernel's dump cannot tell). */
  listRealServers(vs: VirtualServer, opts?: ReadOptions): Promise<RealServer[]>;
  /**
   * GET_DEST dumps of many virtual servers, several in flight: one entry per virtual server, in
   * order, what listRealServers resolves with or the IpvsError it rejects with. Rejects only when
   * the transport itself fails.
   */
  listRealServersMany(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<RealServer[] | IpvsError>>;
  /**
   * GET_SERVICE (not a dump) of each virtual server's key, many to a datagram: one entry per
   * virtual server, in order, the kernel's virtual server at that key or the IpvsError of its lookup
   * (ESRCH: none there). Each costs a hash lookup, where a dump of every virtual server walks the
   * table once per datagram. Rejects only when the transport itself fails.
   */
  getVirtualServers(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<VirtualServer | IpvsError>>;
  /**
   * The kernel's text listing of the whole table (/proc/net/ip_vs, proc.ts), opened to be read in
   * turn, or undefined where it offers none. Optional: a full read without it dumps every virtual
   * server's real servers.
   */
  listing?(): Promise<ListingReader | undefined>;
  /** NEW_SERVICE; EEXIST when present, ENOENT when the scheduler is unknown. */
  addVirtualServer(vs: VirtualServer): Promise<void>;
  /** SET_SERVICE (scheduler, flags, timeout, netmask, PE); live connections survive. */
  updateVirtualServer(vs: VirtualServer): Promise<void>;
  /** DEL_SERVICE with its real servers. */
  deleteVirtualServer(vs: VirtualServer): Promise<void>;
  /** NEW_DEST; EEXIST when present. */
  addRealServer(vs: VirtualServer, rs: RealServer): Promise<void>;
  /** SET_DEST (weight, forwarding, thresholds, tunnel). */
  updateRealServer(vs: VirtualServer, rs: RealServer): Promise<void>;
  /** DEL_DEST; ENOENT when missing. */
  deleteRealServer(vs: VirtualServer, rs: RealServer): Promise<void>;
  /** GET_CONFIG: tcp, tcpfin and udp timeouts. */
  getTimeouts(): Promise<IpvsTimeouts>;
  /** SET_CONFIG: 0 leaves a timeout unchanged. */
  setTimeouts(t: IpvsTimeouts): Promise<void>;
  /** ZERO: reset counters of one virtual server, or of all when none is given. */
  zero(vs?: VirtualServer): Promise<void>;
  /** FLUSH: delete every virtual server in this network namespace (never used by the operator). */
  flush(): Promise<void>;
  /**
   * Applies ops in order without waiting for each reply (pipelined); one result per op, in order.
   * A failing op does not stop the ops after it. Rejects only when the transport itself fails.
   */
  apply(ops: readonly IpvsOp[]): Promise<OpResult[]>;
  /**
   * The messages `apply` would send for `ops` (those checkOp lets through), encoded into one
   * buffer and not sent: the write's code run once without touching the kernel (sync/rehearsal.ts).
   * Optional: a client without it has no encoding to run.
   */
  encode?(ops: readonly IpvsOp[]): Buffer;
  /** Releases the socket; further calls reject. */
  close(): void;
}
