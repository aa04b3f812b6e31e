// The lab API server's watches: open watch streams, one JSON line per event as kube-apiserver
// streams them (chunked; an initial ADDED per object from resourceVersion 0; a replay from a
// given resourceVersion; 410 Gone when compaction forgot it), BOOKMARKs, and the test controls
// that make a watch misbehave (a corrupt event, a stalled stream, dropped connections).
import type { ServerResponse } from 'node:http';
import type { Change, Obj, WatchType } from './api-types.js';
import type { ObjectStore } from './objects.js';
import { sendStatus, statusObject } from './status.js';
import { RESOURCES, type Requirement, type ResourceInfo, type ResourceName, apiVersionOf, fieldAt, selects } from './store.js';
import { tableOf } from './tables.js';

/** Which objects a list or watch selects. */
export interface Filter { resource: ResourceName; namespace?: string; fields: Requirement[]; labels: Requirement[] }
interface Watcher extends Filter { res: ServerResponse; stalled?: boolean; /** kubectl get -w: each event carries a one-row Table. */ table?: boolean }

/** Whether `o` of `resource` passes the filter. */
export function matches(f: Omit<Filter, 'fields' | 'labels'> & Partial<Filter>, resource: ResourceName, o: Obj): boolean {
  return f.resource === resource && (f.namespace === undefined || o.metadata.namespace === f.namespace) &&
    selects(f.fields ?? [], (k) => fieldAt(o, k)) && selects(f.labels ?? [], (k) => o.metadata.labels?.[k]);
}

/** One watch event line: the object, or for a Table watch a one-row Table of it. */
function eventLine(w: Watcher, type: WatchType, o: Obj): string {
  return `${JSON.stringify({ type, object: w.table ? tableOf(w.resource, [o], true) : o })}\n`;
}

/**
 * Writes to a watch unless its response has ended or its socket is gone (a watch ended by its
 * timeout, or reset, stays in the set until 'close'; a write then would throw "write after end").
 */
function send(w: Watcher, text: string): void {
  if (w.res.writableEnded || w.res.destroyed) return;
  w.res.write(text);
}

export class WatchHub {
  private readonly watchers = new Set<Watcher>();
  private readonly corrupt = new Set<ResourceName>();
  private readonly stalled = new Set<ResourceName>();

  constructor(private readonly store: ObjectStore, private readonly goneAs: 'event' | 'http' = 'event') {}

  get open(): number {
    return this.watchers.size;
  }

  /**
   * Serves a watch on `res` from resourceVersion `rvText` ('' or '0': the current objects as
   * ADDED first), ended after `timeoutSeconds` when given.
   */
  serve(res: ServerResponse, filter: Filter, table: boolean, rvText: string, timeoutSeconds?: number): void {
    const w: Watcher = { ...filter, res, ...(table ? { table: true } : {}) };
    const from = rvText === '' || rvText === '0' ? undefined : Number(rvText);
    const replay = from === undefined ? undefined : this.store.changesSince(from);
    if (from !== undefined && !replay) {
      const message = `too old resource version: ${rvText} (${this.store.oldestResourceVersion})`;
      if (this.goneAs === 'http') return sendStatus(res, 410, 'Expired', message);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: statusObject(410, 'Expired', message) })}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as the real server does: clients see the watch established before any event
    if (timeoutSeconds !== undefined) {
      const timer = setTimeout(() => {
        this.watchers.delete(w); // no event may follow the end ('close' comes later)
        res.end();
      }, timeoutSeconds * 1000);
      res.on('close', () => clearTimeout(timer));
    }
    if (this.stalled.has(w.resource)) {
      w.stalled = true;
    } else if (!replay) {
      for (const o of this.store.list(w.resource)) if (matches(w, w.resource, o)) res.write(eventLine(w, 'ADDED', o));
    } else {
      for (const h of replay) if (matches(w, h.resource, h.object)) res.write(eventLine(w, h.type, h.object));
    }
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }

  /** Sends a change to every watch it matches (a corrupt line when one was asked for). */
  publish(c: Change): void {
    const corrupt = this.corrupt.delete(c.resource);
    for (const w of this.watchers) {
      if (!matches(w, c.resource, c.object) || w.stalled) continue;
      const text = eventLine(w, c.type, c.object);
      send(w, corrupt ? `${text.slice(0, Math.floor(text.length / 2))}\n` : text);
    }
  }

  /** Ends every open watch: `abrupt` resets the connections, otherwise they end cleanly (as at a watch timeout). */
  drop(abrupt: boolean): void {
    for (const w of this.watchers) {
      if (abrupt) w.res.socket?.destroy();
      else w.res.end();
    }
    this.watchers.clear();
  }

  /** Forgets every watch without writing to it (their sockets are being reset). */
  forget(): void {
    this.watchers.clear();
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch. */
  bookmark(): void {
    for (const w of this.watchers) {
      const info: ResourceInfo = RESOURCES[w.resource];
      send(w, `${JSON.stringify({ type: 'BOOKMARK', object: { kind: info.kind, apiVersion: apiVersionOf(info), metadata: { resourceVersion: String(this.store.resourceVersion) } } })}\n`);
    }
  }

  /** The next event of `resource` reaches its watchers as a malformed (truncated) JSON line. */
  corruptNext(resource: ResourceName): void {
    this.corrupt.add(resource);
  }

  /** Watches of `resource`, open and new, stay connected but send nothing until unstall(). */
  stall(resource: ResourceName): void {
    this.stalled.add(resource);
    for (const w of this.watchers) if (w.resource === resource) w.stalled = true;
  }

  /** New events reach new watches again (watches that stalled missed theirs for good, as on a dead link). */
  unstall(resource: ResourceName): void {
    this.stalled.delete(resource);
  }

  /** Ends every pending corruption and stall. */
  clearFaults(): void {
    this.corrupt.clear();
    this.stalled.clear();
  }
}
