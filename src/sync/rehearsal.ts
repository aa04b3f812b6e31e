// A change's code, run once before the first change. V8 compiles a function on its first call,
// and a node's first sync runs none of what one change runs: the compares that tell what a rebuilt
// Service changed, the partial read and its decode of real servers, the partial plan. Under TCG the
// first add and remove took 2-3 times the later ones, and not with every function compiled at load
// (docs/performance.md, "The first change of each kind waits for V8's lazy compilation"). So the
// first sync ends by running that code on what it has: one Service rebuilt from its own objects,
// its virtual server's real servers read back from the kernel into the copy (the kernel's truth),
// that virtual server planned as a change would plan it. Nothing is written; the plan is dropped.
// Bytecode V8 flushes after a quiet spell is compiled again on the next change: this covers start.
import type { ProxyConfig } from '../config/types.js';
import type { DesiredState } from '../desired/state.js';
import type { Desired } from '../desired/types.js';
import { planSync } from '../plan/sync.js';
import type { KernelReader } from './kernel-read.js';
import { type SyncCarry, syncInput } from './loop-state.js';
import type { OperatorDeps } from './operator-types.js';
import type { Clock } from './runner.js';
import type { Collect } from '../util/gc.js';
import type { Log } from '../util/log.js';

/** What the rehearsal reads and plans with: the sync's own state, after its writes. */
export interface RehearsalInput {
  state: DesiredState;
  reader: KernelReader;
  desired: Desired;
  config: ProxyConfig;
  carry: SyncCarry;
  clock: Clock;
  deps: Pick<OperatorDeps, 'ipvs' | 'log'>;
}

/**
 * The virtual server to rehearse on: the first desired one the copy holds with real servers (so
 * the read decodes some), else none (nothing to read: a node with no endpoints has no change to
 * be quick for yet).
 */
export function rehearsalKey(
  desired: Desired['table'], copy: KernelReader['cache']['view'],
): string | undefined {
  for (const [key, d] of desired) if ((copy.get(key)?.dests.size ?? 0) > 0 && d.dests.length > 0) return key;
  return undefined;
}

/**
 * Runs a change's code once (see the file comment). A failure is logged and dropped: the
 * rehearsal is not the sync's work, and the copy it reads into is the kernel's truth either way.
 */
export async function rehearseChange(r: RehearsalInput): Promise<void> {
  const { reader, desired, config, carry, clock, deps: { ipvs, log } } = r;
  const key = rehearsalKey(desired.table, reader.cache.view);
  if (key === undefined) return;
  const origin = desired.table.get(key)!.origin;
  const t0 = clock.now();
  try {
    r.state.rebuildOne(`${origin.namespace}/${origin.name}`);
    const changed = new Set([key]);
    await reader.read({
      full: false, periodic: false, changed, due: new Set(), draining: carry.draining, table: desired.table, t0,
      link: config.interfaceName, syncPeriodMs: config.syncPeriod * 1000, changeWaiting: () => false,
    });
    await reader.cache.readSome(ipvs, changed);
    planSync(syncInput(carry, reader, {
      now: clock.now(), full: false, changed, reread: new Set(), desired, config, versions: r.state.versions,
    }));
    log('debug', 'ran a change\'s code once after the first sync', { virtualServer: key, ms: clock.now() - t0 });
  } catch (e) {
    log('warn', 'running a change\'s code once after the first sync failed', {
      virtualServer: key, error: (e as Error).message,
    });
  }
}

/**
 * The young generation emptied after the first sync (util/gc.ts), on the loop's turn after it
 * ended. The first sync allocates its whole desired state, plan and messages at once; what of it
 * is still in V8's young generation then is copied out by the next scavenge, which falls in a
 * change (at 10 000 Services in the lab VM, 29-36 ms in one of the first 40 changes, the first add
 * once 80 ms: docs/performance.md, "The first sync's young generation"). Collected here, that
 * cost comes before any change. Run after the sync's frame is gone, so its plan and messages are
 * garbage by then and not promoted. A collector that throws is logged; the sync succeeded anyway.
 */
export function collectAfterFirstSync(collect: Collect | undefined, clock: Clock, log: Log): void {
  if (!collect) return;
  // On the loop's next turn: once the sync's frame is gone, its plan and messages are garbage and
  // only what lives on is promoted.
  clock.setTimeout(() => {
    const t0 = clock.now();
    try {
      collect();
      log('debug', 'emptied the young generation after the first sync', { ms: clock.now() - t0 });
    } catch (e) {
      log('warn', 'emptying the young generation after the first sync failed', { error: (e as Error).message });
    }
  }, 0);
}
