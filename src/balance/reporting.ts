// Cluster load view, who reports and when: K reporter nodes per Service by rendezvous hashing,
// and a node writes only when its values moved (issue 27). pure: no I/O.
import { fnv1a32 } from './order.js';

/** murmur3's 32-bit finaliser: spreads FNV-1a's weak low bits before comparing scores. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** Rendezvous (highest random weight) score of `node` for `service`: stable across processes. */
export function rendezvousScore(node: string, service: string): number {
  return mix32(fnv1a32(`${node}\u0000${service}`));
}

/**
 * The K nodes that report for `service`: the K highest scores (ties by name), all nodes when
 * k ≥ their number. Adding or removing a node changes at most one reporter of each Service.
 */
export function pickReporters(service: string, nodes: readonly string[], k: number): string[] {
  return nodes.map((n) => ({ n, s: rendezvousScore(n, service) }))
    .sort((a, b) => b.s - a.s || (a.n < b.n ? -1 : a.n > b.n ? 1 : 0))
    .slice(0, Math.max(0, k)).map((x) => x.n);
}

/** What a node compares: per backend, active connections and its own new-connection rate. */
export interface Reading {
  at: number;
  active: Map<string, number>;
  rate: Map<string, number>;
}

/** When a node's values count as moved. */
export interface MoveThreshold {
  /** Relative change of an active count or a rate that counts as moved (0.1 = 10 %). */
  relative: number;
  /** Changes smaller than these never count (small numbers are noisy). */
  minActive: number;
  minRate: number;
  /** Report anyway after this long, so the aggregator never sees the node as stale. */
  maxSilentMs: number;
}

/** Whether a node should write its report now: nothing sent yet, silent too long, or moved. */
export function shouldReport(sent: Reading | undefined, now: Reading, t: MoveThreshold): boolean {
  if (!sent) return true;
  if (now.at - sent.at >= t.maxSilentMs) return true;
  if (sent.active.size !== now.active.size) return true;
  const moved = (a: number, b: number, min: number): boolean =>
    Math.abs(a - b) >= Math.max(min, t.relative * Math.abs(a));
  for (const [b, a] of now.active) {
    const s = sent.active.get(b);
    if (s === undefined || moved(s, a, t.minActive)) return true;
    if (moved(sent.rate.get(b) ?? 0, now.rate.get(b) ?? 0, t.minRate)) return true;
  }
  return false;
}
