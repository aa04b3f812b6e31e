// Which virtual servers the operator may change. Rule (also in the README):
//
//   The operator owns an address-keyed virtual server when its address is not in excludeCIDRs and
//   (1) it is in the desired table, or
//   (2) its address is one the operator assigned: a VIP bound on the operator's dummy interface
//       (pass the interface's current addresses, so VIPs of deleted Services still count, plus the
//       desired VIPs), or
//   (3) its address is a node address serving NodePorts and its port is in the NodePort range.
//   Firewall-mark virtual servers are never owned: the operator does not create any.
//
// Everything else (keepalived, a manual `ipvsadm -A`, another proxy on other addresses) is foreign
// and the planner emits no op for it. pure: no I/O.
import type { VirtualServer } from '../model/ipvs.js';
import { type Cidr, cidrContains, parseCidr, parseIp } from '../model/addr.js';

/** Inputs of the ownership rule. */
export interface OwnershipInput {
  /** VIPs on the operator's interface now, and the desired VIPs. */
  assignedAddresses: Iterable<string>;
  /** Node addresses serving NodePorts. */
  nodePortAddresses: Iterable<string>;
  /** Inclusive NodePort range (kube-apiserver --service-node-port-range), default 30000-32767. */
  nodePortRange?: readonly [number, number];
  excludeCIDRs?: readonly string[];
}

/** A predicate for the planner: does the operator own this (non-desired) virtual server? */
export type Owns = (vs: VirtualServer) => boolean;

/** The ownership rule above as a predicate; unparsable excludeCIDRs are ignored (config validation reports them). */
export function makeOwnership(o: OwnershipInput): Owns {
  const assigned = new Set(o.assignedAddresses);
  const nodes = new Set(o.nodePortAddresses);
  const [lo, hi] = o.nodePortRange ?? [30000, 32767];
  const excluded = (o.excludeCIDRs ?? []).map(parseCidr).filter((c): c is Cidr => c !== undefined);
  return (vs) => {
    if (vs.fwmark) return false;
    if (excluded.length) {
      const ip = parseIp(vs.address);
      if (ip && excluded.some((c) => cidrContains(c, ip))) return false;
    }
    if (assigned.has(vs.address)) return true;
    return nodes.has(vs.address) && vs.port >= lo && vs.port <= hi;
  };
}
