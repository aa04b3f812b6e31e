// A change's code, run once before the first change. V8 compiles a function on its first call,
// and a node's first sync runs none of what one change runs (the compares that tell what a rebuilt
// Service changed, the partial read and its decode, a partial plan that makes ops): under TCG the
// first add and remove took 2-3 times the later ones (docs/performance.md, "The first change of each
// kind waits for V8's lazy compilation"). So the first sync ends by rebuilding one Service from its
// own objects, reading its virtual server's real servers back into the copy (the kernel's truth),
// planning it as a change would, then planning it as one change of each kind would leave it (a
// weight, a real server fewer, one more) with the plan's text, settling and encoding. Nothing is
// written or kept. Bytecode V8 flushes after a quiet spell is compiled again on the next change.
import type { ProxyConfig } from '../config/types.js';
import type { DesiredState } from '../desired/state.js';
import type { Desired, DesiredVirtualServer } from '../desired/types.js';
import { settleSync } from '../plan/settle.js';
import { formatSyncPlan, planSync } from '../plan/sync.js';
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
 * The rehearsed virtual server as one endpoint change of each kind would leave it: its first real
 * server's weight one more, its last one gone (when it has two or more) and one added (the first's
 * address on the next port). pure.
 */
export function rehearsalChange(entry: DesiredVirtualServer): DesiredVirtualServer {
  const [first, ...rest] = entry.dests;
  if (!first) return entry;
  const added = { ...first, port: first.port === 65535 ? 1 : first.port + 1 };
  return { ...entry, dests: [{ ...first, weight: first.weight + 1 }, ...rest.slice(0, -1), added] };
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
    const { versions } = r.state;
    const input = { now: clock.now(), full: false, changed, reread: new Set<string>(), config, versions };
    planSync(syncInput(carry, reader, { ...input, desired }));
    const table = new Map(desired.table).set(key, rehearsalChange(desired.table.get(key)!));
    const plan = planSync(syncInput(carry, reader, { ...input, desired: { ...desired, table } }));
    formatSyncPlan(plan);
    settleSync(plan, plan.ops.map(() => undefined), { retries: carry.retries, record: carry.record.keys });
    ipvs.encode?.(plan.ops);
    log('debug', 'ran a change\'s code once after the first sync', {
      virtualServer: key, ops: plan.ops.length, ms: clock.now() - t0,
    });
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
