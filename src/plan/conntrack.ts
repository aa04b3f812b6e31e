// Which conntrack entries a sync left stale, pure. kube-proxy deletes the UDP entries of a
// Service IP or NodePort whose reply source is not a serving endpoint any more
// (pkg/proxy/conntrack/cleanup.go, CleanStaleEntries), because a UDP client that keeps its socket
// keeps its flow. With IPVS the kernel would also move such a flow on its own when
// net.ipv4.vs.expire_nodest_conn=1, but only by DROPPING the flow's next datagram: IPVS sees a
// connection whose real server is gone on a conntrack entry that is already confirmed, expires it
// and drops the packet (ip_vs_in_hook, ip_vs_conn_uses_old_conntrack). Once the entry is deleted,
// that next datagram arrives on a fresh entry and IPVS schedules it to a live real server at once:
// no datagram is lost. So after a sync that deleted UDP real servers or UDP virtual servers, the
// operator deletes the entries that still lead to them.
//
// Rules (each a case in test/unit/conntrack/conntrack.test.ts):
// - only UDP address-keyed virtual servers that this sync's ops remove a real server from, or
//   delete (fwmark ones have no address to match, and TCP/SCTP flows end by themselves); the plan
//   holds one filter per such virtual server, tied to the ids of those ops, and the executor runs
//   it only when the kernel accepted at least one of them;
// - an entry is stale when its original destination is such a virtual server's address and port
//   and its reply source (the real server IPVS picked, after NAT) is not one of the real servers
//   the virtual server now has (by address AND port: kube-proxy compares addresses only, but an
//   IPVS real server is an address and a port, and a target-port change deletes the old one);
// - an entry whose reply source is the virtual server itself was never NATed (direct-return
//   tunnel flows, or a local socket on the VIP): not ours to judge, left alone.
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
