// Virtual server claims: every Service's claim per virtual server key, and the table of winners.
// Two Services claiming one virtual server (e.g. the same external IP and port): the
// lexicographically first "namespace/name" wins; the other gets a VirtualServerConflict. pure.
import type { DesiredVirtualServer, Problem } from './types.js';

/** One Service's claim on a key. */
interface Claim { readonly id: string; readonly d: DesiredVirtualServer }

/** Claims per key and the desired table they elect. */
export class ClaimTable {
  /**
   * Every Service's claim per virtual server key: the one claim, or a Map by Service id while
   * several Services claim the key. Nearly every key has one claim, and a Map each would cost
   * about 200 bytes per virtual server.
   */
  private readonly claims = new Map<string, Claim | Map<string, DesiredVirtualServer>>();
  readonly table = new Map<string, DesiredVirtualServer>();

  /** Service `id`'s claim on `key`. */
  get(key: string, id: string): DesiredVirtualServer | undefined {
    const c = this.claims.get(key);
    return c instanceof Map ? c.get(id) : c?.id === id ? c.d : undefined;
  }

  /** How many Services claim `key`. */
  count(key: string): number {
    const c = this.claims.get(key);
    return c instanceof Map ? c.size : c ? 1 : 0;
  }

  /** Sets Service `id`'s claim on `key`. */
  set(key: string, id: string, d: DesiredVirtualServer): void {
    const c = this.claims.get(key);
    if (c instanceof Map) c.set(id, d);
    else if (!c || c.id === id) this.claims.set(key, { id, d });
    else this.claims.set(key, new Map([[c.id, c.d], [id, d]]));
  }

  /** Drops Service `id`'s claim on `key`. */
  delete(key: string, id: string): void {
    const c = this.claims.get(key);
    if (!(c instanceof Map)) {
      if (c?.id === id) this.claims.delete(key);
      return;
    }
    c.delete(id);
    if (c.size === 1) {
      const [only, d] = c.entries().next().value!;
      this.claims.set(key, { id: only, d });
    }
  }

  /** Puts the key's winner in the table; adds the key to `changed` when the winner is another object. */
  elect(key: string, changed: Set<string>): void {
    let winner: DesiredVirtualServer | undefined;
    let winnerId: string | undefined;
    for (const [id, d] of this.each(key)) if (winnerId === undefined || id < winnerId) { winnerId = id; winner = d; }
    const before = this.table.get(key);
    if (winner) this.table.set(key, winner);
    else this.table.delete(key);
    if (before !== winner) changed.add(key);
  }

  /** A VirtualServerConflict for every claim that lost its key. */
  conflicts(out: Problem[]): void {
    for (const [key, c] of this.claims) {
      if (!(c instanceof Map)) continue;
      const winner = this.table.get(key)!;
      const winnerId = `${winner.origin.namespace}/${winner.origin.name}`;
      for (const [id] of c) {
        if (id === winnerId) continue;
        const message = `${key} is already served by Service ${winnerId}; not programmed for this one`;
        out.push({ service: id, reason: 'VirtualServerConflict', message });
      }
    }
  }

  /** The claims on `key` as [Service id, claim] pairs. */
  private each(key: string): Iterable<readonly [string, DesiredVirtualServer]> {
    const c = this.claims.get(key);
    return c instanceof Map ? c : c ? [[c.id, c.d]] : [];
  }
}
