// A conntrack table with the kernel's semantics for what the operator does with it: a dump lists
// one family; a delete names an entry by original tuple and zone, and the kernel answers ENOENT
// when no entry has that tuple or when CTA_ID names another entry (ctnetlink_del_conntrack).
// `seed(text)` loads formatFlow lines; `dump()` prints them sorted.
import type { Family } from '../model/addr.js';
import { Errno } from '../netlink/errors.js';
import { type Flow, formatFlow, parseFlow } from './codec.js';
import type { ConntrackClient, ListStats } from './client.js';
import { ConntrackError } from './errors.js';

const tupleKey = (f: Flow): string => `${f.family} ${f.proto} ${f.zone} ${f.orig.src} ${f.orig.sport} ${f.orig.dst} ${f.orig.dport}`;

/** The fake conntrack table. */
export class FakeConntrack implements ConntrackClient {
  private readonly flows = new Map<string, Flow>();
  private nextId = 1;
  /** Every delete request seen, in order (formatFlow lines). */
  readonly deleted: string[] = [];
  /** Set to make the next list() reject (a failing socket). */
  failList: ConntrackError | undefined;
  lastList: ListStats | undefined;

  /** Adds entries from formatFlow lines (id=0 gets a fresh id); throws on a line it cannot read. */
  seed(text: string): void {
    for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
      const f = parseFlow(line);
      if (!f) throw new Error(`not a flow line: ${line}`);
      this.flows.set(tupleKey(f), { ...f, id: f.id || this.nextId++ });
    }
  }

  dump(): string {
    return [...this.flows.values()].map(formatFlow).sort().join('\n');
  }

  /** As a kernel >= 5.8: a list for one protocol is filtered before it is sent (bytes are not counted). */
  async list(family: Family, proto?: number): Promise<Flow[]> {
    if (this.failList) throw this.failList;
    const flows = [...this.flows.values()].filter((f) => f.family === family && (proto === undefined || f.proto === proto))
      .map((f) => ({ ...f, orig: { ...f.orig }, reply: { ...f.reply } }));
    this.lastList = { family, path: proto === undefined ? 'full-dump' : 'kernel-filter', messages: flows.length, bytes: 0, kept: flows.length };
    return flows;
  }

  async delete(flows: readonly Flow[]): Promise<Array<ConntrackError | undefined>> {
    return flows.map((f) => {
      this.deleted.push(formatFlow(f));
      const have = this.flows.get(tupleKey(f));
      if (!have || (f.id && f.id !== have.id)) return ConntrackError.fromErrno('delete', Errno.ENOENT);
      this.flows.delete(tupleKey(f));
      return undefined;
    });
  }

  close(): void {}
}

const _: ConntrackClient = new FakeConntrack();
