// The periodic sync's read-only check of the iptables path (a set listing and two saves, child
// processes) and its comparison of the VIP link, and when each is put off because a change is waiting.
import type { Desired } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { Log } from '../util/log.js';
import type { Applied } from './operator-types.js';

/** Periodic checks of one kind that may be put off in a row because a change was waiting. */
const MAX_DEFERRED_CHECKS = 3;

/** Counts one kind of check's put-offs in a row, so that every (MAX_DEFERRED_CHECKS + 1)th runs. */
class PutOffs {
  private inARow = 0;

  /** Whether the next check may still be put off. */
  get allowed(): boolean {
    return this.inARow < MAX_DEFERRED_CHECKS;
  }

  /** A check was put off; returns how many in a row. */
  putOff(): number {
    return ++this.inARow;
  }

  /** A check ran to its end. */
  ran(): void {
    this.inARow = 0;
  }
}

/**
 * The periodic sync's iptables check: it sets carry.applied.iptables for the sync, so that the
 * iptables path is applied again only when it drifted (a full restore costs tens of seconds at
 * 10 000 Services under TCG). The check runs beside the sync's read of IPVS. (The VIP link:
 * PeriodicVipCheck below.)
 *
 * A change waiting behind the periodic sync does not wait for the check: one that arrives before
 * the check or during it (changeArrived: the running tool is killed) puts the check off to a later
 * period, at most MAX_DEFERRED_CHECKS times in a row, so drift is still caught: the check after
 * them runs to its end whatever arrives.
 */
export class PeriodicIptablesCheck {
  private readonly putOffs = new PutOffs();
  /** Ends the check in progress (undefined: none runs). */
  private abort: AbortController | undefined;

  /** A change arrived: the check in progress, if any, is put off. */
  changeArrived(): void {
    this.abort?.abort();
  }

  /** Runs the check (`waiting`: a change already waits) and sets carry.applied. Never rejects. */
  async run(
    carry: { applied: Applied }, waiting: boolean, iptables: IptablesSync, log: Log,
    desired: Desired, config: ProxyConfig,
  ): Promise<void> {
    const abort = new AbortController();
    if (waiting) abort.abort();
    if (this.putOffs.allowed) this.abort = abort;
    let inStep: boolean | 'put off';
    try {
      inStep = await iptablesInStep(carry, iptables, log, desired, config, this.abort?.signal);
    } finally {
      this.abort = undefined;
    }
    if (inStep === 'put off') {
      log('debug', 'iptables check put off: a change is waiting', { inARow: this.putOffs.putOff() });
      return;
    }
    this.putOffs.ran();
    // Read again: a configuration change during the check forgot what was applied.
    if (!inStep) delete carry.applied.iptables;
  }
}

/**
 * Whether a periodic sync compares the VIP link it listed with the desired VIPs (planSync then binds
 * and unbinds the difference). Always, except when a change waits behind the sync: the comparison
 * walks every VIP (at 30 000, most of what such a change waited for in a host profile), so it is put
 * off to a later period, at most MAX_DEFERRED_CHECKS times in a row, as the iptables check is.
 */
export class PeriodicVipCheck {
  private readonly putOffs = new PutOffs();

  /** Whether this periodic sync compares (`waiting`: a change waits now). */
  due(waiting: boolean): boolean {
    if (waiting && this.putOffs.allowed) {
      this.putOffs.putOff();
      return false;
    }
    this.putOffs.ran();
    return true;
  }
}

/**
 * Whether the iptables path is as the last sync left it (never re-read: false, so it is
 * re-applied); 'put off' when `signal` aborted before the check had its answer.
 */
async function iptablesInStep(
  carry: { applied: Applied }, ipt: IptablesSync, log: Log, desired: Desired, config: ProxyConfig,
  signal: AbortSignal | undefined,
): Promise<boolean | 'put off'> {
  if (!carry.applied.iptables || !ipt.drift) return false;
  if (signal?.aborted) return 'put off';
  try {
    const reason = await ipt.drift(desired, config, signal);
    if (reason) log('info', 'iptables path drifted; applying it again', { reason });
    return reason === undefined;
  } catch (e) {
    if (signal?.aborted) return 'put off';
    log('warn', 'iptables drift check failed; applying the path again', { error: (e as Error).message });
    return false;
  }
}
