// Which virtual servers the operator may change, and the record that says so. Rule (also in the
// README):
//
//   The operator owns a virtual server when its address is not in excludeCIDRs and
//   (1) it is in the desired table (it takes over a matching entry, as kube-proxy would), or
//   (2) its key is in the ownership record: every virtual server the operator created or took
//       over, kept in a file under /run (lost with the kernel's table on reboot), or
//   (3) its address is a VIP bound on the operator's own dummy interface (so an upgrade from a
//       version without the record still removes the VIPs of deleted Services).
//   Firewall-mark virtual servers are never owned: the operator does not create any.
//
// Nothing is guessed from the shape of an entry: a NodePort-looking virtual server on a node
// address that is not in the record is foreign (kube-proxy's IPVS mode beside us makes those),
// and so is everything else (keepalived, a manual `ipvsadm -A`); the planner emits no op for it.
// pure: no I/O.
import type { IpvsOp, VirtualServer } from '../model/ipvs.js';
import { virtualServerKey } from '../model/ipvs.js';
import { type Cidr, cidrContains, parseCidr, parseIp } from '../model/addr.js';

/** Inputs of the ownership rule for non-desired virtual servers. */
export interface OwnershipInput {
  /** Keys in the ownership record; undefined when there is none yet. */
  recorded?: ReadonlySet<string>;
  /** VIPs on the operator's interface now, and the desired VIPs. */
  assignedAddresses: Iterable<string>;
  excludeCIDRs?: readonly string[];
}

/** A predicate for the planner: does the operator own this (non-desired) virtual server? */
export type Owns = (vs: VirtualServer) => boolean;

/** The ownership rule above as a predicate; unparsable excludeCIDRs are ignored (config validation reports them). */
export function makeOwnership(o: OwnershipInput): Owns {
  const assigned = new Set(o.assignedAddresses);
  const excluded = (o.excludeCIDRs ?? []).map(parseCidr).filter((c): c is Cidr => c !== undefined);
  return (vs) => {
    if (vs.fwmark) return false;
    if (excluded.length) {
      const ip = parseIp(vs.address);
      if (ip && excluded.some((c) => cidrContains(c, ip))) return false;
    }
    return assigned.has(vs.address) || (o.recorded?.has(virtualServerKey(vs)) ?? false);
  };
}

/** What one sync did, for the record. */
export interface RecordUpdate {
  /** A full sync read the whole table: recorded keys the kernel no longer has are dropped. */
  full: boolean;
  /** Ops the kernel accepted. */
  applied: readonly IpvsOp[];
  /** Keys in the desired table. */
  desired: Iterable<string>;
  /** Keys in the kernel's table after the sync (the operator's cache). */
  present: ReadonlySet<string>;
}

/**
 * The record after a sync: plus every desired virtual server the kernel has (created or taken
 * over), minus those the operator deleted (and, after a full read, those that are gone).
 */
export function updateRecord(record: ReadonlySet<string>, u: RecordUpdate): Set<string> {
  const next = new Set(record);
  for (const key of u.desired) if (u.present.has(key)) next.add(key);
  for (const op of u.applied) if (op.kind === 'delete-service') next.delete(virtualServerKey(op.vs));
  if (u.full) for (const key of next) if (!u.present.has(key)) next.delete(key);
  return next;
}
