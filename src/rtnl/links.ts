// rtnetlink helpers for the VIP interface: a dummy link that holds every virtual server address
// (IPVS only intercepts traffic to addresses that are local), its /32 and /128 addresses, and its
// up state — links through the `netlink` package's RtNetlinkSocket, the address dump and address
// adds and deletes through src/rtnl/socket.ts (encoded and decoded in messages.ts); no `ip` subprocess.
// Errors are the package's message-only ones converted once, here, into RtnlError, so isExists /
// isNotFound work on them as on IPVS errors.
import { createRtNetlink, type RtNetlinkSocket } from 'netlink';
import { nla, parseAttrs } from '../netlink/framing.js';
import { Errno } from '../netlink/errors.js';
import { NLM_F_CREATE, NLM_F_EXCL } from '../netlink/constants.js';
import { RtnlError } from './errors.js';
import {
  type HostAddress, decodeAddrMessage, encodeAddrDump, encodeAddrRequest, parseHostAddress,
} from './messages.js';
import { RouteSocket } from './socket.js';
import { AddressBatches } from './address-batches.js';
import { THREAD_MIN_ADDRESSES, numberMessages } from './address-batch.js';
import { Serial } from '../util/serial.js';

const IFLA_INFO_KIND = 1;
/** An address dump interrupted by a change (NLM_F_DUMP_INTR) is made again this many times. */
const DUMP_RETRIES = 3;

/** An address on a link, with its prefix length. */
export interface LinkAddress {
  address: string;
  prefixLength: number;
}

/** IFLA_LINKINFO's payload naming a link kind. */
function linkInfo(kind: string): Buffer {
  return nla(IFLA_INFO_KIND, Buffer.from(kind, 'utf8'));
}

/** The IFLA_INFO_KIND inside an IFLA_LINKINFO payload ('' when absent). */
function kindOf(linkinfo: Buffer | undefined): string {
  const raw = linkinfo ? parseAttrs(linkinfo, RtnlError).get(IFLA_INFO_KIND) : undefined;
  return raw ? raw.toString('utf8').replace(/\0+$/, '') : '';
}

/** A link as the package returns it. */
type LinkMessage = Awaited<ReturnType<RtNetlinkSocket['getLink']>>[number];

/** How long one request on the package socket may wait for its reply. */
const REPLY_TIMEOUT_MS = 30_000;

/** The package socket; `failed` rejects when it reports a socket error, `broken` marks it for replacement. */
class PackageSocket {
  readonly sock = createRtNetlink();
  broken = false;
  // An 'error' event without a listener would throw. (A receive error never gets here: the
  // package's native code aborts the process first, which is why requests go one at a time.)
  readonly failed = new Promise<never>((_, reject) => {
    this.sock.socket.on('error', (e) => { this.broken = true; reject(RtnlError.fromPackageError('socket', e)); });
  });

  constructor() {
    this.failed.catch(() => undefined);
  }
}

/**
 * A route-netlink socket with the few link and address operations the operator needs. Requests
 * on the package socket go one at a time: the package's native code aborts the process on any
 * receive error, and replies to many requests at once overflow the receive buffer (ENOBUFS; 100
 * concurrent get-link requests did on the host), while one request's dump is paced by the kernel.
 * A socket that failed (a socket error, or no reply in 30 s) fails its request and is replaced by a
 * fresh one at the next request, as the IPVS client reconnects.
 */
export class Rtnl {
  /** The pipelined socket for the address dump, opened on first use. */
  private dumps: RouteSocket | undefined;
  /** The pipelined socket for small batches of address adds and deletes, opened on first use. */
  private requests: RouteSocket | undefined;
  /** What sends large ones (THREAD_MIN_ADDRESSES) from the helper thread, made by the first. */
  private batches: AddressBatches | undefined;
  private pkg = new PackageSocket();
  private readonly queue = new Serial();

  private constructor(private readonly threadScript: URL | undefined) {}

  /**
   * Opens a route-netlink socket in the caller's network namespace. `threadScript`: the address
   * thread's module (tests start one that fails).
   */
  static open(threadScript?: URL): Rtnl {
    return new Rtnl(threadScript);
  }

  /** Runs one request of the package socket (reopened first if it failed), as RtnlError on failure. */
  private call<T>(op: string, fn: (sock: RtNetlinkSocket, options: { timeout: number }) => Promise<T>): Promise<T> {
    return this.queue.run(() => this.callNow(op, fn));
  }

  private async callNow<T>(
    op: string, fn: (sock: RtNetlinkSocket, options: { timeout: number }) => Promise<T>,
  ): Promise<T> {
    if (this.pkg.broken) {
      this.pkg.sock.socket.close();
      this.pkg = new PackageSocket();
    }
    const pkg = this.pkg;
    try {
      return await Promise.race([fn(pkg.sock, { timeout: REPLY_TIMEOUT_MS }), pkg.failed]);
    } catch (e) {
      const err = RtnlError.fromPackageError(op, e);
      // No errno: the socket itself failed (or timed out), not the request; replace it.
      if (err.errno === 0) pkg.broken = true;
      throw err;
    }
  }

  /** The link `name`, or undefined when there is no such link. */
  private async getLink(name: string): Promise<LinkMessage | undefined> {
    try {
      const [link] = await this.call(`get-link ${name}`, (sock, o) => sock.getLink({}, { ifname: name }, o));
      return link;
    } catch (e) {
      if ((e as RtnlError).code === 'ENODEV') return undefined;
      throw e;
    }
  }

  /** The interface index of `name`, or undefined when there is no such link. */
  async linkIndex(name: string): Promise<number | undefined> {
    return (await this.getLink(name))?.data.index;
  }

  /**
   * The kind of link `name` ('dummy', 'veth', 'bridge', ...; '' for a device without one, such as
   * lo or a physical NIC), or undefined when there is no such link.
   */
  async linkKind(name: string): Promise<string | undefined> {
    const link = await this.getLink(name);
    return link ? kindOf(link.attrs.linkinfo) : undefined;
  }

  /** Creates a dummy link `name` when missing (an existing link of that name is kept); returns its index. */
  async ensureDummy(name: string): Promise<number> {
    const existing = await this.linkIndex(name);
    if (existing !== undefined) return existing;
    await this.call(`create-dummy ${name}`, (sock, o) => sock.newLink({}, { ifname: name, linkinfo: linkInfo('dummy') },
      { ...o, flags: NLM_F_CREATE | NLM_F_EXCL }));
    const index = await this.linkIndex(name);
    if (index === undefined) throw RtnlError.fromErrno(`create-dummy ${name}`, Errno.ENODEV);
    return index;
  }

  /** Sets the link up. ENODEV (isNotFound is false: code ENODEV) when it does not exist. */
  async setUp(name: string): Promise<void> {
    const index = await this.requireIndex(`set-up ${name}`, name);
    await this.call(`set-up ${name}`, (sock, o) =>
      sock.setLink({ index, flags: { up: true }, change: { up: true } }, {}, o));
  }

  /** Whether the link is administratively up. */
  async isUp(name: string): Promise<boolean> {
    const [link] = await this.call(`get-link ${name}`, (sock, o) => sock.getLink({}, { ifname: name }, o));
    return !!link?.data.flags?.up;
  }

  /** Deletes the link; resolves false when it did not exist. */
  async deleteLink(name: string): Promise<boolean> {
    const index = await this.linkIndex(name);
    if (index === undefined) return false;
    await this.call(`delete-link ${name}`, (sock, o) => sock.delLink({ index }, {}, o));
    return true;
  }

  private async requireIndex(op: string, name: string): Promise<number> {
    const index = await this.linkIndex(name);
    if (index === undefined) throw RtnlError.fromErrno(op, Errno.ENODEV);
    return index;
  }

  /**
   * The link's addresses (both families), in kernel order: one dump of every link's addresses,
   * read in 32 KB datagrams and decoded here (the package's getAddresses read 3.5 KB datagrams and
   * made an object per attribute: 38 s for 30 000 VIPs in the loaded lab VM). A dump interrupted by
   * a change elsewhere is made again, up to DUMP_RETRIES times; then its last answer is used.
   */
  async listAddresses(name: string): Promise<LinkAddress[]> {
    const op = `list-addresses ${name}`;
    const index = await this.requireIndex(op, name);
    const sock = this.routeSocket();
    let reply = await this.queue.run(() => sock.dump(...dumpRequest(sock)));
    for (let attempt = 1; reply.interrupted && !reply.errno && attempt <= DUMP_RETRIES; attempt++) {
      reply = await this.queue.run(() => sock.dump(...dumpRequest(sock)));
    }
    if (reply.errno) throw RtnlError.fromErrno(op, reply.errno);
    const out: LinkAddress[] = [];
    for (const m of reply.messages) {
      const a = decodeAddrMessage(m);
      if (a && a.index === index) out.push({ address: a.address, prefixLength: a.prefixLength });
    }
    return out;
  }

  /** Adds `address` as a /32 or /128 (IPv6 without duplicate address detection); EEXIST when present. */
  async addAddress(name: string, address: string): Promise<void> {
    const [err] = await this.addAddresses(name, [address]);
    if (err) throw err;
  }

  /** Removes `address`; EADDRNOTAVAIL when it is not on the link. */
  async deleteAddress(name: string, address: string): Promise<void> {
    const [err] = await this.deleteAddresses(name, [address]);
    if (err) throw err;
  }

  /**
   * Adds each address as addAddress does, pipelined (many requests per datagram): one result per
   * address, in order (undefined = added; EEXIST when present, EINVALARG for a non-IP, which is
   * never sent). Rejects with ENODEV when the link is missing (nothing sent), or on a socket failure.
   */
  addAddresses(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    return this.addressBatch('add', name, addresses);
  }

  /** Removes each address as deleteAddress does, pipelined; one result per address (EADDRNOTAVAIL when absent). */
  deleteAddresses(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    return this.addressBatch('del', name, addresses);
  }

  private async addressBatch(
    kind: 'add' | 'del', name: string, addresses: readonly string[],
  ): Promise<Array<RtnlError | undefined>> {
    const verb = kind === 'add' ? 'add-address' : 'delete-address';
    const ops = addresses.map((a) => `${verb} ${name} ${a}`);
    const results: Array<RtnlError | undefined> = new Array(addresses.length).fill(undefined);
    const parsed: Array<{ i: number; a: HostAddress }> = [];
    addresses.forEach((address, i) => {
      try {
        parsed.push({ i, a: parseHostAddress(ops[i]!, address) });
      } catch (e) {
        results[i] = e as RtnlError;
      }
    });
    if (!parsed.length) return results;
    const index = await this.requireIndex(`${verb} ${name}`, name);
    // Numbered by the socket that sends them (seq and port 0 here).
    const out = parsed.map(({ a }) => encodeAddrRequest(kind, index, a, 0, 0));
    // On the same queue: one batch at a time on this Rtnl, whoever calls (the receive buffer's bound).
    const errnos = await this.queue.run(() => this.send(out));
    parsed.forEach(({ i }, k) => {
      if (errnos[k]) results[i] = RtnlError.fromErrno(ops[i]!, errnos[k]!);
    });
    return results;
  }

  /**
   * Sends address requests (complete but for seq and port), from the thread when there are many
   * (THREAD_MIN_ADDRESSES); resolves with each one's errno. A failed socket is replaced. After a
   * thread that failed (its batch rejected), the next large batch is sent from the event loop and
   * the one after from a new thread: a thread that cannot run slows the binds, never stops them.
   */
  private send(out: Buffer[]): Promise<number[]> {
    if (out.length >= THREAD_MIN_ADDRESSES) {
      if (!this.batches?.failed) return (this.batches ??= new AddressBatches(this.threadScript)).exchange(out);
      this.batches.close();
      this.batches = undefined;
    }
    const sock = (this.requests = usable(this.requests, false));
    return sock.exchange(numberMessages(out, () => sock.nextSeq(), sock.port));
  }

  /**
   * Gets the helper thread's address job ready (imported, its thread started) when a batch of
   * `count` addresses would go through it, so that the batch does not wait for that.
   */
  prepareBatches(count: number): void {
    if (count >= THREAD_MIN_ADDRESSES) (this.batches ??= new AddressBatches(this.threadScript)).prepare();
  }

  /** The dump socket, opened on first use and again after it failed. */
  private routeSocket(): RouteSocket {
    return (this.dumps = usable(this.dumps, true));
  }

  /** Closes the sockets; a batch on the helper thread is rejected and its socket closed. */
  close(): void {
    this.pkg.sock.socket.close();
    this.dumps?.close();
    this.requests?.close();
    this.batches?.close();
  }
}

/** `sock` while it has not failed; else it is closed and a new one opened (`dumps`: see RouteSocket). */
function usable(sock: RouteSocket | undefined, dumps: boolean): RouteSocket {
  if (sock && !sock.failed) return sock;
  sock?.close();
  return new RouteSocket(dumps);
}

/** A numbered address dump request on `sock`: [seq, bytes]. */
function dumpRequest(sock: RouteSocket): [number, Buffer] {
  const seq = sock.nextSeq();
  return [seq, encodeAddrDump(seq, sock.port)];
}
