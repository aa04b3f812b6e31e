// The IPVS client's connection: one generic netlink socket with the IPVS family resolved on it,
// replaced after a failure (with backoff), and the socket's health for /healthz. The class
// comment of NetlinkIpvs (client.ts) says when a connection is dropped.
import { decodeFamily, encodeGetFamily } from '../netlink/framing.js';
import { IPVS_GENL_NAME } from './constants.js';
import { IpvsError } from './errors.js';
import { DUMP_RECEIVE_BYTES, type Outgoing, type Reply, GenlSocket } from './socket.js';

/** A socket with the IPVS family id resolved on it. */
export interface Connection {
  sock: GenlSocket;
  familyId: number;
}

/** How the client opens a socket: a seam for tests that break one under it. */
export type OpenSocket = () => GenlSocket;

/** A failed socket is replaced on the next call; if that fails too, tries wait 0.25 s doubling to 30 s. */
const REOPEN_FIRST_MS = 250;
const REOPEN_MAX_MS = 30_000;

/** The kernel socket's health, for /healthz: not ok from a socket failure until a request succeeds again. */
export interface SocketHealth {
  ok: boolean;
  /** When `ok` last changed (ms since the epoch). */
  since: number;
  reason?: string;
}

/** The working connection and its health; NetlinkIpvs serialises every call on it. */
export class IpvsLink {
  private conn: Connection | undefined;
  private closed = false;
  private failing: { since: number; reason: string; retryAt: number; waitMs: number } | undefined;
  private okSince = Date.now();

  private constructor(conn: Connection, private readonly openSocket: OpenSocket) {
    this.conn = conn;
  }

  /** Opens a socket and resolves the IPVS family (see NetlinkIpvs.open). */
  static async open(openSocket: OpenSocket = () => new GenlSocket(DUMP_RECEIVE_BYTES)): Promise<IpvsLink> {
    return new IpvsLink(await connect(openSocket), openSocket);
  }

  /** The IPVS family id the controller assigned (varies between boots and module loads). */
  get familyId(): number | undefined {
    return this.conn?.familyId;
  }

  /** Whether the socket works (see SocketHealth). */
  health(): SocketHealth {
    return this.failing
      ? { ok: false, since: this.failing.since, reason: this.failing.reason } : { ok: true, since: this.okSince };
  }

  /** The working connection: the current one, or a new one after a failure (see the class comment). */
  private async connection(): Promise<Connection> {
    if (this.closed) throw IpvsError.malformed('send', 'client closed');
    const broken = this.conn?.sock.failed;
    if (this.conn && !broken) return this.conn;
    if (this.conn && broken) {
      this.conn.sock.close();
      this.conn = undefined;
      this.failing ??= { since: Date.now(), reason: broken.message, retryAt: 0, waitMs: REOPEN_FIRST_MS };
    }
    const f = this.failing!;
    if (Date.now() < f.retryAt) {
      throw IpvsError.malformed('reopen',
        `the IPVS socket failed (${f.reason}); next try in ${f.retryAt - Date.now()} ms`);
    }
    try {
      this.conn = await connect(this.openSocket);
      return this.conn;
    } catch (e) {
      f.reason = (e as Error).message;
      f.retryAt = Date.now() + f.waitMs;
      f.waitMs = Math.min(REOPEN_MAX_MS, f.waitMs * 2);
      throw e;
    }
  }

  /** Exchanges on the working connection; a success after a failure makes the socket healthy again. */
  async exchange(make: (c: Connection) => Outgoing[]): Promise<{ c: Connection; replies: Reply[] }> {
    const c = await this.connection();
    let replies: Reply[];
    try {
      replies = await c.sock.exchange(make(c));
    } catch (e) {
      // The socket is done for: unhealthy from now until a request succeeds on a new one.
      if (c.sock.failed) {
        this.failing ??= { since: Date.now(), reason: c.sock.failed.message, retryAt: 0, waitMs: REOPEN_FIRST_MS };
      }
      throw e;
    }
    if (this.failing) {
      this.failing = undefined;
      this.okSince = Date.now();
    }
    return { c, replies };
  }

  /**
   * Runs `dumps` (the dump pool's batch) with the working connection's family id. A failure is a
   * socket failure: unhealthy until a request succeeds again; a success makes it healthy.
   */
  async dumps<T>(dumps: (familyId: number) => Promise<T>): Promise<{ c: Connection; replies: T }> {
    const c = await this.connection();
    let replies: T;
    try {
      replies = await dumps(c.familyId);
    } catch (e) {
      this.failing ??= { since: Date.now(), reason: (e as Error).message, retryAt: 0, waitMs: REOPEN_FIRST_MS };
      throw e;
    }
    if (this.failing) {
      this.failing = undefined;
      this.okSince = Date.now();
    }
    return { c, replies };
  }

  /**
   * After an ENOENT on `c`: whether the IPVS family is still the one `c` resolved. When it is not
   * (ip_vs unloaded, or loaded again under a new id), `c` is dropped and the client is failing
   * until a new connection resolves the family; resolves with that error's reason.
   */
  async staleFamily(c: Connection): Promise<string | undefined> {
    let now: number | undefined;
    try {
      const seq = c.sock.nextSeq();
      const [reply] = await c.sock.exchange(
        [{ seq, bytes: encodeGetFamily(IPVS_GENL_NAME, seq, c.sock.port), dump: false }]);
      now = reply && !reply.errno && reply.messages[0] ? decodeFamily(reply.messages[0], IpvsError).id : undefined;
    } catch {
      now = undefined;
    }
    if (now === c.familyId) return undefined;
    const reason = now === undefined ? `the IPVS family (id ${c.familyId}) is gone: ip_vs unloaded?`
      : `the IPVS family changed from id ${c.familyId} to ${now}: ip_vs loaded again`;
    if (this.conn === c) {
      c.sock.close();
      this.conn = undefined;
      this.failing ??= { since: Date.now(), reason, retryAt: 0, waitMs: REOPEN_FIRST_MS };
    }
    return reason;
  }

  /** Closes the socket; every later call rejects. */
  close(): void {
    this.closed = true;
    this.conn?.sock.close();
    this.conn = undefined;
  }
}

/** Opens a socket and resolves the IPVS family on it; the socket is closed when that fails. */
async function connect(openSocket: OpenSocket): Promise<Connection> {
  const sock = openSocket();
  try {
    const seq = sock.nextSeq();
    const [reply] = await sock.exchange([{ seq, bytes: encodeGetFamily(IPVS_GENL_NAME, seq, sock.port), dump: false }]);
    if (!reply || reply.errno) {
      throw IpvsError.fromErrno('resolve-family IPVS', reply?.errno ?? 0,
        'no IPVS generic netlink family: is the ip_vs module loaded (modprobe ip_vs)?');
    }
    const first = reply.messages[0];
    if (!first) throw IpvsError.malformed('resolve-family IPVS', 'the controller sent no family');
    return { sock, familyId: decodeFamily(first, IpvsError).id };
  } catch (e) {
    sock.close();
    throw e;
  }
}

