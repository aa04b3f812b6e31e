// Inputs and outputs of buildDesired: what the operator watches, how it is configured, and the
// IPVS table it wants with the side data other parts need (VIPs to bind, ipset-style entries for the
// iptables path, problems to turn into Events). pure: no I/O; client-node is imported for types only.
import type { V1EndpointSlice, V1Node, V1Service } from './kube.js';
import type { Family } from '../model/addr.js';
import type { Protocol } from '../model/ipvs.js';
import type { DesiredTable, Problem } from '../model/desired.js';

export type { DesiredTable, DesiredVirtualServer, Problem, ServiceOrigin, VipKind } from '../model/desired.js';

/** Everything buildDesired reads, as the informers (or a YAML directory) last saw it. */
export interface Snapshot {
  services: readonly V1Service[];
  endpointSlices: readonly V1EndpointSlice[];
  /** This node's Node object; undefined before it is known (then no NodePorts are programmed). */
  node: V1Node | undefined;
  nodeName: string;
}

/** What the kernel offers, as probed at startup. */
export interface KernelContext {
  /** Scheduler names the kernel has (or can load); undefined when unknown. */
  availableSchedulers?: ReadonlySet<string>;
  /** `uname -r`. */
  kernelVersion?: string;
}

/** kube-proxy's IPVS-mode ipset names: what the iptables rules match on. */
export type SetName =
  | 'KUBE-CLUSTER-IP'
  | 'KUBE-EXTERNAL-IP' | 'KUBE-EXTERNAL-IP-LOCAL'
  | 'KUBE-LOAD-BALANCER' | 'KUBE-LOAD-BALANCER-LOCAL' | 'KUBE-LOAD-BALANCER-FW' | 'KUBE-LOAD-BALANCER-SOURCE-CIDR'
  | 'KUBE-NODE-PORT-TCP' | 'KUBE-NODE-PORT-UDP' | 'KUBE-NODE-PORT-SCTP-HASH'
  | 'KUBE-NODE-PORT-LOCAL-TCP' | 'KUBE-NODE-PORT-LOCAL-UDP' | 'KUBE-NODE-PORT-LOCAL-SCTP-HASH'
  | 'KUBE-LOOP-BACK' | 'KUBE-LOAD-BALANCER-SOURCE-IP';

/** One member of a set; `address` is absent for port-only sets (NodePort TCP/UDP). */
export interface SetEntry {
  set: SetName;
  family: Family;
  protocol: Protocol;
  port: number;
  address?: string;
  /** Source CIDR (KUBE-LOAD-BALANCER-SOURCE-CIDR). */
  cidr?: string;
  /**
   * Source address, for the ip,port,ip sets: KUBE-LOOP-BACK (a local endpoint reaching itself
   * through a Service: source = address) and KUBE-LOAD-BALANCER-SOURCE-IP (the node reaching an
   * LB IP whose source ranges admit a node address: it sends from the LB IP, so source = address).
   */
  source?: string;
}

/** buildDesired's result. */
export interface Desired {
  table: DesiredTable;
  /** Addresses to bind on the dummy interface: cluster IPs, external IPs, LB ingress IPs. */
  vips: ReadonlySet<string>;
  /** Node addresses serving NodePorts. */
  nodePortAddresses: ReadonlySet<string>;
  /** Entries for the iptables path, sorted by their one-line form. */
  sets: readonly SetEntry[];
  problems: readonly Problem[];
}
