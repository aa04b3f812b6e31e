// V8's collector, for the one place the operator asks for a collection: the end of its first sync
// (src/sync/rehearsal.ts, collectAfterFirstSync). Node exposes it only with `--expose-gc`; the
// flag, set at run time, installs `gc` into contexts made after it, so one new vm context hands
// the function over and the flag is set back. The function collects the whole isolate's heap,
// whichever context it came from. Nothing here is needed for correctness: no collector, no call.
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Empties V8's young generation, so that what the next scavenge copies is only what was allocated
 * after this: one minor collection (a scavenge), and a second only when the first left more than
 * SECOND_OVER there (what survives a scavenge for the first time stays young; the second promotes
 * it). After a node's first sync the first left 0.03-0.14 MB in the lab VM, and a second then
 * cost 6-15 ms, or in 2 runs of 4 ran as a full collection (V8's choice: the old generation's
 * garbage, 80 MB at 10 000 Services, marked and swept at once) of 413-417 ms.
 */
export type Collect = () => void;

type V8Gc = (options?: { type?: 'minor' | 'major' }) => unknown;

/** What a second scavenge would have to leave for it to be worth its cost (see Collect). */
export const SECOND_OVER = 1 << 20;

/**
 * The process's collector: `globalThis.gc` when node runs with `--expose-gc`, else one taken from
 * a new context made with the flag set; undefined when neither works.
 */
export function exposedCollector(): Collect | undefined {
  const gc = ownGc() ?? contextGc();
  return gc ? youngCollector(gc, youngBytes) : undefined;
}

/** Collect over V8's `gc` and the young generation's use in bytes (see Collect). */
export function youngCollector(gc: V8Gc, young: () => number): Collect {
  return () => {
    gc({ type: 'minor' });
    if (young() > SECOND_OVER) gc({ type: 'minor' });
  };
}

/** Bytes in use in V8's young generation (its new space). */
export function youngBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_used_size ?? 0;
}

function ownGc(): V8Gc | undefined {
  const own = (globalThis as { gc?: unknown }).gc;
  return typeof own === 'function' ? own as V8Gc : undefined;
}

function contextGc(): V8Gc | undefined {
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as unknown;
    return typeof gc === 'function' ? gc as V8Gc : undefined;
  } catch {
    return undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}
