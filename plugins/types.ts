// The scheduler plugin interface. A plugin names one IPVS scheduler users can ask for with the
// `ipvs-operator.io/scheduler` annotation, the JSON schema of the options they may give with
// `ipvs-operator.io/scheduler-options`, and a pure `resolve` that turns validated options and the
// endpoints chosen for one Service port into the kernel's terms: scheduler name, service flags and
// one weight per endpoint. pure: no I/O.
import type { SchemaObject } from 'ajv';
import type { Family } from '../src/model/addr.js';

/** One endpoint as a plugin sees it: where it runs, and what it is, from its EndpointSlice. */
export interface PluginEndpoint {
  address: string;
  port: number;
  family: Family;
  /** EndpointSlice `endpoints[].nodeName`. */
  nodeName?: string;
  /** EndpointSlice `endpoints[].zone`. */
  zone?: string;
  /** EndpointSlice `endpoints[].hostname`. */
  hostname?: string;
  /** `targetRef.name` when the target is a Pod: the only pod identity a slice carries. */
  podName?: string;
  /** Labels of the EndpointSlice the endpoint came from (not the Pod's: we do not watch Pods). */
  sliceLabels: Readonly<Record<string, string>>;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  /** Runs on this node (nodeName equals the operator's node). */
  local: boolean;
  /** EndpointSlice `endpoints[].hints.forZones[].name` (topology-aware routing); absent when none. */
  zoneHints?: readonly string[];
  /** EndpointSlice `endpoints[].hints.forNodes[].name` (trafficDistribution PreferSameNode); absent when none. */
  nodeHints?: readonly string[];
}

/** What a plugin may know about where it runs. */
export interface PluginContext {
  /** This node's name. */
  nodeName: string;
  /** This node's `topology.kubernetes.io/zone` label, when known. */
  nodeZone?: string;
  /** Schedulers the kernel offers; undefined when unknown (then only `minKernel` is checked). */
  availableSchedulers?: ReadonlySet<string>;
  /** `uname -r`, e.g. "6.1.0-18-amd64"; undefined when unknown. */
  kernelVersion?: string;
}

/** A plugin's answer for one virtual server. */
export interface Resolution {
  /** Kernel scheduler name (<= 15 characters). */
  scheduler: string;
  /** IP_VS_SVC_F_SCHED* bits (never PERSISTENT/HASHED: affinity comes from the Service). */
  flags: number;
  /** One weight per endpoint given to `resolve`, same order; 0 keeps an endpoint idle. */
  weights: number[];
  /** Persistence netmasks used when the Service has ClientIP affinity (prefix lengths). */
  persistence?: { ipv4Prefix?: number; ipv6Prefix?: number };
}

/** What the cluster load view says of one Service port, read-only (docs/balance.md). */
export interface ClusterViewInput {
  /**
   * The published weight (1..20) per backend `ip:port` (`[ip]:port` for IPv6); a backend not named
   * is new to the view.
   */
  readonly weights: ReadonlyMap<string, number>;
  /**
   * The backend the aggregator dealt this node (nodes are dealt over the backends in proportion to
   * the weights, so that idle nodes do not all pick one backend); absent when none. After `weigh`,
   * whatever it answers, the operator makes it the node's idle choice: for sed one above the
   * highest other weight, for other schedulers one more only when it ties for the highest.
   */
  readonly firstChoice?: string;
}

/** A real server as `weigh` sees it: where it is and the weight `resolve` gave it. */
export interface WeighedEndpoint {
  readonly address: string;
  readonly port: number;
  readonly weight: number;
}

/** A scheduler plugin: built-in (plugins/<name>.ts) or loaded from the extra plugin directory. */
export interface SchedulerPlugin {
  /** Annotation value selecting it: lowercase letters, digits and dashes. */
  readonly name: string;
  /** One line for `--help`, the README and problem messages. */
  readonly description: string;
  /** Kernel scheduler it programs (IPVS_SVC_ATTR_SCHED_NAME). */
  readonly kernelScheduler: string;
  /** Kernel module providing it (ip_vs_<scheduler>). */
  readonly kernelModule: string;
  /** Oldest kernel with the scheduler, "major.minor"; undefined when every supported kernel has it. */
  readonly minKernel?: string;
  /** JSON schema (ajv, draft-07) of the options object; `{}` is what users get by default. */
  readonly optionsSchema: SchemaObject;
  /** Resolves options already validated against `optionsSchema` (defaults filled in). */
  resolve(options: unknown, endpoints: readonly PluginEndpoint[], context: PluginContext): Resolution;
  /**
   * Optional, for Services in the cluster load view (`ipvs-operator.io/balance: cluster`): the
   * weights to program from `resolve`'s and the view's, one integer >= 0 per endpoint in the same
   * order. Called whenever the view's weights change; pure. Without it a real server gets its
   * weight × the view's (20 for a backend the view does not name yet). A throw or an answer of the
   * wrong shape falls back to that, for this Service alone, with a PluginWeighFailed problem.
   */
  weigh?(endpoints: readonly WeighedEndpoint[], view: ClusterViewInput): number[];
  /**
   * Optional, for Services with slow start (`ipvs-operator.io/slow-start`): the weights to program
   * from each endpoint's weight (after `weigh`, when in the view) and its ramp's progress, one
   * integer >= 0 per endpoint in the same order. Called at every step of a ramp and whenever the
   * Service's weights change; pure. Without it an endpoint gets weight × 100 × progress, at least
   * 1 (src/balance/weights.ts). A throw or an answer of the wrong shape falls back to that, for
   * this Service alone, with a PluginRampFailed problem.
   */
  ramp?(endpoints: readonly RampingEndpoint[]): number[];
}

/** An endpoint as `ramp` sees it: a WeighedEndpoint and how far its slow start is. */
export interface RampingEndpoint extends WeighedEndpoint {
  /** The ramp's progress in [0, 1]: 0 just joined, 1 established (steps of the window / 20). */
  readonly factor: number;
}
