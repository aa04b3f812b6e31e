// Which virtual servers the operator may change, and the record that says so: not in
// excludeCIDRs, and desired, or in the ownership record, or on a VIP of the operator's own dummy
// link; never a firewall-mark one. Nothing is guessed from an entry's shape. pure: no I/O.
// The rule in full (also in the README): docs/plan.md ("Ownership").
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

/** A change to the record, unconditional or tied to one op's result (`op`: its index in the plan's ops). */
export interface RecordChange {
  key: string;
  op?: number;
  /** With `op`: the change holds when that op was refused, not when it was applied. */
  refused?: true;
}

/** The record's delta a plan carries: keys that go in, then keys that go out, each when its condition holds. */
export interface RecordPlan {
  add: RecordChange[];
  remove: RecordChange[];
}

/** What the record's delta is decided from. */
export interface RecordInput {
  /** A full sync: the kernel's whole table was read, and recorded keys it does not have go. */
  full: boolean;
  ops: readonly IpvsOp[];
  /** Keys in the desired table. */
  desired: ReadonlyMap<string, unknown>;
  /** The kernel's table before the sync (the operator's cache). */
  actual: ReadonlyMap<string, unknown>;
  recorded: ReadonlySet<string> | undefined;
}

/**
 * The record's delta: every desired virtual server the kernel will have after the sync goes in
 * (created by an applied add-service, or there already: taken over), those an applied
 * delete-service removes go out, and after a full read so do recorded ones the kernel does not
 * have. Only a full sync, or one that creates or deletes virtual servers, looks at the desired
 * ones; otherwise the delta is empty.
 */
export function planRecord(i: RecordInput): RecordPlan {
  const adds = new Map<string, number>();
  const deletes = new Map<string, number>();
  i.ops.forEach((op, id) => {
    if (op.kind === 'add-service') adds.set(virtualServerKey(op.vs), id);
    else if (op.kind === 'delete-service') deletes.set(virtualServerKey(op.vs), id);
  });
  const plan: RecordPlan = { add: [], remove: [] };
  if (!i.full && adds.size === 0 && deletes.size === 0) return plan;
  const wanted = i.full ? i.desired.keys() : new Set(i.ops.map((op) => virtualServerKey(op.vs)));
  for (const key of wanted) {
    if (!i.desired.has(key)) continue;
    const id = adds.get(key);
    if (i.actual.has(key)) plan.add.push({ key });
    else if (id !== undefined) plan.add.push({ key, op: id });
  }
  for (const [key, id] of deletes) plan.remove.push({ key, op: id });
  if (!i.full) return plan;
  for (const key of i.recorded ?? []) {
    if (i.actual.has(key)) continue;
    const id = i.desired.has(key) ? adds.get(key) : undefined;
    plan.remove.push(id === undefined ? { key } : { key, op: id, refused: true });
  }
  return plan;
}

/** The record after a sync: `record` with the plan's changes whose conditions hold (`refused[id]`: op `id` refused). */
export function applyRecordPlan(
  record: ReadonlySet<string>, plan: RecordPlan, refused: readonly unknown[],
): Set<string> {
  const holds = (c: RecordChange) => c.op === undefined || (c.refused ? Boolean(refused[c.op]) : !refused[c.op]);
  const next = new Set(record);
  for (const c of plan.add) if (holds(c)) next.add(c.key);
  for (const c of plan.remove) if (holds(c)) next.delete(c.key);
  return next;
}
