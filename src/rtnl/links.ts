// rtnetlink helpers for the VIP interface: a dummy link that holds every virtual server address
// (IPVS only intercepts traffic to addresses that are local), its /32 and /128 addresses, and its
// up state — through the `netlink` package's RtNetlinkSocket, no `ip` subprocess.
// Errors are the package's message-only ones converted once, here, into RtnlError, so isExists /
// isNotFound work on them as on IPVS errors.
import { createRtNetlink, type RtNetlinkSocket } from 'netlink';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from '../model/addr.js';
import { nla, parseAttrs } from '../netlink/framing.js';
import { Errno } from '../netlink/errors.js';
import { RtnlError } from './errors.js';

const AF_INET = 2;
const AF_INET6 = 10;
const IFLA_INFO_KIND = 1;
const NLM_F_EXCL = 0x200;
const NLM_F_CREATE = 0x400;
const RT_SCOPE_UNIVERSE = 0;

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

function addrBytes(op: string, address: string): { family: number; bytes: Buffer; prefix: number } {
  const v4 = parseIPv4(address);
  if (v4) return { family: AF_INET, bytes: Buffer.from(v4), prefix: 32 };
  const v6 = parseIPv6(address);
  if (v6) return { family: AF_INET6, bytes: Buffer.from(v6), prefix: 128 };
  throw RtnlError.invalidArgument(op, `${JSON.stringify(address)} is not an IP address`);
}

/** A route-netlink socket with the few link and address operations the operator needs. */
export class Rtnl {
  private constructor(private readonly sock: RtNetlinkSocket) {}

  /** Opens a route-netlink socket in the caller's network namespace. */
  static open(): Rtnl {
    return new Rtnl(createRtNetlink());
  }

  private async call<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw RtnlError.fromPackageError(op, e);
    }
  }

  /** The interface index of `name`, or undefined when there is no such link. */
  async linkIndex(name: string): Promise<number | undefined> {
    try {
      const [link] = await this.sock.getLink({}, { ifname: name });
      return link?.data.index;
    } catch (e) {
      const err = RtnlError.fromPackageError(`get-link ${name}`, e);
      if (err.code === 'ENODEV') return undefined;
      throw err;
    }
  }

  /**
   * The kind of link `name` ('dummy', 'veth', 'bridge', ...; '' for a device without one, such as
   * lo or a physical NIC), or undefined when there is no such link.
   */
  async linkKind(name: string): Promise<string | undefined> {
    try {
      const [link] = await this.sock.getLink({}, { ifname: name });
      return link ? kindOf(link.attrs.linkinfo) : undefined;
    } catch (e) {
      const err = RtnlError.fromPackageError(`get-link ${name}`, e);
      if (err.code === 'ENODEV') return undefined;
      throw err;
    }
  }

  /** Creates a dummy link `name` when missing (an existing link of that name is kept); returns its index. */
  async ensureDummy(name: string): Promise<number> {
    const existing = await this.linkIndex(name);
    if (existing !== undefined) return existing;
    await this.call(`create-dummy ${name}`, () => this.sock.newLink({}, { ifname: name, linkinfo: linkInfo('dummy') },
      { flags: NLM_F_CREATE | NLM_F_EXCL }));
    const index = await this.linkIndex(name);
    if (index === undefined) throw RtnlError.fromErrno(`create-dummy ${name}`, Errno.ENODEV);
    return index;
  }

  /** Sets the link up. ENODEV (isNotFound is false: code ENODEV) when it does not exist. */
  async setUp(name: string): Promise<void> {
    const index = await this.requireIndex(`set-up ${name}`, name);
    await this.call(`set-up ${name}`, () => this.sock.setLink({ index, flags: { up: true }, change: { up: true } }, {}));
  }

  /** Whether the link is administratively up. */
  async isUp(name: string): Promise<boolean> {
    const [link] = await this.call(`get-link ${name}`, () => this.sock.getLink({}, { ifname: name }));
    return !!link?.data.flags?.up;
  }

  /** Deletes the link; resolves false when it did not exist. */
  async deleteLink(name: string): Promise<boolean> {
    const index = await this.linkIndex(name);
    if (index === undefined) return false;
    await this.call(`delete-link ${name}`, () => this.sock.delLink({ index }, {}));
    return true;
  }

  private async requireIndex(op: string, name: string): Promise<number> {
    const index = await this.linkIndex(name);
    if (index === undefined) throw RtnlError.fromErrno(op, Errno.ENODEV);
    return index;
  }

  /** The link's addresses (both families), in kernel order. */
  async listAddresses(name: string): Promise<LinkAddress[]> {
    const index = await this.requireIndex(`list-addresses ${name}`, name);
    const all = await this.call(`list-addresses ${name}`, () => this.sock.getAddresses());
    const out: LinkAddress[] = [];
    for (const m of all) {
      if (m.data.index !== index) continue;
      const raw = m.attrs.local ?? m.attrs.address;
      if (!raw) continue;
      const address = m.data.family === AF_INET6 ? formatIPv6(raw) : formatIPv4(raw);
      out.push({ address, prefixLength: m.data.prefixlen ?? 0 });
    }
    return out;
  }

  /** Adds `address` as a /32 or /128 (IPv6 without duplicate address detection); EEXIST when present. */
  async addAddress(name: string, address: string): Promise<void> {
    const op = `add-address ${name} ${address}`;
    const { family, bytes, prefix } = addrBytes(op, address);
    const index = await this.requireIndex(op, name);
    await this.call(op, () => this.sock.newAddress(
      { family, prefixlen: prefix, index, scope: RT_SCOPE_UNIVERSE, // as kube-proxy's kube-ipvs0 addresses
        flags: family === AF_INET6 ? { nodad: true } : {} },
      { local: bytes, address: bytes },
      { flags: NLM_F_CREATE | NLM_F_EXCL },
    ));
  }

  /** Removes `address`; EADDRNOTAVAIL when it is not on the link. */
  async deleteAddress(name: string, address: string): Promise<void> {
    const op = `delete-address ${name} ${address}`;
    const { family, bytes, prefix } = addrBytes(op, address);
    const index = await this.requireIndex(op, name);
    await this.call(op, () => this.sock.delAddress({ family, prefixlen: prefix, index }, { local: bytes, address: bytes }));
  }

  /** Closes the socket. */
  close(): void {
    this.sock.socket.close();
  }
}
