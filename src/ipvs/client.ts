// NetlinkIpvs: the IpvsClient that talks to the kernel. Requests are built by requests.ts
// (attributes in attrs.ts), checked by validate.ts, and exchanged on connection.ts's socket; this
// file only sequences them.
import type { IpvsInfo, IpvsOp, IpvsTimeouts, RealServer, VirtualServer } from '../model/ipvs.js';
import { decodeDestMessage, decodeInfo, decodeServiceMessage, decodeTimeouts } from './decode.js';
import {
  type IpvsRequest, encodeRequest, flushRequest, getServiceRequest, getTimeoutsRequest, infoRequest, listDestsRequest,
  listServicesRequest, opMessage, setTimeoutsRequest, zeroRequest,
} from './requests.js';
import { formatOp } from '../model/ipvs.js';
import { Errno } from '../netlink/errors.js';
import { IpvsError } from './errors.js';
import { DUMP_RECEIVE_BYTES, GenlSocket, type Outgoing, type Reply } from './socket.js';
import { type Connection, IpvsLink, type OpenSocket, type SocketHealth } from './connection.js';
import type { IpvsClient, OpResult, ReadOptions } from './types.js';
import { checkDumpDests, checkGetService, checkOp } from './validate.js';
import { Serial } from '../util/serial.js';
import { DUMP_RETRIES, DumpPool } from './dump-pool.js';
import type { ListingReader } from './proc.js';
import { openProcListing } from './proc-read.js';

/**
 * The kernel's IPVS over generic netlink. All calls are serialised on one socket. A socket that
 * fails (ENOBUFS, an overrun, no answer, closed under us) is never used again: the next call opens
 * a new one and resolves the family again, with backoff between failed reopens; meanwhile calls
 * reject at once. When ip_vs is unloaded (and loaded again) the family goes away (and comes back
 * with a new id: the controller allocates ids cyclically); generic netlink then answers ENOENT to
 * every request on the old id. So an ENOENT reply is checked against the family: when it is gone
 * or changed, the request fails with a `stale-family` error (never a "not found" its caller would
 * take for an answer) and the next call connects again. `familyId` tells callers that the kernel
 * table they knew is gone (operator.ts: a full resync, sysctls and timeouts set again).
 */
export class NetlinkIpvs implements IpvsClient {
  private readonly queue = new Serial();

  private constructor(private readonly link: IpvsLink, private readonly pool: DumpPool) {}

  /**
   * Opens a socket and resolves the IPVS family. Rejects with an IpvsError (isNotFound) when the
   * kernel has no IPVS family: the ip_vs module is not loaded (generic netlink does not autoload it).
   * `dumpSockets`: the batched reads' dump sockets (default DUMP_SOCKETS).
   */
  static async open(opts: { openSocket?: OpenSocket; dumpSockets?: number } = {}): Promise<NetlinkIpvs> {
    const link = await IpvsLink.open(opts.openSocket ?? (() => new GenlSocket(DUMP_RECEIVE_BYTES)));
    return new NetlinkIpvs(link, new DumpPool(opts.openSocket ?? (() => new GenlSocket()), opts.dumpSockets));
  }

  /** The IPVS family id the controller assigned (varies between boots and module loads). */
  get familyId(): number | undefined {
    return this.link.familyId;
  }

  /** Whether the socket works (see SocketHealth). */
  health(): SocketHealth {
    return this.link.health();
  }

  private outgoing(c: Connection, req: IpvsRequest): Outgoing {
    const seq = c.sock.nextSeq();
    return { seq, bytes: encodeRequest(c.familyId, req, seq, c.sock.port), dump: req.dump };
  }

  /** One request; rejects with its IpvsError when the kernel refuses it. */
  private async one(req: IpvsRequest): Promise<Reply> {
    for (let attempt = 0; ; attempt++) {
      const { c, replies: [reply] } = await this.link.exchange((conn) => [this.outgoing(conn, req)]);
      if (!reply) throw IpvsError.malformed(req.what, 'no reply');
      if (reply.errno === Errno.ENOENT) {
        const stale = await this.link.staleFamily(c);
        if (stale) throw new IpvsError(req.what, 0, 'ESTALEFAMILY', stale);
      }
      if (reply.errno) throw IpvsError.fromErrno(req.what, reply.errno);
      if (!reply.interrupted || attempt >= DUMP_RETRIES) return reply;
    }
  }

  info(): Promise<IpvsInfo> {
    return this.queue.run(async () => {
      const reply = await this.one(infoRequest());
      if (!reply.messages[0]) throw IpvsError.malformed('get-info', 'empty reply');
      return decodeInfo(reply.messages[0]);
    });
  }

  listVirtualServers(opts?: ReadOptions): Promise<VirtualServer[]> {
    const stats = opts?.stats ?? true;
    return this.queue.run(async () => (await this.one(listServicesRequest())).messages
      .map((m) => decodeServiceMessage(m, stats)));
  }

  listRealServers(vs: VirtualServer, opts?: ReadOptions): Promise<RealServer[]> {
    const stats = opts?.stats ?? true;
    return this.queue.run(async () => {
      const invalid = checkDumpDests(vs);
      if (invalid) throw invalid;
      return (await this.one(listDestsRequest(vs))).messages.map((m) => decodeDestMessage(m, vs.family, stats));
    });
  }

  /**
   * The GET_DEST dumps of many virtual servers, DUMP_SOCKETS at a time on the dump pool's sockets
   * (dump-pool.ts): one entry per virtual server, in order, its real servers or the IpvsError of its
   * dump (an invalid virtual server, a refusal, a stale family). Rejects only when a socket fails.
   */
  listRealServersMany(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<RealServer[] | IpvsError>> {
    const stats = opts?.stats ?? true;
    return this.queue.run(() => this.readEach(vss, checkDumpDests, listDestsRequest,
      (reqs) => this.link.dumps((familyId) => this.pool.dumps(familyId, reqs)),
      (r, vs) => r.messages.map((m) => decodeDestMessage(m, vs.family, stats))));
  }

  /** /proc/net/ip_vs of this process's network namespace, where the netlink socket is too. */
  listing(): Promise<ListingReader | undefined> {
    return openProcListing();
  }

  getVirtualServers(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<VirtualServer | IpvsError>> {
    const stats = opts?.stats ?? true;
    return this.queue.run(() => this.readEach(vss, checkGetService, getServiceRequest,
      (reqs) => this.link.exchange((conn) => reqs.map((r) => this.outgoing(conn, r))),
      (r, _vs, what) => {
        if (r.messages.length !== 1) {
          return IpvsError.malformed(what, `${r.messages.length} messages in the reply, not 1`);
        }
        try {
          return decodeServiceMessage(r.messages[0]!, stats);
        } catch (e) {
          return e instanceof IpvsError ? e : IpvsError.malformed(what, String(e));
        }
      }));
  }

  /**
   * One read per virtual server that `check` lets through, exchanged at once by `send`: each
   * entry's answer is `decode`'s of its reply, or its IpvsError (invalid, refused, stale family).
   */
  private async readEach<R>(
    vss: readonly VirtualServer[], check: (vs: VirtualServer) => IpvsError | undefined,
    request: (vs: VirtualServer) => IpvsRequest,
    send: (reqs: IpvsRequest[]) => Promise<{ c: Connection; replies: Reply[] }>,
    decode: (r: Reply, vs: VirtualServer, what: string) => R | IpvsError,
  ): Promise<Array<R | IpvsError>> {
    const out = new Array<R | IpvsError>(vss.length);
    const sent: number[] = [];
    vss.forEach((vs, i) => {
      const invalid = check(vs);
      if (invalid) out[i] = invalid;
      else sent.push(i);
    });
    if (!sent.length) return out;
    const reqs = sent.map((i) => request(vss[i]!));
    const { c, replies } = await send(reqs);
    const stale = replies.some((r) => r.errno === Errno.ENOENT) ? await this.link.staleFamily(c) : undefined;
    replies.forEach((r, k) => {
      const i = sent[k]!;
      const what = reqs[k]!.what;
      if (stale && r.errno === Errno.ENOENT) out[i] = new IpvsError(what, 0, 'ESTALEFAMILY', stale);
      else if (r.errno) out[i] = IpvsError.fromErrno(what, r.errno);
      else out[i] = decode(r, vss[i]!, what);
    });
    return out;
  }

  private single(op: IpvsOp): Promise<void> {
    return this.apply([op]).then(([err]) => {
      if (err) throw err;
    });
  }

  addVirtualServer(vs: VirtualServer): Promise<void> {
    return this.single({ kind: 'add-service', vs });
  }
  updateVirtualServer(vs: VirtualServer): Promise<void> {
    return this.single({ kind: 'update-service', vs });
  }
  deleteVirtualServer(vs: VirtualServer): Promise<void> {
    return this.single({ kind: 'delete-service', vs });
  }
  addRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.single({ kind: 'add-dest', vs, rs });
  }
  updateRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.single({ kind: 'update-dest', vs, rs });
  }
  deleteRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.single({ kind: 'delete-dest', vs, rs });
  }

  getTimeouts(): Promise<IpvsTimeouts> {
    return this.queue.run(async () => {
      const reply = await this.one(getTimeoutsRequest());
      if (!reply.messages[0]) throw IpvsError.malformed('get-config', 'empty reply');
      return decodeTimeouts(reply.messages[0]);
    });
  }

  setTimeouts(t: IpvsTimeouts): Promise<void> {
    return this.queue.run(async () => {
      for (const v of [t.tcp, t.tcpFin, t.udp]) {
        if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
          throw IpvsError.invalidArgument('set-config', `timeout ${v} is not a u32 number of seconds`);
        }
      }
      await this.one(setTimeoutsRequest(t));
    });
  }

  zero(vs?: VirtualServer): Promise<void> {
    return this.queue.run(async () => {
      await this.one(zeroRequest(vs));
    });
  }

  flush(): Promise<void> {
    return this.queue.run(async () => {
      await this.one(flushRequest());
    });
  }

  apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    return this.queue.run(async () => {
      const results: OpResult[] = new Array(ops.length).fill(undefined);
      const sent: number[] = [];
      ops.forEach((op, index) => {
        const invalid = checkOp(op);
        if (invalid) results[index] = invalid;
        else sent.push(index);
      });
      if (!sent.length) return results;
      const { c, replies } = await this.link.exchange((conn) =>
        sent.map((index) => opMessage(conn.familyId, ops[index]!, conn.sock.nextSeq(), conn.sock.port)));
      const stale = replies.some((r) => r.errno === Errno.ENOENT) ? await this.link.staleFamily(c) : undefined;
      replies.forEach((r, i) => {
        if (!r.errno) return;
        const op = ops[sent[i]!]!;
        results[sent[i]!] = stale && r.errno === Errno.ENOENT ? new IpvsError(formatOp(op), 0, 'ESTALEFAMILY', stale)
          : IpvsError.fromErrno(formatOp(op), r.errno, explain(op, r.errno));
      });
      return results;
    });
  }

  encode(ops: readonly IpvsOp[]): Buffer {
    const familyId = this.link.familyId ?? 0;
    const messages = ops.filter((op) => !checkOp(op)).map((op, seq) => opMessage(familyId, op, seq, 0));
    const buf = Buffer.alloc(messages.reduce((n, m) => n + m.size, 0));
    let at = 0;
    for (const m of messages) {
      m.write(buf, at);
      at += m.size;
    }
    return buf;
  }

  close(): void {
    this.link.close();
    this.pool.close();
  }
}

/** A message naming the culprit where the kernel's errno alone is ambiguous. */
function explain(op: IpvsOp, errno: number): string | undefined {
  if (errno !== Errno.ENOENT || (op.kind !== 'add-service' && op.kind !== 'update-service')) return undefined;
  const pe = op.vs.peName ? ` or persistence engine ${JSON.stringify(op.vs.peName)} (ip_vs_pe_${op.vs.peName})` : '';
  return `the kernel has no scheduler ${JSON.stringify(op.vs.scheduler)} (module ip_vs_${op.vs.scheduler})${pe} ` +
    `(ENOENT)`;
}

/** Compile-time check that the real client is an IpvsClient. */
const _: (s: NetlinkIpvs) => IpvsClient = (s) => s;
void _;
