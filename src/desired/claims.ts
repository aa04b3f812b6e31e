// Virtual server claims: every Service's claim per virtual server key, and the table of winners.
// Two Services claiming one virtual server (e.g. the same external IP and port): the
// lexicographically first "namespace/name" wins; the other gets a VirtualServerConflict. pure.
import type { DesiredVirtualServer, Problem } from './types.js';
import { Groups } from '../util/groups.js';

/** One Service's claim on a key. */
interface Claim { readonly id: string; readonly d: DesiredVirtualServer }

/** Claims per key and the desired table they elect. */
export class ClaimTable {
  /** Every Service's claim per virtual server key. */
  private readonly claims = new Groups<string, string, Claim>((c) => c.id);
  readonly table = new Map<string, DesiredVirtualServer>();

  /** Service `id`'s claim on `key`. */
  get(key: string, id: string): DesiredVirtualServer | undefined {
    return this.claims.get(key, id)?.d;
  }

  /** How many Services claim `key`. */
  count(key: string): number {
    return this.claims.size(key);
  }

  /** Sets Service `id`'s claim on `key`. */
  set(key: string, id: string, d: DesiredVirtualServer): void {
    this.claims.set(key, { id, d });
  }

  /** Drops Service `id`'s claim on `key`. */
  delete(key: string, id: string): void {
    this.claims.delete(key, id);
  }

  /** Puts the key's winner in the table; adds the key to `changed` when the winner is another object. */
  elect(key: string, changed: Set<string>): void {
    let winner: Claim | undefined;
    for (const c of this.claims.values(key)) if (!winner || c.id < winner.id) winner = c;
    const before = this.table.get(key);
    if (winner) this.table.set(key, winner.d);
    else this.table.delete(key);
    if (before !== winner?.d) changed.add(key);
  }

  /** A VirtualServerConflict for every claim that lost its key. */
  conflicts(out: Problem[]): void {
    for (const [key, claims] of this.claims.several()) {
      const winner = this.table.get(key)!;
      const winnerId = `${winner.origin.namespace}/${winner.origin.name}`;
      for (const { id } of claims) {
        if (id === winnerId) continue;
        const message = `${key} is already served by Service ${winnerId}; not programmed for this one`;
        out.push({ service: id, reason: 'VirtualServerConflict', message });
      }
    }
  }
}
