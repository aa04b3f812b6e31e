// The operator's VIP interface over rtnetlink, and an in-memory fake with the same behaviour.
import { Errno } from '../netlink/errors.js';
import { RtnlError } from './errors.js';
import { Rtnl } from './links.js';

/** The dummy interface holding the VIPs (rtnetlink in production, a fake in unit tests). */
export interface VipLink {
  /** Creates the dummy link if missing and sets it up. */
  ensure(name: string): Promise<void>;
  /** Addresses on the link ([] when it does not exist). */
  list(name: string): Promise<string[]>;
  add(name: string, address: string): Promise<void>;
  remove(name: string, address: string): Promise<void>;
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

/** VipLink in memory, with the real one's refusals: `foreign` names links of another kind (name -> kind). */
export class FakeVipLink implements VipLink {
  readonly links = new Map<string, Set<string>>();
  constructor(private readonly foreign: ReadonlyMap<string, string> = new Map()) {}
  async ensure(name: string): Promise<void> {
    this.refuseForeign(`ensure-link ${name}`, name);
    if (!this.links.has(name)) this.links.set(name, new Set());
  }
  async list(name: string): Promise<string[]> {
    this.refuseForeign(`list-addresses ${name}`, name);
    return [...(this.links.get(name) ?? [])];
  }
  async add(name: string, address: string): Promise<void> {
    const l = this.links.get(name);
    if (!l) throw RtnlError.fromErrno(`add-address ${name} ${address}`, Errno.ENODEV);
    if (l.has(address)) throw RtnlError.fromErrno(`add-address ${name} ${address}`, Errno.EEXIST);
    l.add(address);
  }
  async remove(name: string, address: string): Promise<void> {
    if (!this.links.get(name)?.delete(address)) throw RtnlError.fromErrno(`delete-address ${name} ${address}`, Errno.EADDRNOTAVAIL);
  }
  private refuseForeign(op: string, name: string): void {
    const kind = this.foreign.get(name);
    if (kind !== undefined) throw RtnlError.foreignLink(op, name, kind);
  }
}

const _real: VipLink = new FakeVipLink();
void _real;
