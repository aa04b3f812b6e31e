// A desired table with some entries replaced, without copying the table: the weight rewrites
// (slow start, cluster weights) touch a few virtual servers of tens of thousands. pure: no I/O.
import type { DesiredTable, DesiredVirtualServer } from '../model/desired.js';

/** `base` with the entries of `over` in place of its own (for keys `base` has); a live view. */
export function overlayTable(base: DesiredTable, over: ReadonlyMap<string, DesiredVirtualServer>): DesiredTable {
  const get = (k: string) => (base.has(k) ? over.get(k) ?? base.get(k) : undefined);
  // Generators end with `void` where MapIterator says `undefined`: the same at run time.
  type It<T> = ReturnType<Map<string, T>['values']>;
  const entries = () => (function* () {
    for (const k of base.keys()) yield [k, get(k)!] as [string, DesiredVirtualServer];
  })() as unknown as It<[string, DesiredVirtualServer]>;
  const view: DesiredTable = {
    get,
    has: (k) => base.has(k),
    get size() { return base.size; },
    keys: () => base.keys(),
    values: () =>
      (function* () { for (const k of base.keys()) yield get(k)!; })() as unknown as It<DesiredVirtualServer>,
    entries,
    forEach(cb, thisArg?) { for (const k of base.keys()) cb.call(thisArg, get(k)!, k, view); },
    [Symbol.iterator]: entries,
  };
  return view;
}
