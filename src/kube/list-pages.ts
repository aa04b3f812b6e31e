// Every page of one list, bounded: at most `limits.maxPages` pages, and a continue token the
// server repeats ends the list at once. The Reflector (reflector.ts) sends each page's request
// and diffs the result against its cache.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ApiLimits } from './transport.js';
import { isRecord, keyOf, malformedObject } from './watch-events.js';

/** What listPages needs from its caller. */
export interface ListPaging<T> {
  /** The collection path, for errors. */
  path: string;
  limits: ApiLimits;
  /** GETs one page, `continue` set to `cont`. */
  page(cont: string | undefined): Promise<unknown>;
  stopped(): boolean;
  /** A list item skipped, and why. */
  malformed(why: string): void;
  trim?: (o: T) => T;
  /** Each page's well-formed items, as the page arrives (before the list is known to be whole). */
  onPage?: (items: readonly T[]) => void;
}

/** The well-formed items by key and the first page's resourceVersion; undefined when stopped. */
export async function listPages<T extends KubernetesObject>(
  p: ListPaging<T>,
): Promise<{ items: Map<string, T>; rv: string | undefined } | undefined> {
  const { limits } = p;
  const seen = new Set<string>();
  const items = new Map<string, T>();
  let rv: string | undefined;
  let cont: string | undefined;
  for (let page = 0; ; page++) {
    if (p.stopped()) return undefined;
    if (page >= limits.maxPages) {
      throw new Error(`GET ${p.path}: the list did not end within ${limits.maxPages} pages`);
    }
    const l = await p.page(cont);
    if (!isRecord(l) || !Array.isArray(l.items)) {
      throw new Error(`GET ${p.path}: the answer is not a list (no items array)`);
    }
    const meta = isRecord(l.metadata) ? l.metadata : {};
    if (page === 0) rv = typeof meta.resourceVersion === 'string' ? meta.resourceVersion : undefined;
    const pageItems: T[] = [];
    for (const item of l.items) {
      const why = malformedObject(item);
      if (why) {
        p.malformed(why);
        continue;
      }
      const obj = p.trim ? p.trim(item as T) : (item as T);
      items.set(keyOf(obj), obj);
      pageItems.push(obj);
    }
    p.onPage?.(pageItems);
    cont = typeof meta.continue === 'string' && meta.continue ? meta.continue : undefined;
    if (!cont) break;
    if (seen.has(cont)) {
      throw new Error(`GET ${p.path}: the server repeated a continue token; the list is abandoned`);
    }
    seen.add(cont);
  }
  return { items, rv };
}
