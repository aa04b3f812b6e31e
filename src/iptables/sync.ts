// The seam to the iptables + ipset path: IptablesRestore (restore.ts) programs the host; the sync
// loop calls it after the IPVS ops, with the same desired state. NoIptables stands in where the path is off.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { IpPortMember } from './ipset-netlink.js';
import type { HoldOutcome } from './syn-hold.js';

/** Programs the masquerade/filter rules and sets for a desired state; idempotent. */
export interface IptablesSync {
  /** Makes the operator's chains, rules and sets match `desired` (never touching foreign ones). */
  sync(desired: Desired, config: ProxyConfig): Promise<void>;
  /** Removes every chain, rule and set the operator created. */
  cleanup(): Promise<void>;
  /**
   * Why the host's chains and sets of ours no longer match what `sync(desired, config)` wrote
   * (drift.ts), or undefined when they do. Read-only; the periodic check calls it instead of
   * re-applying everything; `signal` ends it early (rejects). Absent: the periodic check re-applies.
   */
  drift?(desired: Desired, config: ProxyConfig, signal?: AbortSignal): Promise<string | undefined>;
  /**
   * Work that needs no desired state, done ahead of the first sync (the run starts it while the
   * source lists): IptablesRestore detects the backend. Never rejects; a failure is the first
   * sync's to report.
   */
  prepare?(): Promise<void>;
  /**
   * Runs `swap` (IPVS edits that change schedulers) while new TCP connections to `members` are
   * held: their SYNs dropped before IPVS sees them (syn-hold.ts). Rejects only when a hold that was
   * set could not be released. Absent: swaps run unheld.
   */
  holdSyns?<T>(members: readonly IpPortMember[], swap: () => Promise<T>): Promise<HoldOutcome<T>>;
}

/** Does nothing: for dry runs, and hosts where the iptables path is turned off. */
export class NoIptables implements IptablesSync {
  async sync(): Promise<void> {}
  async cleanup(): Promise<void> {}
}
