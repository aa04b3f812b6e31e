// NetlinkIpvs: the IpvsClient that talks to the kernel. Requests are built by codec.ts, checked
// by validate.ts, and exchanged by socket.ts; this file only sequences them.
import type { IpvsInfo, IpvsOp, IpvsTimeouts, RealServer, VirtualServer } from '../model/ipvs.js';
import {
  type IpvsRequest, decodeDestMessage, decodeFamily, decodeInfo, decodeServiceMessage, decodeTimeouts, encodeGetFamily,
  encodeRequest, flushRequest, getTimeoutsRequest, infoRequest, listDestsRequest, listServicesRequest, opRequest,
  setTimeoutsRequest, zeroRequest,
} from './codec.js';
import { IPVS_GENL_NAME } from './constants.js';
import { Errno, IpvsError } from './errors.js';
import { type Outgoing, type Reply, GenlSocket } from './socket.js';
import type { IpvsClient, OpResult } from './types.js';
import { checkDumpDests, checkOp } from './validate.js';

/** Dumps interrupted by a concurrent change (NLM_F_DUMP_INTR) are retried this many times. */
const DUMP_RETRIES = 3;

/** The kernel's IPVS over generic netlink. All calls are serialised on one socket. */
export class NetlinkIpvs implements IpvsClient {
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly sock: GenlSocket,
    /** The IPVS family id the controller assigned (varies between boots). */
    readonly familyId: number,
  ) {}

  /**
   * Opens a socket and resolves the IPVS family. Rejects with an IpvsError (isNotFound) when the
   * kernel has no IPVS family: the ip_vs module is not loaded (generic netlink does not autoload it).
   */
  static async open(): Promise<NetlinkIpvs> {
    const sock = new GenlSocket();
    try {
      const seq = sock.nextSeq();
      const [reply] = await sock.exchange([{ seq, bytes: encodeGetFamily(IPVS_GENL_NAME, seq, sock.port), dump: false }]);
      if (!reply || reply.errno) {
        throw IpvsError.fromErrno('resolve-family IPVS', reply?.errno ?? 0,
          'no IPVS generic netlink family: is the ip_vs module loaded (modprobe ip_vs)?');
      }
      const first = reply.messages[0];
      if (!first) throw IpvsError.malformed('resolve-family IPVS', 'the controller sent no family');
      return new NetlinkIpvs(sock, decodeFamily(first).id);
    } catch (e) {
      sock.close();
      throw e;
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private outgoing(req: IpvsRequest): Outgoing {
    const seq = this.sock.nextSeq();
    return { seq, bytes: encodeRequest(this.familyId, req, seq, this.sock.port), dump: req.dump };
  }

  /** One request; rejects with its IpvsError when the kernel refuses it. */
  private async one(req: IpvsRequest): Promise<Reply> {
    for (let attempt = 0; ; attempt++) {
      const [reply] = await this.sock.exchange([this.outgoing(req)]);
      if (!reply) throw IpvsError.malformed(req.what, 'no reply');
      if (reply.errno) throw IpvsError.fromErrno(req.what, reply.errno);
      if (!reply.interrupted || attempt >= DUMP_RETRIES) return reply;
    }
  }

  info(): Promise<IpvsInfo> {
    return this.serial(async () => {
      const reply = await this.one(infoRequest());
      if (!reply.messages[0]) throw IpvsError.malformed('get-info', 'empty reply');
      return decodeInfo(reply.messages[0]);
    });
  }

  listVirtualServers(): Promise<VirtualServer[]> {
    return this.serial(async () => (await this.one(listServicesRequest())).messages.map(decodeServiceMessage));
  }

  listRealServers(vs: VirtualServer): Promise<RealServer[]> {
    return this.serial(async () => {
      const invalid = checkDumpDests(vs);
      if (invalid) throw invalid;
      return (await this.one(listDestsRequest(vs))).messages.map((m) => decodeDestMessage(m, vs.family));
    });
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
    return this.serial(async () => {
      const reply = await this.one(getTimeoutsRequest());
      if (!reply.messages[0]) throw IpvsError.malformed('get-config', 'empty reply');
      return decodeTimeouts(reply.messages[0]);
    });
  }

  setTimeouts(t: IpvsTimeouts): Promise<void> {
    return this.serial(async () => {
      for (const v of [t.tcp, t.tcpFin, t.udp]) {
        if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
          throw IpvsError.invalidArgument('set-config', `timeout ${v} is not a u32 number of seconds`);
        }
      }
      await this.one(setTimeoutsRequest(t));
    });
  }

  zero(vs?: VirtualServer): Promise<void> {
    return this.serial(async () => {
      await this.one(zeroRequest(vs));
    });
  }

  flush(): Promise<void> {
    return this.serial(async () => {
      await this.one(flushRequest());
    });
  }

  apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    return this.serial(async () => {
      const results: OpResult[] = new Array(ops.length).fill(undefined);
      const sent: Array<{ index: number; req: IpvsRequest; out: Outgoing }> = [];
      const keys = new Map<VirtualServer, Buffer>();
      ops.forEach((op, index) => {
        const invalid = checkOp(op);
        if (invalid) {
          results[index] = invalid;
          return;
        }
        const req = opRequest(op, keys);
        sent.push({ index, req, out: this.outgoing(req) });
      });
      const replies = await this.sock.exchange(sent.map((s) => s.out));
      replies.forEach((r, i) => {
        const s = sent[i]!;
        if (r.errno) results[s.index] = IpvsError.fromErrno(s.req.what, r.errno, explain(ops[s.index]!, r.errno));
      });
      return results;
    });
  }

  close(): void {
    this.sock.close();
  }
}

/** A message naming the culprit where the kernel's errno alone is ambiguous. */
function explain(op: IpvsOp, errno: number): string | undefined {
  if (errno !== Errno.ENOENT || (op.kind !== 'add-service' && op.kind !== 'update-service')) return undefined;
  const pe = op.vs.peName ? ` or persistence engine ${JSON.stringify(op.vs.peName)} (ip_vs_pe_${op.vs.peName})` : '';
  return `the kernel has no scheduler ${JSON.stringify(op.vs.scheduler)} (module ip_vs_${op.vs.scheduler})${pe} (ENOENT)`;
}

/** Compile-time check that the real client is an IpvsClient. */
const _: (s: NetlinkIpvs) => IpvsClient = (s) => s;
void _;
