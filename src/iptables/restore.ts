// IptablesRestore: the iptables + ipset path applied to the host with `ipset restore` and
// `iptables-restore`; the one place they run. The steps of one sync are on the class.
import type { IptablesSync } from './sync.js';
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { Family } from '../model/addr.js';
import { type Backend, type BackendMode, detectBackend } from './backend.js';
import { type Runner, TOOL_DEADLINE_MS, runChecked, withDeadline } from './exec.js';
import { restoreSets } from './ipset.js';
import { planIpsets, setsAfter } from './ipset-plan.js';
import type { SavedSets } from './ipset-save.js';
import { NetlinkSetReader, type SetReader, toolSetReader } from './ipset-reader.js';
import type { IpPortMember } from './ipset-netlink.js';
import { type HoldOutcome, NetlinkSetMembers, type SetMembers, holdDuring, toolSetMembers } from './syn-hold.js';
import { makeNames } from './names.js';
import { desiredSets, renderChainFlush, renderCleanup, renderIpsetCleanup, renderIptables } from './render.js';
import { findJumps, parseSave } from './save.js';
import { iptablesDrift } from './drift.js';
import { run } from '../util/proc.js';
import { Serial } from '../util/serial.js';
import { settledAll } from '../util/settled.js';

/** IptablesRestore's options; every one has a default. */
export interface IptablesRestoreOptions {
  /** Chain and set prefix, 1-8 of [A-Z0-9]; default IPVSOP. */
  prefix?: string;
  /** Also program ip6tables and inet6 sets; default true. */
  ipv6?: boolean;
  /** 'auto' (default) detects like kube-proxy; or force one backend. */
  backend?: 'auto' | BackendMode;
  /** Seconds to wait for the xtables lock; default 5. */
  lockWaitSeconds?: number;
  /** Command runner; default: child_process. Unit tests pass a fake. */
  run?: Runner;
  /**
   * How our sets are read; default: over netlink, or through `ipset` on `run` when a runner is
   * given (fakes and dry runs see every host access on their runner).
   */
  sets?: SetReader;
  /** How the HOLD set's members are written; default like `sets`: netlink, or `ipset` on `run`. */
  members?: SetMembers;
  /** How long one tool may run (ms) before it is killed and its sync fails; default TOOL_DEADLINE_MS. */
  toolDeadlineMs?: number;
}

/** What the last sync sent, for logs and --dry-run style inspection. */
export interface AppliedPayloads {
  /** The ipset difference sent ('' when the sets were in step: no ipset restore ran). */
  ipset: string;
  /** Sets not changed in place, and why (ipset-plan.ts). */
  ipsetNotes: string[];
  v4: string;
  v6?: string;
}

/**
 * Programs our chains and sets with iptables-restore / ipset restore. One sync is
 *   1. the host's set names and one read of our sets (over netlink, ipset-reader.ts; after a
 *      successful sync, what it left is planned against instead), then one `ipset restore -exist` of only
 *      the difference (ipset-plan.ts: dels, then adds; a set that
 *      cannot be changed in place is refilled through `<name>-tmp` + swap); none when in step;
 *   2. per family: `iptables-save` (to see which hook jumps exist; run beside step 1), then one
 *      `iptables-restore --noflush --wait=5`: our chains are declared (created or flushed: only
 *      those), refilled, and missing jumps inserted. Foreign chains, rules and sets are never named.
 * Sets are written before the rules because the rules name them. Cleanup reverses it: rules, then sets.
 * The backend (nft or legacy) is detected once, like kube-proxy (backend.ts). The xtables lock is
 * taken by the restore binaries themselves (`--wait`); iptables-save takes no lock.
 */
export class IptablesRestore implements IptablesSync {
  /** The tools' runner, and how sets are read. */
  private readonly host: { run: Runner; sets: SetReader; members: SetMembers };
  private readonly prefix: string;
  private readonly ipv6: boolean;
  private readonly force: BackendMode | undefined;
  private readonly wait: number;
  private backendP: Promise<Backend> | undefined;
  private readonly queue = new Serial();
  /**
   * What the last sync sent, and our sets as that sync left them (ipset-plan.ts setsAfter): the
   * next sync plans against those instead of reading the kernel (a read of 66 000 members cost
   * seconds). Forgotten when a sync fails, when drift() finds a difference and on cleanup(): the
   * next sync reads the kernel again, as the first one does.
   */
  private readonly memo: { last?: AppliedPayloads; written?: SavedSets } = {};
  /** Payloads of the last successful sync. */
  get last(): AppliedPayloads | undefined {
    return this.memo.last;
  }

  constructor(opts: IptablesRestoreOptions = {}) {
    const run = withDeadline(opts.run ?? spawnRunner, opts.toolDeadlineMs ?? TOOL_DEADLINE_MS);
    this.host = {
      run,
      sets: opts.sets ?? (opts.run ? toolSetReader(run) : new NetlinkSetReader()),
      members: opts.members ?? (opts.run ? toolSetMembers(run) : new NetlinkSetMembers()),
    };
    this.prefix = makeNames(opts.prefix).prefix;
    this.ipv6 = opts.ipv6 ?? true;
    this.force = opts.backend === 'auto' ? undefined : opts.backend;
    this.wait = opts.lockWaitSeconds ?? 5;
  }

  /** The backend in use (detected on first call, then cached). */
  backend(): Promise<Backend> {
    if (!this.backendP) {
      this.backendP = detectBackend(this.host.run, this.force);
      this.backendP.catch(() => { this.backendP = undefined; });
    }
    return this.backendP;
  }

  /**
   * Detects the backend ahead of the first sync (about 8 runs of iptables' tools: 0.4-0.7 s in
   * the lab VM). Never rejects: a failed detection is forgotten, and sync() detects again and fails.
   */
  async prepare(): Promise<void> {
    await this.backend().catch(() => undefined);
  }

  /** Makes our sets and chains match `desired`; throws IptablesError when a command fails. Idempotent. */
  sync(desired: Desired, config: ProxyConfig): Promise<void> {
    return this.queue.run(async () => {
      const written = this.memo.written;
      this.memo.written = undefined; // until this sync has succeeded
      const b = await this.backend();
      const families: Family[] = this.ipv6 ? ['IPv4', 'IPv6'] : ['IPv4'];
      const present = async (save: string) =>
        new Set(findJumps(parseSave(await runChecked(this.host.run, save, [])), makeNames(this.prefix)).keys());
      // The hook jumps present are read while the sets are planned and written (each tool a process
      // of its own; the two families' saves at once too): neither step changes a hook chain, the
      // chain flush before a set is recreated names only our chains.
      const [sets, [jumps4, jumps6]] = await settledAll([
        this.writeSets(desired, families, written, b),
        settledAll([present(b.save), this.ipv6 ? present(b.save6) : Promise.resolve(undefined)]),
      ]);
      const ipset = sets.plan;
      const presentJumps = { v4: jumps4, ...(jumps6 ? { v6: jumps6 } : {}) };
      const payload = renderIptables(config, { prefix: this.prefix, randomFully: b.randomFully, presentJumps });
      const restores = [this.restore(b.restore, payload.v4)];
      if (this.ipv6) restores.push(this.restore(b.restore6, payload.v6));
      await settledAll(restores);
      const v6 = this.ipv6 ? { v6: payload.v6 } : {};
      this.memo.last = { ipset: ipset.payload, ipsetNotes: ipset.notes, v4: payload.v4, ...v6 };
      this.memo.written = setsAfter(sets.wanted, sets.saved, sets.existing);
    });
  }

  /**
   * Why our chains and sets differ from what sync() writes for `desired` (drift.ts); undefined: in
   * step. Read-only; `signal` ends it (the running tool killed, AbortError).
   */
  drift(desired: Desired, config: ProxyConfig, signal?: AbortSignal): Promise<string | undefined> {
    return this.queue.run(async () => {
      const b = await this.backend();
      const setCounts = await this.host.sets.counts(signal);
      const saved = {
        IPv4: parseSave(await runChecked(this.host.run, b.save, [], undefined, signal)),
        ...(this.ipv6 ? { IPv6: parseSave(await runChecked(this.host.run, b.save6, [], undefined, signal)) } : {}),
      };
      // A change that arrived during the reads finds the comparison not started: it counts the
      // members of every VIP (30 000 at 30 000 Services), compute the change would wait behind.
      signal?.throwIfAborted();
      const why = iptablesDrift(desired, config, { saved, setCounts }, this.prefix);
      if (why) this.memo.written = undefined; // the sync that follows reads our sets again
      return why;
    });
  }

  /**
   * Runs `swap` with new TCP connections to `members` held (syn-hold.ts). Not queued behind a sync
   * or a drift check: the executor runs it before its sync's iptables step. A release that failed
   * forgets what the last sync wrote, so the next one reads our sets (and deletes the member).
   */
  async holdSyns<T>(members: readonly IpPortMember[], swap: () => Promise<T>): Promise<HoldOutcome<T>> {
    const names = makeNames(this.prefix);
    const held = this.ipv6 ? members : members.filter((m) => m.family === 'IPv4');
    try {
      return await holdDuring(this.host.members, (m) => names.set(m.family, 'HOLD'), held, swap);
    } catch (e) {
      this.memo.written = undefined;
      throw e;
    }
  }

  /** Removes our jumps, chains (both families) and sets; what is already gone is skipped. */
  cleanup(): Promise<void> {
    return this.queue.run(async () => {
      this.memo.written = undefined;
      const b = await this.backend();
      for (const [save, restore] of [[b.save, b.restore], ...(this.ipv6 ? [[b.save6, b.restore6]] : [])] as const) {
        const payload = renderCleanup(parseSave(await runChecked(this.host.run, save, [])), this.prefix);
        if (payload) await this.restore(restore, payload);
      }
      await restoreSets(this.host.run, renderIpsetCleanup(await this.host.sets.names(), this.prefix));
    });
  }

  /** Plans our sets against `written` (or a read) and sends the difference; resolves with the plan. */
  private async writeSets(desired: Desired, families: Family[], written: SavedSets | undefined, b: Backend) {
    const sets = await this.planSets(desired, families, written);
    if (sets.plan.recreate.length) {
      // A set of ours of another type or family: destroy needs our rules naming it gone.
      const flush = renderChainFlush(this.prefix);
      for (const bin of [b.restore, ...(this.ipv6 ? [b.restore6] : [])]) await this.restore(bin, flush);
    }
    await restoreSets(this.host.run, sets.plan.payload);
    return sets;
  }

  /**
   * The ipset difference for `desired`: against `written` (what the last sync left) when given,
   * else against our sets as the kernel holds them (the host's set names and one read).
   */
  private async planSets(desired: Desired, families: Family[], written?: SavedSets) {
    const wanted = desiredSets(desired, { prefix: this.prefix, families });
    const existing = written ? new Set(written.sets.keys()) : await this.host.sets.names();
    let saved = written;
    if (!saved) saved = await this.host.sets.read(wanted.map((w) => w.name).filter((n) => existing.has(n)));
    return { plan: planIpsets(wanted, saved, existing), wanted, saved, existing };
  }

  private restore(bin: string, payload: string): Promise<string> {
    return runChecked(this.host.run, bin, ['--noflush', `--wait=${this.wait}`], payload);
  }

}

/**
 * The production Runner: spawn, feed stdin, collect output. An aborted tool gets SIGKILL: one that
 * ignores SIGTERM would otherwise outlive its deadline.
 */
export const spawnRunner: Runner = (cmd, args, input, signal) =>
  run(cmd, args, { ...(input === undefined ? {} : { input }), ...(signal ? { signal, killSignal: 'SIGKILL' } : {}) });
