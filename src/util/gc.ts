// V8's collector, for the one place the operator asks for a collection: the end of its first sync
// (src/sync/rehearsal.ts, collectAfterFirstSync). Node exposes it only with `--expose-gc`; the
// flag, set at run time, installs `gc` into contexts made after it, so one new vm context hands
// the function over and the flag is set back. The function collects the whole isolate's heap,
// whichever context it came from. Nothing here is needed for correctness: no collector, no call.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Empties V8's young generation: two minor collections (scavenges). The first moves what is live
 * within the young generation, the second promotes it to the old one, so the young generation is
 * left empty, and what the next scavenge copies is only what was allocated after this.
 */
export type Collect = () => void;

type V8Gc = (options?: { type?: 'minor' | 'major' }) => unknown;

/**
 * The process's collector: `globalThis.gc` when node runs with `--expose-gc`, else one taken from
 * a new context made with the flag set; undefined when neither works.
 */
export function exposedCollector(): Collect | undefined {
  const gc = ownGc() ?? contextGc();
  return gc ? () => { gc({ type: 'minor' }); gc({ type: 'minor' }); } : undefined;
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
