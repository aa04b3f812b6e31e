// Cluster load view, first choices: which backend each node takes when its own counters cannot
// tell the backends apart (issue 27). The aggregator deals the nodes out over the backends in
// proportion to the published weights (largest remainder, keeping each node's previous choice
// while its quota allows); above DEAL_MAX_NODES each node takes its own by weighted rendezvous
// hashing (localFirstChoice). How a node applies its choice depends on its scheduler
// (tiltFirstChoice). Why (`sed` at low concurrency is winner-take-all per node): docs/balance.md
// ("First choices"). pure: no I/O.
import { fnv1a32 } from './order.js';
import { mix32, rendezvousScore } from './reporting.js';

/** The most nodes a published first-choice map names; above it each node chooses by localFirstChoice. */
export const DEAL_MAX_NODES = 64;

/**
 * Deals `nodes` over the backends of `weights` in proportion to them (counts within one of
 * N × w / Σw), keeping each node's `previous` choice where its backend's quota allows and placing
 * the others by rendezvous score (node, backend). Empty when there are fewer than two backends
 * with a weight, no node, or more than DEAL_MAX_NODES nodes (each then takes localFirstChoice).
 */
export function assignFirstChoices(nodes: readonly string[], weights: ReadonlyMap<string, number>,
  previous?: ReadonlyMap<string, string>): Map<string, string> {
  const backends = [...weights].filter(([, w]) => w > 0).sort(([a], [b]) => (a < b ? -1 : 1));
  const out = new Map<string, string>();
  const sorted = [...new Set(nodes)].sort();
  if (backends.length < 2 || sorted.length === 0 || sorted.length > DEAL_MAX_NODES) return out;
  const total = backends.reduce((s, [, w]) => s + w, 0);
  // Largest remainder: floors first, then one more to the largest fractions (ties by weight, name).
  const exact = backends.map(([b, w]) => ({ b, w, q: (sorted.length * w) / total }));
  const quota = new Map(exact.map((x) => [x.b, Math.floor(x.q)]));
  let left = sorted.length - [...quota.values()].reduce((s, q) => s + q, 0);
  const byRemainder = (a: typeof exact[number], b: typeof exact[number]) =>
    (b.q - Math.floor(b.q)) - (a.q - Math.floor(a.q)) || b.w - a.w || (a.b < b.b ? -1 : 1);
  for (const x of [...exact].sort(byRemainder)) {
    if (left-- <= 0) break;
    quota.set(x.b, quota.get(x.b)! + 1);
  }
  const take = (node: string, b: string): void => {
    quota.set(b, quota.get(b)! - 1);
    out.set(node, b);
  };
  // Kept choices first, the nodes that keep most (highest score for their backend) before others.
  const keepers = sorted.filter((n) => quota.has(previous?.get(n) ?? ''))
    .sort((a, b) => rendezvousScore(b, previous!.get(b)!) - rendezvousScore(a, previous!.get(a)!) || (a < b ? -1 : 1));
  for (const n of keepers) if (quota.get(previous!.get(n)!)! > 0) take(n, previous!.get(n)!);
  for (const n of sorted) {
    if (out.has(n)) continue;
    const open = backends.map(([b]) => b).filter((b) => quota.get(b)! > 0);
    take(n, open.reduce((x, y) => (rendezvousScore(n, y) > rendezvousScore(n, x) ? y : x)));
  }
  return out;
}

/**
 * A node's own first choice when none was dealt to it: weighted rendezvous hashing (each backend
 * scored −ln(u) / w with u uniform from a hash of node, Service port and backend; the lowest
 * wins), so backend b is chosen with probability w_b / Σw, and the same inputs give the same
 * choice on every run. Undefined without a node name or a backend of positive weight.
 */
export function localFirstChoice(
  node: string, viewKey: string, weights: ReadonlyMap<string, number>,
): string | undefined {
  if (!node) return undefined;
  let best: string | undefined;
  let bestScore = Infinity;
  for (const [b, w] of [...weights].sort(([a], [c]) => (a < c ? -1 : 1))) {
    if (!(w > 0)) continue;
    const u = (mix32(fnv1a32(`${node}\u0000${viewKey}\u0000${b}`)) + 0.5) / 4294967296;
    const score = -Math.log(u) / w;
    if (score < bestScore) [best, bestScore] = [b, score];
  }
  return best;
}

/** Kernel schedulers whose idle choice is the highest weight alone (ip_vs_sed.c: least (0 + 1) / w). */
export const IDLE_BY_WEIGHT: ReadonlySet<string> = new Set(['sed']);

/**
 * `weights` (one per real server, in order) with the node's first choice at index `chosen` made
 * its idle choice:
 * - `sed` (IDLE_BY_WEIGHT): the choice raised to one above the highest other weight, unless it is
 *   the only highest already. sed's idle choice is then the choice; with connections open its
 *   share is that of the raised weight, a cost stated in docs/balance.md.
 * - any other scheduler: raised by one only when it ties for the highest weight (wrr starts its
 *   cycle at the highest weight; one more pick per cycle of Σw is all it changes), else unchanged:
 *   raising a lower weight would change a share, which is what wrr's weights are.
 * Never above `cap`; a quiesced real server (0) is never raised; unchanged when `chosen` is out of range.
 */
export function tiltFirstChoice(weights: readonly number[], chosen: number, cap: number, scheduler = ''): number[] {
  const out = [...weights];
  if (chosen < 0 || chosen >= out.length || out[chosen]! <= 0) return out;
  const othersMax = Math.max(0, ...out.filter((_, i) => i !== chosen));
  if (out[chosen]! > othersMax || othersMax + 1 > cap) return out;
  if (!IDLE_BY_WEIGHT.has(scheduler) && out[chosen] !== othersMax) return out;
  out[chosen] = othersMax + 1;
  return out;
}

/** Two assignments alike (the aggregator writes only when something moved). */
export function sameChoices(
  a: ReadonlyMap<string, string> | undefined, b: ReadonlyMap<string, string> | undefined,
): boolean {
  if ((a?.size ?? 0) !== (b?.size ?? 0)) return false;
  for (const [n, c] of a ?? []) if (b?.get(n) !== c) return false;
  return true;
}
