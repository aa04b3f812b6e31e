// Which conntrack entries a sync left stale, pure: per UDP virtual server that this sync's ops
// remove real servers from (or delete), a filter for the entries whose reply source is no longer
// one of its real servers, run only when the kernel accepted one of those ops. Why (IPVS would
// drop the flow's next datagram instead) and the rules: docs/plan.md ("Stale UDP conntrack
// entries"); each rule is a case in test/unit/conntrack/conntrack.test.ts.
import { type Family, canonicalIP } from '../model/addr.js';
import type { IpvsOp } from '../model/ipvs.js';
import { formatHostPort, virtualServerKey } from '../model/ipvs.js';
import type { DesiredTable } from '../desired/types.js';
import type { Flow } from '../conntrack/codec.js';
import { IPPROTO_UDP } from '../conntrack/constants.js';

/** A UDP virtual server whose flows may have gone stale, and the real servers still right for it. */
export interface ConntrackTarget {
  family: Family;
  address: string;
  port: number;
  /** `addr:port` / `[addr]:port` of the real servers the virtual server has now (empty when deleted). */
  keep: ReadonlySet<string>;
}

/**
 * A conntrack deletion decided before the sync: a target, and the ids (indexes in the plan's ops)
 * of the deletions that make its flows stale. It runs when at least one of them was applied.
 */
export interface ConntrackFilter extends ConntrackTarget {
  after: readonly number[];
}

/** The filters of a plan: from its ops (ids are indexes) and the desired table they lead to. */
export function planConntrackFilters(ops: readonly IpvsOp[], table: DesiredTable): ConntrackFilter[] {
  const out = new Map<string, ConntrackTarget & { after: number[] }>();
  ops.forEach((op, id) => {
    if (op.kind !== 'delete-dest' && op.kind !== 'delete-service') return;
    const vs = op.vs;
    if (vs.protocol !== 'UDP' || vs.fwmark) return;
    const key = virtualServerKey(vs);
    const known = out.get(key);
    if (known) {
      known.after.push(id);
      return;
    }
    const address = canonicalIP(vs.address) ?? vs.address;
    const dests = table.get(key)?.dests ?? [];
    out.set(key, {
      family: vs.family, address, port: vs.port, after: [id],
      keep: new Set(dests.map((d) => formatHostPort(canonicalIP(d.address) ?? d.address, d.port))),
    });
  });
  return [...out.values()];
}

/** The filters to run after the ops: those one of whose deletions the kernel accepted (`refused[id]` unset). */
export function dueConntrack(filters: readonly ConntrackFilter[], refused: readonly unknown[]): ConntrackFilter[] {
  return filters.filter((f) => f.after.some((id) => !refused[id]));
}

/** A filter's text form: `del-conntrack UDP 10.200.1.61:53 keep 10.10.1.62:53` (`keep -` when none). */
export function formatConntrackFilter(f: ConntrackTarget): string {
  const keep = [...f.keep].sort();
  return `del-conntrack UDP ${formatHostPort(f.address, f.port)} keep ${keep.length ? keep.join(',') : '-'}`;
}

/** The entries of `flows` that lead a target's clients to a real server it no longer has. */
export function selectStaleFlows(targets: readonly ConntrackTarget[], flows: readonly Flow[]): Flow[] {
  const byDest = new Map(targets.map((t) => [`${t.family} ${formatHostPort(t.address, t.port)}`, t]));
  if (byDest.size === 0) return [];
  const out: Flow[] = [];
  for (const f of flows) {
    if (f.proto !== IPPROTO_UDP) continue;
    const dst = canonicalIP(f.orig.dst) ?? f.orig.dst;
    const t = byDest.get(`${f.family} ${formatHostPort(dst, f.orig.dport)}`);
    if (!t) continue;
    const replySrc = canonicalIP(f.reply.src) ?? f.reply.src;
    if (replySrc === dst && f.reply.sport === f.orig.dport) continue;
    if (!t.keep.has(formatHostPort(replySrc, f.reply.sport))) out.push(f);
  }
  return out;
}
