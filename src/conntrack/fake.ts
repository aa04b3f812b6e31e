// A conntrack table with the kernel's semantics for what the operator does with it, checked against
// the kernel by the contract in test/support/conntrack-contract.ts: a dump lists one family; a
// delete names an entry by a tuple and zone, found in either direction (the kernel hashes both),
// and the kernel answers ENOENT when no entry has that tuple or when CTA_ID names another entry
// (ctnetlink_del_conntrack). What the client refuses before sending, the fake refuses the same way.
// `seed(text)` loads formatFlow lines; `dump()` prints them sorted.
import type { Family } from '../model/addr.js';
import { Errno } from '../netlink/errors.js';
import { type Flow, encodeDelete, encodeDump, formatFlow, parseFlow } from './codec.js';
import type { ConntrackClient, ListStats } from './client.js';
import { ConntrackError } from './errors.js';

type Tuple = Flow['orig'];
const tupleKey = (f: Flow, t: Tuple = f.orig): string =>
  `${f.family} ${f.proto} ${f.zone} ${t.src} ${t.sport} ${t.dst} ${t.dport}`;

/** The fake conntrack table. */
export class FakeConntrack implements ConntrackClient {
  /** Entries by original tuple key. */
  private readonly flows = new Map<string, Flow>();
  private nextId = 1;
  /** Every delete request sent, in order (formatFlow lines; flows refused before sending are not). */
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
    // The client's refusal of a protocol it cannot ask for, by building its request.
    encodeDump(family, 0, 0, proto);
    if (this.failList) throw this.failList;
    const flows = [...this.flows.values()].filter((f) =>
      f.family === family && (proto === undefined || f.proto === proto))
      .map((f) => ({ ...f, orig: { ...f.orig }, reply: { ...f.reply } }));
    this.lastList = { family, path: proto === undefined ? 'full-dump' : 'kernel-filter', messages: flows.length,
      bytes: 0, kept: flows.length };
    return flows;
  }

  async delete(flows: readonly Flow[]): Promise<Array<ConntrackError | undefined>> {
    return flows.map((f) => {
      try {
        // The client's refusals (no ports, a zone or port out of range, an address of another
        // family), by building its request.
        encodeDelete(f, 0, 0);
      } catch (e) {
        return e as ConntrackError;
      }
      this.deleted.push(formatFlow(f));
      const have = this.find(f);
      if (!have || (f.id && f.id !== have.id)) return ConntrackError.fromErrno('delete', Errno.ENOENT);
      this.flows.delete(tupleKey(have));
      return undefined;
    });
  }

  close(): void {}

  /** The entry whose original or reply tuple is `f`'s original one, in `f`'s zone (nf_conntrack_find_get). */
  private find(f: Flow): Flow | undefined {
    const key = tupleKey(f);
    return this.flows.get(key) ?? [...this.flows.values()].find((h) => tupleKey(h, h.reply) === key);
  }
}

const _: ConntrackClient = new FakeConntrack();
