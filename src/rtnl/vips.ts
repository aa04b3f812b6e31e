// The operator's VIP interface over rtnetlink, and an in-memory fake with the same behaviour.
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

/** VipLink on the real kernel. */
export class RtnlVipLink implements VipLink {
  constructor(private readonly rtnl: Rtnl = Rtnl.open()) {}
  async ensure(name: string): Promise<void> {
    await this.rtnl.ensureDummy(name);
    if (!(await this.rtnl.isUp(name))) await this.rtnl.setUp(name);
  }
  async list(name: string): Promise<string[]> {
    if ((await this.rtnl.linkIndex(name)) === undefined) return [];
    return (await this.rtnl.listAddresses(name)).map((a) => a.address).filter((a) => !a.startsWith('fe80:'));
  }
  add(name: string, address: string): Promise<void> {
    return this.rtnl.addAddress(name, address);
  }
  remove(name: string, address: string): Promise<void> {
    return this.rtnl.deleteAddress(name, address);
  }
  /** Deletes the link (cleanup); false when it did not exist. */
  deleteLink(name: string): Promise<boolean> {
    return this.rtnl.deleteLink(name);
  }
  close(): void {
    this.rtnl.close();
  }
}

/** VipLink in memory: links and their addresses. */
export class FakeVipLink implements VipLink {
  readonly links = new Map<string, Set<string>>();
  async ensure(name: string): Promise<void> {
    if (!this.links.has(name)) this.links.set(name, new Set());
  }
  async list(name: string): Promise<string[]> {
    return [...(this.links.get(name) ?? [])];
  }
  async add(name: string, address: string): Promise<void> {
    const l = this.links.get(name);
    if (!l) throw new Error(`no link ${name}`);
    if (l.has(address)) throw new Error(`${address} exists on ${name}`);
    l.add(address);
  }
  async remove(name: string, address: string): Promise<void> {
    if (!this.links.get(name)?.delete(address)) throw new Error(`${address} not on ${name}`);
  }
}

const _real: VipLink = new FakeVipLink();
void _real;
