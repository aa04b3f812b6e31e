// FakeIpvs: the kernel's IPVS table in memory, with the kernel's answers (ip_vs_ctl.c) as the
// contract table test/support/ipvs-contract.ts checks on the real kernel; FakeIpvs lists them. pure.
import { type Family, prefixToMask } from '../model/addr.js';
import {
  FORWARD_METHODS, type ForwardMethod, type IpvsInfo, type IpvsOp, type IpvsTable, type IpvsTimeouts, type Protocol,
  type RealServer, SvcFlag, type TunnelType, type VirtualServer, formatOp, formatTable,
  makeRealServer, makeVirtualServer, realServerKey, virtualServerKey,
} from '../model/ipvs.js';
import { Errno } from '../netlink/errors.js';
import { IpvsError } from './errors.js';
import { type MutableIpvsTable, applyOp } from './table.js';
import type { IpvsClient, OpResult } from './types.js';
import { checkDumpDests, checkGetService, checkOp } from './validate.js';
import { type ListingReader, textListing } from './proc.js';
import { formatProcListing } from './proc-format.js';

const { ESRCH, EBADF } = Errno;

/** Schedulers of Debian's 6.1 kernel (no `twos`, which needs 6.2). */
export const KERNEL_61_SCHEDULERS: ReadonlySet<string> = new Set(
  ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh']);

/** Options of a FakeIpvs: which schedulers the "kernel" has. */
export interface FakeIpvsOptions {
  schedulers?: ReadonlySet<string>;
}

/**
 * An in-memory IpvsClient with the kernel's semantics, as the contract table
 * test/support/ipvs-contract.ts checks against NetlinkIpvs on the real kernel:
 *   an op the clients' validation refuses (validate.ts checkOp: bad port, weight, a real server of
 *   another family without tunnel forwarding, ...) -> the same EINVALARG error NetlinkIpvs gives
 *   NEW_SERVICE on an existing key            -> EEXIST
 *   NEW_SERVICE / SET_SERVICE, unknown sched  -> ENOENT  (ip_vs_scheduler_get fails)
 *   SET/DEL_SERVICE, any *_DEST on a missing virtual server -> ESRCH
 *   NEW_DEST on an existing destination       -> EEXIST
 *   SET_DEST / DEL_DEST on a missing one      -> ENOENT
 *   GET_DEST dump of a missing virtual server -> an empty list (the kernel's dump cannot tell)
 *   GET_SERVICE of a missing virtual server   -> ESRCH
 * The table and op semantics are table.ts's applyOp (the operator's cache shares it); no traffic
 * counters are kept (so reads need no ReadOptions). `dump()` prints `add-service` / `add-dest` lines
 * (the ops' one-line forms) sorted by key, to compare with a literal and feed back to `seed()`.
 */
export class FakeIpvs implements IpvsClient {
  private readonly table: MutableIpvsTable = new Map();
  private readonly schedulers: ReadonlySet<string>;
  private timeouts: IpvsTimeouts = { tcp: 900, tcpFin: 120, udp: 300 };
  private closed = false;
  /** Every op applied through `apply` or the single-op methods, in order (successful or not). */
  readonly applied: string[] = [];

  constructor(options: FakeIpvsOptions = {}) {
    this.schedulers = options.schedulers ?? KERNEL_61_SCHEDULERS;
  }

  async info(): Promise<IpvsInfo> {
    this.checkOpen('info');
    return { version: '1.2.1', versionCode: 0x010201, connTableSize: 4096 };
  }

  async listVirtualServers(): Promise<VirtualServer[]> {
    this.checkOpen('dump-services');
    return [...this.table.values()].map((e) => ({ ...e.vs, flags: e.vs.flags | SvcFlag.HASHED }));
  }

  async listRealServers(vs: VirtualServer): Promise<RealServer[]> {
    this.checkOpen('dump-dests');
    const invalid = checkDumpDests(vs);
    if (invalid) throw invalid;
    return [...(this.table.get(virtualServerKey(vs))?.dests.values() ?? [])].map((rs) => ({ ...rs }));
  }

  async listRealServersMany(vss: readonly VirtualServer[]): Promise<Array<RealServer[] | IpvsError>> {
    this.checkOpen('dump-dests');
    return vss.map((vs) => checkDumpDests(vs) ??
      [...(this.table.get(virtualServerKey(vs))?.dests.values() ?? [])].map((rs) => ({ ...rs })));
  }

  /** The table as the kernel lists it in /proc/net/ip_vs (as of now), read as NetlinkIpvs reads the kernel's. */
  async listing(): Promise<ListingReader | undefined> {
    return textListing(this.listingText());
  }

  /** The table as the kernel lists it in /proc/net/ip_vs. */
  listingText(): string {
    this.checkOpen('listing');
    return formatProcListing(this.table);
  }

  async getVirtualServers(vss: readonly VirtualServer[]): Promise<Array<VirtualServer | IpvsError>> {
    this.checkOpen('get-service');
    return vss.map((vs) => {
      const invalid = checkGetService(vs);
      if (invalid) return invalid;
      const key = virtualServerKey(vs);
      const e = this.table.get(key);
      return e ? { ...e.vs, flags: e.vs.flags | SvcFlag.HASHED } : IpvsError.fromErrno(`get-service ${key}`, ESRCH);
    });
  }

  async addVirtualServer(vs: VirtualServer): Promise<void> { this.must({ kind: 'add-service', vs }); }
  async updateVirtualServer(vs: VirtualServer): Promise<void> { this.must({ kind: 'update-service', vs }); }
  async deleteVirtualServer(vs: VirtualServer): Promise<void> { this.must({ kind: 'delete-service', vs }); }
  async addRealServer(vs: VirtualServer, rs: RealServer): Promise<void> { this.must({ kind: 'add-dest', vs, rs }); }
  async updateRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    this.must({ kind: 'update-dest', vs, rs });
  }
  async deleteRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    this.must({ kind: 'delete-dest', vs, rs });
  }

  async getTimeouts(): Promise<IpvsTimeouts> {
    this.checkOpen('get-config');
    return { ...this.timeouts };
  }

  async setTimeouts(t: IpvsTimeouts): Promise<void> {
    this.checkOpen('set-config');
    this.timeouts = {
      tcp: t.tcp || this.timeouts.tcp,
      tcpFin: t.tcpFin || this.timeouts.tcpFin,
      udp: t.udp || this.timeouts.udp,
    };
  }

  async zero(vs?: VirtualServer): Promise<void> {
    this.checkOpen('zero');
    if (vs && !this.table.has(virtualServerKey(vs))) throw IpvsError.fromErrno(`zero ${virtualServerKey(vs)}`, ESRCH);
  }

  async flush(): Promise<void> {
    this.checkOpen('flush');
    this.table.clear();
  }

  async apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    this.checkOpen('apply');
    return ops.map((op) => this.applyOne(op));
  }

  close(): void {
    this.closed = true;
  }

  /** The live table (read-only view, no copy): what `listVirtualServers` + `listRealServers` return. */
  view(): IpvsTable {
    return this.table;
  }

  /** Applies one op synchronously; undefined on success, else the error NetlinkIpvs would give. */
  applyOne(op: IpvsOp): OpResult {
    const text = formatOp(op);
    this.applied.push(text);
    const invalid = checkOp(op);
    if (invalid) return invalid;
    const errno = applyOp(this.table, this.stored(op), this.schedulers);
    return errno === undefined ? undefined : IpvsError.fromErrno(text, errno);
  }

  /** The op with what the kernel keeps: no HASHED or stats; a real server's counters are the kernel's. */
  private stored(op: IpvsOp): IpvsOp {
    if (op.kind === 'add-service' || op.kind === 'update-service') return { ...op, vs: stripService(op.vs) };
    if (op.kind !== 'add-dest' && op.kind !== 'update-dest') return op;
    // SET_DEST keeps the connection counters: they belong to the kernel, not the request.
    const old = op.kind === 'update-dest'
      ? this.table.get(virtualServerKey(op.vs))?.dests.get(realServerKey(op.rs)) : undefined;
    return { ...op,
      rs: { ...stripDest(op.rs), activeConns: old?.activeConns ?? 0, inactiveConns: old?.inactiveConns ?? 0,
        persistentConns: old?.persistentConns ?? 0 } };
  }

  /** Sets a destination's connection counters, as traffic would; false when it does not exist. */
  setConnections(
    vs: VirtualServer, rs: Pick<RealServer, 'address' | 'port'>, active: number, inactive: number,
  ): boolean {
    const d = this.table.get(virtualServerKey(vs))?.dests.get(realServerKey(makeRealServer(rs)));
    if (!d) return false;
    d.activeConns = active;
    d.inactiveConns = inactive;
    return true;
  }

  /** The table as sorted `add-service` / `add-dest` lines (formatTable); dests show `conns=A/I` when non-zero. */
  dump(): string {
    return formatTable(this.table, (rs) => ((rs.activeConns ?? 0) || (rs.inactiveConns ?? 0)
      ? ` conns=${rs.activeConns ?? 0}/${rs.inactiveConns ?? 0}` : ''));
  }

  /** Loads lines in `dump()`'s form (blank lines and `#` comments ignored); throws on a bad line. */
  seed(text: string): this {
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      const parsed = parseDumpLine(line);
      const err = this.applyOne(parsed.op);
      this.applied.pop();
      if (err) throw err;
      if (parsed.conns && parsed.op.kind === 'add-dest') {
        this.setConnections(parsed.op.vs, parsed.op.rs, parsed.conns[0], parsed.conns[1]);
      }
    }
    return this;
  }

  private must(op: IpvsOp): void {
    this.checkOpen(formatOp(op));
    const err = this.applyOne(op);
    if (err) throw err;
  }

  private checkOpen(op: string): void {
    if (this.closed) throw IpvsError.fromErrno(op, EBADF, 'client closed');
  }
}

/** Compile-time check that the fake keeps up with the interface. */
const _: IpvsClient = new FakeIpvs();

function stripService(vs: VirtualServer): VirtualServer {
  const { stats: _stats, ...rest } = vs;
  return { ...rest, flags: rest.flags & ~SvcFlag.HASHED };
}

function stripDest(rs: RealServer): RealServer {
  const { stats: _s, activeConns: _a, inactiveConns: _i, persistentConns: _p, ...rest } = rs;
  return rest;
}

/** Parses `add-service <vs>` or `add-dest <vs key> -> <rs> [conns=A/I]`. */
export function parseDumpLine(line: string): { op: IpvsOp; conns?: [number, number] } {
  const m = /^(add-service|add-dest)\s+(.*)$/.exec(line);
  if (!m) throw IpvsError.invalidArgument('seed', `not an add-service/add-dest line: ${line}`);
  if (m[1] === 'add-service') return { op: { kind: 'add-service', vs: parseVirtualServer(m[2]!) } };
  const [left, right] = m[2]!.split(/\s+->\s+/);
  if (!left || !right) throw IpvsError.invalidArgument('seed', `missing "->": ${line}`);
  const vs = parseVirtualServer(`${left} rr`);
  const { rs, conns } = parseRealServer(right, line);
  return conns ? { op: { kind: 'add-dest', vs, rs }, conns } : { op: { kind: 'add-dest', vs, rs } };
}

/** Splits `addr:port` / `[v6]:port`. */
function parseHostPort(s: string, line: string): { address: string; port: number } {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d+)$/.exec(s) ?? /^([0-9.]+):(\d+)$/.exec(s);
  if (!m) throw IpvsError.invalidArgument('seed', `bad address:port "${s}" in: ${line}`);
  return { address: m[1]!, port: Number(m[2]) };
}

/** Parses formatVirtualServer's output back into a VirtualServer. */
export function parseVirtualServer(text: string): VirtualServer {
  const words = text.trim().split(/\s+/);
  let vs: VirtualServer;
  let rest: string[];
  if (words[0] === 'FWM') {
    const family = words[2] as Family;
    if (family !== 'IPv4' && family !== 'IPv6') throw IpvsError.invalidArgument('seed', `bad family in: ${text}`);
    vs = makeVirtualServer({ family, fwmark: Number(words[1]), scheduler: words[3] ?? 'rr' });
    rest = words.slice(4);
  } else {
    const protocol = words[0] as Protocol;
    if (!['TCP', 'UDP', 'SCTP'].includes(protocol)) throw IpvsError.invalidArgument('seed', `bad protocol in: ${text}`);
    const { address, port } = parseHostPort(words[1] ?? '', text);
    const family: Family = address.includes(':') ? 'IPv6' : 'IPv4';
    vs = makeVirtualServer({ family, protocol, address, port, scheduler: words[2] ?? 'rr' });
    rest = words.slice(3);
  }
  for (const w of rest) {
    let m: RegExpExecArray | null;
    if ((m = /^persistent=(\d+)\/(\d+)$/.exec(w))) {
      const bits = Number(m[2]);
      vs.flags |= SvcFlag.PERSISTENT;
      vs.timeout = Number(m[1]);
      vs.netmask = vs.family === 'IPv6' ? bits : prefixToMask(bits);
    } else if (w === 'ops') vs.flags |= SvcFlag.ONEPACKET;
    else if (w === 'flag-1') vs.flags |= SvcFlag.SCHED1;
    else if (w === 'flag-2') vs.flags |= SvcFlag.SCHED2;
    else if (w === 'flag-3') vs.flags |= SvcFlag.SCHED3;
    else if ((m = /^pe=(\S+)$/.exec(w))) vs.peName = m[1]!;
    else throw IpvsError.invalidArgument('seed', `unknown word "${w}" in: ${text}`);
  }
  return vs;
}

function parseRealServer(text: string, line: string): { rs: RealServer; conns?: [number, number] } {
  const words = text.trim().split(/\s+/);
  const rs = makeRealServer(parseHostPort(words[0] ?? '', line));
  let conns: [number, number] | undefined;
  for (const w of words.slice(1)) {
    let m: RegExpExecArray | null;
    if ((m = /^w=(\d+)$/.exec(w))) rs.weight = Number(m[1]);
    else if ((FORWARD_METHODS as readonly string[]).includes(w)) rs.forward = w as ForwardMethod;
    else if ((m = /^x=(\d+)$/.exec(w))) rs.upperThreshold = Number(m[1]);
    else if ((m = /^y=(\d+)$/.exec(w))) rs.lowerThreshold = Number(m[1]);
    else if ((m = /^tun=(ipip|gue|gre)$/.exec(w))) rs.tunnelType = m[1] as TunnelType;
    else if ((m = /^tun-port=(\d+)$/.exec(w))) rs.tunnelPort = Number(m[1]);
    else if ((m = /^tun-flags=0x([0-9a-f]+)$/.exec(w))) rs.tunnelFlags = parseInt(m[1]!, 16);
    else if ((m = /^conns=(\d+)\/(\d+)$/.exec(w))) conns = [Number(m[1]), Number(m[2])];
    else throw IpvsError.invalidArgument('seed', `unknown word "${w}" in: ${line}`);
  }
  return conns ? { rs, conns } : { rs };
}
