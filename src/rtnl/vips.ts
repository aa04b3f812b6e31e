// The operator's VIP interface over rtnetlink, and an in-memory fake with the same behaviour.
import { Errno, type NetlinkError } from '../netlink/errors.js';
import { RtnlError } from './errors.js';
import { Rtnl } from './links.js';
import { parseHostAddress } from './messages.js';
import { formatIPv4, formatIPv6 } from '../model/addr.js';

/** One address's outcome in a batch: undefined when done, else why not. */
export type VipResult = NetlinkError | undefined;

/** The dummy interface holding the VIPs (rtnetlink in production, a fake in unit tests). */
export interface VipLink {
  /** Creates the dummy link if missing and sets it up. */
  ensure(name: string): Promise<void>;
  /** Addresses on the link ([] when it does not exist). */
  list(name: string): Promise<string[]>;
  /** Adds a /32 or /128; EEXIST when present, ENODEV when the link is missing. */
  add(name: string, address: string): Promise<void>;
  /** Removes an address; EADDRNOTAVAIL when absent. */
  remove(name: string, address: string): Promise<void>;
  /**
   * add() for each address, all sent at once: one result per address, in order (undefined = added,
   * else its RtnlError, e.g. EEXIST); the others are added regardless. Rejects (nothing added) when
   * the link is missing (ENODEV), or when the socket itself fails.
   */
  addMany(name: string, addresses: readonly string[]): Promise<VipResult[]>;
  /** remove() for each address, all sent at once: one result per address (EADDRNOTAVAIL when absent). */
  removeMany(name: string, addresses: readonly string[]): Promise<VipResult[]>;
  /**
   * A batch of about `count` addresses may follow (a full sync's desired VIPs): start now what
   * sending it takes, so that it does not wait for it then. Changes nothing on the link; not
   * optional, so that a wrapper cannot drop it unnoticed.
   */
  prepare(count: number): void;
}

/**
 * VipLink on the real kernel. It only ever touches a dummy link: an existing link of another kind
 * under the name (eth0, lo, a veth, a bridge) is refused with RtnlError.foreignLink by ensure, list
 * and deleteLink, before anything is changed (add and remove follow a list or ensure in the same
 * sync).
 */
export class RtnlVipLink implements VipLink {
  constructor(private readonly rtnl: Rtnl = Rtnl.open()) {}
  async ensure(name: string): Promise<void> {
    await this.refuseForeign(`ensure-link ${name}`, name);
    await this.rtnl.ensureDummy(name);
    if (!(await this.rtnl.isUp(name))) await this.rtnl.setUp(name);
  }
  async list(name: string): Promise<string[]> {
    if ((await this.refuseForeign(`list-addresses ${name}`, name)) === undefined) return [];
    return (await this.rtnl.listAddresses(name)).map((a) => a.address).filter((a) => !a.startsWith('fe80:'));
  }
  add(name: string, address: string): Promise<void> {
    return this.rtnl.addAddress(name, address);
  }
  remove(name: string, address: string): Promise<void> {
    return this.rtnl.deleteAddress(name, address);
  }
  addMany(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    return this.rtnl.addAddresses(name, addresses);
  }
  removeMany(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    return this.rtnl.deleteAddresses(name, addresses);
  }
  prepare(count: number): void {
    this.rtnl.prepareBatches(count);
  }
  /** Deletes the link (cleanup); false when it did not exist. Refuses a link that is not a dummy. */
  async deleteLink(name: string): Promise<boolean> {
    if ((await this.refuseForeign(`delete-link ${name}`, name)) === undefined) return false;
    return this.rtnl.deleteLink(name);
  }
  close(): void {
    this.rtnl.close();
  }
  /** The link's kind, undefined when missing; throws RtnlError.foreignLink unless it is a dummy. */
  private async refuseForeign(op: string, name: string): Promise<string | undefined> {
    const kind = await this.rtnl.linkKind(name);
    if (kind !== undefined && kind !== 'dummy') throw RtnlError.foreignLink(op, name, kind);
    return kind;
  }
}

/**
 * VipLink in memory, with the real one's answers (the contract in test/support/vip-contract.ts runs
 * the same table against the kernel). `foreign` names links of another kind (name -> kind): they
 * exist and hold addresses; ensure and list refuse them, add and remove do not look (as the real link).
 */
export class FakeVipLink implements VipLink {
  /** Addresses per existing link (as the kernel lists them), links of another kind included. */
  readonly links = new Map<string, Set<string>>();
  constructor(private readonly foreign: ReadonlyMap<string, string> = new Map()) {
    for (const name of foreign.keys()) this.links.set(name, new Set());
  }
  async ensure(name: string): Promise<void> {
    this.refuseForeign(`ensure-link ${name}`, name);
    if (!this.links.has(name)) this.links.set(name, new Set());
  }
  /** The fake sends nothing: nothing to get ready. */
  prepare(_count: number): void {}
  async list(name: string): Promise<string[]> {
    this.refuseForeign(`list-addresses ${name}`, name);
    // The real list leaves out link-local addresses (the kernel's own fe80::/64 on an up link).
    return [...(this.links.get(name) ?? [])].filter((a) => !a.startsWith('fe80:'));
  }
  async add(name: string, address: string): Promise<void> {
    const [err] = await this.addMany(name, [address]);
    if (err) throw err;
  }
  async remove(name: string, address: string): Promise<void> {
    const [err] = await this.removeMany(name, [address]);
    if (err) throw err;
  }
  async addMany(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    const op = (a: string) => `add-address ${name} ${a}`;
    const checked = addresses.map((a) => invalid(op(a), a));
    if (checked.every((e) => e)) return checked;
    const l = this.lookup(name);
    if (!l) throw RtnlError.fromErrno(`add-address ${name}`, Errno.ENODEV);
    return addresses.map((a, i) => {
      if (checked[i]) return checked[i];
      const key = canonical(a);
      if (refusedIPv6(key, name)) return RtnlError.fromErrno(op(a), Errno.EADDRNOTAVAIL);
      // __inet_insert_ifa: an IPv4 address 0.0.0.0 is answered with success and not added.
      if (key === '0.0.0.0') return undefined;
      if (l.has(key)) return RtnlError.fromErrno(op(a), Errno.EEXIST);
      l.add(key);
      return undefined;
    });
  }
  async removeMany(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    const op = (a: string) => `delete-address ${name} ${a}`;
    const checked = addresses.map((a) => invalid(op(a), a));
    if (checked.every((e) => e)) return checked;
    const l = this.lookup(name);
    // The real link looks the index up first: a missing link is ENODEV, nothing sent.
    if (!l) throw RtnlError.fromErrno(`delete-address ${name}`, Errno.ENODEV);
    return addresses.map((a, i) =>
      checked[i] ?? (l.delete(canonical(a)) ? undefined : RtnlError.fromErrno(op(a), Errno.EADDRNOTAVAIL)));
  }
  /**
   * The link's addresses, undefined when missing; a name longer than IFNAMSIZ - 1 is refused as the
   * kernel's lookup does (ERANGE).
   */
  private lookup(name: string): Set<string> | undefined {
    if (Buffer.byteLength(name) > IFNAMSIZ - 1) throw RtnlError.fromErrno(`get-link ${name}`, Errno.ERANGE);
    return this.links.get(name);
  }
  private refuseForeign(op: string, name: string): void {
    this.lookup(name);
    const kind = this.foreign.get(name);
    if (kind !== undefined) throw RtnlError.foreignLink(op, name, kind);
  }
}

/**
 * ipv6_add_addr refuses (EADDRNOTAVAIL) the unspecified address, multicast ones, and ::1 on a link
 * other than loopback.
 */
function refusedIPv6(key: string, link: string): boolean {
  const a = parseHostAddress('refused', key);
  return a.family === 10 && (key === '::' || a.bytes[0] === 0xff || (key === '::1' && link !== 'lo'));
}

/** Interface names hold at most IFNAMSIZ - 1 bytes (rtnetlink's IFLA_IFNAME policy: ERANGE beyond). */
const IFNAMSIZ = 16;

/** RtnlError.invalidArgument for anything but an IP address (the real link never sends it), else undefined. */
function invalid(op: string, address: string): RtnlError | undefined {
  try {
    parseHostAddress(op, address);
    return undefined;
  } catch (e) {
    return e as RtnlError;
  }
}

/**
 * The address as the kernel lists it (IPv6 compressed, lower case): '10.0.0.1' and 'FD00::1' stay
 * distinct otherwise.
 */
function canonical(address: string): string {
  const a = parseHostAddress('canonical', address);
  return a.family === 10 ? formatIPv6(a.bytes) : formatIPv4(a.bytes);
}

const _real: VipLink = new FakeVipLink();
void _real;
