// The table the operator wants, as a value: each virtual server with its real servers and the
// Service port it came from, and the problems found while building it. Built by src/desired/,
// read by the plan, the balance overlays and the status; pure types.
import type { RealServer, VirtualServer } from './ipvs.js';

/** A user error found while building, for an Event on the Service (service "" = configuration). */
export interface Problem {
  /** "namespace/name", or "" for operator configuration. */
  service: string;
  /** CamelCase, as an Event reason: UnknownScheduler, InvalidSchedulerOptions, ... */
  reason: string;
  message: string;
}

/** How traffic reaches a virtual server, as kube-proxy names the VIP kinds. */
export type VipKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

/** Which Service port a virtual server came from (for status, metrics labels and conflicts). */
export interface ServiceOrigin {
  namespace: string;
  name: string;
  /** Service port name ("" when unnamed). */
  portName: string;
  kind: VipKind;
  /** Scheduler plugin that resolved it. */
  plugin: string;
}

/**
 * A virtual server we want, with its real servers in the order to add them: sorted by key and
 * rotated per node (balance/order.ts), or sorted with `ipvs-operator.io/endpoint-order: sorted`.
 */
export interface DesiredVirtualServer {
  vs: VirtualServer;
  dests: readonly RealServer[];
  origin: ServiceOrigin;
  /** Slow-start window (ms) when the Service asks for one and its scheduler uses weights as shares. */
  slowStartMs?: number;
  /**
   * The Service opted into the cluster load view and its scheduler uses weights as shares
   * (balance/cluster-view.ts).
   */
  clusterBalance?: true;
}

/** The table we want, keyed by virtualServerKey. */
export type DesiredTable = ReadonlyMap<string, DesiredVirtualServer>;
