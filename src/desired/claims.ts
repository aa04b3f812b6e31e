// Virtual server claims: every Service's claim per virtual server key, and the table of winners.
// Two Services claiming one virtual server (e.g. the same external IP and port): the
// lexicographically first "namespace/name" wins; the other gets a VirtualServerConflict. pure.
import type { DesiredVirtualServer, Problem } from './types.js';

/** Claims per key and the desired table they elect. */
export class ClaimTable {
  /** Every Service's claim per virtual server key; the winner is in `table`. */
  readonly claims = new Map<string, Map<string, DesiredVirtualServer>>();
  readonly table = new Map<string, DesiredVirtualServer>();

  /** Puts the key's winner in the table; adds the key to `changed` when the winner is another object. */
  elect(key: string, changed: Set<string>): void {
    const c = this.claims.get(key);
    let winner: DesiredVirtualServer | undefined;
    let winnerId: string | undefined;
    for (const [id, d] of c ?? []) if (winnerId === undefined || id < winnerId) { winnerId = id; winner = d; }
    const before = this.table.get(key);
    if (winner) this.table.set(key, winner);
    else this.table.delete(key);
    if (before !== winner) changed.add(key);
  }

  /** A VirtualServerConflict for every claim that lost its key. */
  conflicts(out: Problem[]): void {
    for (const [key, c] of this.claims) {
      if (c.size < 2) continue;
      const winner = this.table.get(key)!;
      const winnerId = `${winner.origin.namespace}/${winner.origin.name}`;
      for (const [id] of c) {
        if (id === winnerId) continue;
        const message = `${key} is already served by Service ${winnerId}; not programmed for this one`;
        out.push({ service: id, reason: 'VirtualServerConflict', message });
      }
    }
  }
}
