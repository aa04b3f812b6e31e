// Cluster load view, first choices: which backend each node takes when its own counters cannot
// tell the backends apart (issue 27). pure: no I/O.
//
// A node with one request in flight at a time finds every backend idle when it chooses, so `sed`
// sends it to the highest weight and, among equal highest weights, to the first in the kernel's
// list; `wrr` starts its cycle there too. Node-seeded order (order.ts) spreads those first
// choices by a hash, and a hash collides: with 4 nodes and 3 equal pods, two or three nodes
// landed on one pod in the lab while another got none. The aggregator sees every reporting node,
// so it can deal the ties out evenly: each node is given one backend of the highest-weight group,
// the group's backends given to ⌊N/G⌋ or ⌈N/G⌉ nodes each, and the node raises that backend's
// weight by one above the others of the group. One more than an equal weight changes no share
// that matters: sed at two connections in flight already compares (1+1)/(w+1) with 1/w, and wrr
// gives the chosen backend one pick more per cycle of Σw. What it changes is the idle choice.
//
// Only the highest-weight group is dealt out: a node is never pointed at a backend the view has
// weighted down. Assignments are kept across periods when they still balance, so a node's weights
// move only when the nodes or the group change.
import { rendezvousScore } from './reporting.js';

/**
 * Deals the backends of the highest weight to `nodes` as evenly as possible (counts differ by at
 * most one), keeping each node's `previous` choice where the balance allows and placing the
 * others by rendezvous score (node, backend). Empty when fewer than two backends share the highest
 * weight (nothing to break) or there is no node.
 */
export function assignFirstChoices(nodes: readonly string[], weights: ReadonlyMap<string, number>,
  previous?: ReadonlyMap<string, string>): Map<string, string> {
  const max = Math.max(...weights.values());
  const group = [...weights].filter(([, w]) => w === max).map(([b]) => b).sort();
  const out = new Map<string, string>();
  if (group.length < 2 || nodes.length === 0) return out;
  const sorted = [...new Set(nodes)].sort();
  const floor = Math.floor(sorted.length / group.length);
  // How many backends may hold floor + 1 nodes.
  let extra = sorted.length % group.length;
  const count = new Map(group.map((b) => [b, 0]));
  const room = (b: string): boolean => count.get(b)! < floor || (count.get(b)! === floor && extra > 0);
  const take = (node: string, b: string): void => {
    if (count.get(b)! === floor) extra--;
    count.set(b, count.get(b)! + 1);
    out.set(node, b);
  };
  // Kept choices first, the nodes that keep most (highest score for their backend) before others.
  const keepers = sorted.filter((n) => count.has(previous?.get(n) ?? ''))
    .sort((a, b) => rendezvousScore(b, previous!.get(b)!) - rendezvousScore(a, previous!.get(a)!) || (a < b ? -1 : 1));
  for (const n of keepers) if (room(previous!.get(n)!)) take(n, previous!.get(n)!);
  for (const n of sorted) {
    if (out.has(n)) continue;
    const open = group.filter(room);
    const least = Math.min(...open.map((b) => count.get(b)!));
    const best = open.filter((b) => count.get(b) === least)
      .reduce((x, y) => (rendezvousScore(n, y) > rendezvousScore(n, x) ? y : x));
    take(n, best);
  }
  return out;
}

/**
 * `weights` (one per real server, in order) with the node's first choice at index `chosen` raised
 * by one when it shares the highest weight with another real server; unchanged otherwise (no
 * choice, a choice no longer among the highest, or already the only highest). Never above `cap`.
 */
export function tiltFirstChoice(weights: readonly number[], chosen: number, cap: number): number[] {
  const out = [...weights];
  if (chosen < 0 || chosen >= out.length) return out;
  const max = Math.max(...out);
  if (max <= 0 || out[chosen] !== max || out.filter((w) => w === max).length < 2 || max >= cap) return out;
  out[chosen] = max + 1;
  return out;
}

/** Two assignments alike (the aggregator writes only when something moved). */
export function sameChoices(a: ReadonlyMap<string, string> | undefined, b: ReadonlyMap<string, string> | undefined): boolean {
  if ((a?.size ?? 0) !== (b?.size ?? 0)) return false;
  for (const [n, c] of a ?? []) if (b?.get(n) !== c) return false;
  return true;
}
