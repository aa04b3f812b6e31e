// `run --dry-run`: the loop prints each plan (formatSyncPlan, through the operator's onPlan), and
// the kernel interfaces are wrapped so that reads go through to the node (when it has the thing at
// all) and writes are kept instead of made. Each wrapper keeps what it "wrote", so the next sync
// plans against the state the previous plan would have left: a dry run prints the first whole
// plan, then each incremental one, exactly as `run` would apply them. Its output: docs/running.md.
import { Errno, type NetlinkError } from '../netlink/errors.js';
import { IpvsError } from '../ipvs/errors.js';
import { type MutableIpvsTable, applyOp } from '../ipvs/table.js';
import { readTable } from '../ipvs/read.js';
import { COPY_READ } from './full-read.js';
import type { IpvsClient, OpResult } from '../ipvs/types.js';
import type { Runner } from '../iptables/exec.js';
import { isReadOnlyRestore } from '../iptables/ipset.js';
import {
  type IpvsInfo, type IpvsOp, type IpvsTimeouts, type RealServer, type VirtualServer, formatOp, virtualServerKey,
} from '../model/ipvs.js';
import type { VipLink, VipResult } from '../rtnl/vips.js';
import { RtnlError } from '../rtnl/errors.js';
import { type SyncPlan, syncPlanLines } from '../plan/sync.js';

/** Where the dry run prints (stdout in the CLI). */
export type Print = (line: string) => void;

/** IpvsClient that reads the node's table once (or starts empty without IPVS) and keeps writes; prints refusals. */
export class DryRunIpvs implements IpvsClient {
  private table: MutableIpvsTable | undefined;

  /** `inner` undefined: this kernel has no IPVS; plans are made against an empty table. */
  constructor(private readonly inner: IpvsClient | undefined, private readonly print: Print) {}

  async info(): Promise<IpvsInfo> {
    return this.inner ? this.inner.info() : { version: 'none', versionCode: 0, connTableSize: 0 };
  }

  // Its copy holds no traffic counters (seeded): every read returns it as read without them.
  async listVirtualServers(): Promise<VirtualServer[]> {
    return [...(await this.seeded()).values()].map((e) => e.vs);
  }

  async listRealServers(vs: VirtualServer): Promise<RealServer[]> {
    return [...((await this.seeded()).get(virtualServerKey(vs))?.dests.values() ?? [])];
  }

  async listRealServersMany(vss: readonly VirtualServer[]): Promise<RealServer[][]> {
    const table = await this.seeded();
    return vss.map((vs) => [...(table.get(virtualServerKey(vs))?.dests.values() ?? [])]);
  }

  async getVirtualServers(vss: readonly VirtualServer[]): Promise<Array<VirtualServer | IpvsError>> {
    const table = await this.seeded();
    return vss.map((vs) => {
      const key = virtualServerKey(vs);
      return table.get(key)?.vs ?? IpvsError.fromErrno(`get-service ${key}`, Errno.ESRCH);
    });
  }

  addVirtualServer(vs: VirtualServer): Promise<void> {
    return this.one({ kind: 'add-service', vs });
  }

  updateVirtualServer(vs: VirtualServer): Promise<void> {
    return this.one({ kind: 'update-service', vs });
  }

  deleteVirtualServer(vs: VirtualServer): Promise<void> {
    return this.one({ kind: 'delete-service', vs });
  }

  addRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.one({ kind: 'add-dest', vs, rs });
  }

  updateRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.one({ kind: 'update-dest', vs, rs });
  }

  deleteRealServer(vs: VirtualServer, rs: RealServer): Promise<void> {
    return this.one({ kind: 'delete-dest', vs, rs });
  }

  async getTimeouts(): Promise<IpvsTimeouts> {
    return this.inner ? this.inner.getTimeouts() : { tcp: 0, tcpFin: 0, udp: 0 };
  }

  async setTimeouts(t: IpvsTimeouts): Promise<void> {
    this.print(`set-timeouts tcp=${t.tcp} tcpfin=${t.tcpFin} udp=${t.udp}`);
  }

  async zero(vs?: VirtualServer): Promise<void> {
    this.print(`zero${vs ? ` ${virtualServerKey(vs)}` : ''}`);
  }

  async flush(): Promise<void> {
    this.print('flush');
    this.table = new Map();
  }

  /** Records each op; an op the recorded table refuses gets the kernel's errno, and a "# would fail" line. */
  async apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    const table = await this.seeded();
    return ops.map((op) => {
      const errno = applyOp(table, op);
      if (errno === undefined) return undefined;
      const text = formatOp(op);
      this.print(`# would fail: ${text}: errno ${errno}`);
      return IpvsError.fromErrno(text, errno);
    });
  }

  close(): void {
    this.inner?.close();
  }

  private async one(op: IpvsOp): Promise<void> {
    const [err] = await this.apply([op]);
    if (err) throw err;
  }

  private async seeded(): Promise<MutableIpvsTable> {
    if (this.table) return this.table;
    // Its copy of the node's table, as the sync's (full-read.ts): without the traffic counters.
    this.table = this.inner ? await readTable(this.inner, COPY_READ) : new Map();
    return this.table;
  }
}

/** VipLink that lists the node's link once per name and keeps address changes (the plan printed them). */
export class DryRunVipLink implements VipLink {
  private readonly links = new Map<string, Set<string>>();

  constructor(private readonly inner: VipLink | undefined) {}

  async ensure(name: string): Promise<void> {
    await this.addresses(name);
  }

  /** Nothing is sent: nothing to get ready. */
  prepare(_count: number): void {}

  async list(name: string): Promise<string[]> {
    return [...(await this.addresses(name))];
  }

  async add(name: string, address: string): Promise<void> {
    const have = await this.addresses(name);
    if (have.has(address)) throw RtnlError.fromErrno(`add-vip ${name} ${address}`, Errno.EEXIST);
    have.add(address);
  }

  async remove(name: string, address: string): Promise<void> {
    const have = await this.addresses(name);
    if (!have.has(address)) throw RtnlError.fromErrno(`del-vip ${name} ${address}`, Errno.EADDRNOTAVAIL);
    have.delete(address);
  }

  async addMany(name: string, addresses: readonly string[]): Promise<VipResult[]> {
    await this.addresses(name); // a link that cannot be read fails the whole batch, as the real one's ENODEV
    const out: VipResult[] = [];
    for (const a of addresses) out.push(
      await this.add(name, a).then(() => undefined, (e: unknown) => e as NetlinkError));
    return out;
  }

  async removeMany(name: string, addresses: readonly string[]): Promise<VipResult[]> {
    await this.addresses(name);
    const out: VipResult[] = [];
    for (const a of addresses) out.push(
      await this.remove(name, a).then(() => undefined, (e: unknown) => e as NetlinkError));
    return out;
  }

  private async addresses(name: string): Promise<Set<string>> {
    let have = this.links.get(name);
    if (!have) this.links.set(name, (have = new Set(this.inner ? await this.inner.list(name) : [])));
    return have;
  }
}

/**
 * A Runner for the iptables path that runs the reading commands (`*-save`, `ipset list`, `-V`, an
 * `ipset restore` of only `save` lines) and prints the writing ones (`*-restore`, `ipset restore`)
 * with their input. A reading command
 * that is not installed reads as empty, said once per command.
 */
export function dryRunRunner(inner: Runner, print: Print): Runner {
  const missing = new Set<string>();
  return async (cmd, args, input, signal) => {
    const writes = cmd.endsWith('-restore')
      || (cmd === 'ipset' && args[0] === 'restore' && !isReadOnlyRestore(input ?? ''));
    if (writes) {
      print(`${[cmd, ...args].join(' ')} <<EOF`);
      for (const line of (input ?? '').replace(/\n$/, '').split('\n')) print(line);
      print('EOF');
      return { code: 0, stdout: '', stderr: '' };
    }
    try {
      return await inner(cmd, args, input, signal);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      if (!missing.has(cmd)) print(`# ${cmd} is not installed here: read as empty`);
      missing.add(cmd);
      return { code: 0, stdout: '', stderr: '' };
    }
  };
}

/** The operator's onPlan for a dry run: prints each plan in its text form (formatSyncPlan's lines). */
export function printPlan(print: Print): (plan: SyncPlan) => void {
  return (plan) => { for (const line of syncPlanLines(plan)) print(line); };
}
