// The periodic sync's read-only check of the iptables path (two saves and a set listing), and
// when it is put off because a change is waiting.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { Log } from '../util/log.js';
import type { SyncCarry } from './loop-state.js';

/** Periodic iptables checks that may be put off in a row because a change was waiting. */
const MAX_DEFERRED_CHECKS = 3;

/**
 * Sets carry.applied for a periodic sync: the VIP link is always re-applied (a diff against the
 * listed addresses); the iptables path only when it drifted (a full restore costs tens of seconds
 * at 10 000 Services under TCG).
 */
export async function checkAppliedPeriodic(
  carry: SyncCarry, changeWaiting: boolean, iptables: IptablesSync, log: Log, desired: Desired, config: ProxyConfig,
): Promise<void> {
  // A change that arrived during the read waits for this sync to end: the iptables check (two
  // saves and a set listing, subprocesses: hundreds of ms on a loaded node) is put off to a
  // later period, at most MAX_DEFERRED_CHECKS times in a row, so drift is still caught.
  if (changeWaiting && carry.checksDeferred < MAX_DEFERRED_CHECKS) {
    carry.checksDeferred++;
    carry.applied = carry.applied.iptables ? { iptables: carry.applied.iptables } : {};
  } else {
    carry.checksDeferred = 0;
    const inStep = await iptablesInStep(carry, iptables, log, desired, config);
    carry.applied = inStep ? { iptables: carry.applied.iptables! } : {};
  }
}

/** Whether the iptables path is as the last sync left it (never re-read: false, so it is re-applied). */
async function iptablesInStep(
  carry: SyncCarry, ipt: IptablesSync, log: Log, desired: Desired, config: ProxyConfig,
): Promise<boolean> {
  if (!carry.applied.iptables || !ipt.drift) return false;
  try {
    const reason = await ipt.drift(desired, config);
    if (reason) log('info', 'iptables path drifted; applying it again', { reason });
    return reason === undefined;
  } catch (e) {
    log('warn', 'iptables drift check failed; applying the path again', { error: (e as Error).message });
    return false;
  }
}
