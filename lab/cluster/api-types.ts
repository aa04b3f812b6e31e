// The lab API server's shared types: stored objects, changes, options and test controls. Types
// only; every room of the server (objects, watch, controllers, http) imports them from here.
import type { AllocConfig } from './alloc.js';
import type { UserInfo } from './rbac.js';
import type { ResourceName } from './store.js';

/** A stored object: metadata as the server keeps it, the rest as written. */
export type Obj = {
  metadata: {
    name: string; namespace?: string; resourceVersion?: string; uid?: string; creationTimestamp?: string; generateName?: string;
    labels?: Record<string, string>; deletionTimestamp?: string; deletionGracePeriodSeconds?: number; generation?: number;
  };
  status?: unknown;
} & Record<string, unknown>;

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change of the store, at the resourceVersion it made. */
export interface Change { rv: number; resource: ResourceName; type: WatchType; object: Obj }

/** An injected failure: matching requests get `status` with a Status body. */
export interface Fault {
  /** Only requests for this resource (default: any). */
  resource?: ResourceName;
  /** Only this kind of request (default: any): a collection GET, a watch, or anything else. */
  verb?: 'list' | 'watch' | 'other';
  /** The HTTP status; 0: no answer at all (the request hangs until the server closes). */
  status: number;
  /** Sent as the Retry-After header (seconds), as the real server does with 429. */
  retryAfterSeconds?: number;
  /** How many requests fail (default: until clearFaults()). */
  times?: number;
  message?: string;
}

/** A request as served: `user` when authenticated with a token, `status` when it was refused (a Status answer). */
export interface RecordedRequest { method: string; path: string; query: string; body?: unknown; user?: string; status?: number }

/** The lab control plane's behaviour (see apiserver.ts). */
export interface LabOptions {
  /** Service CIDRs and the NodePort range (default DEFAULT_ALLOC). */
  alloc?: AllocConfig;
  /** Pod grace period when neither the delete nor the Pod names one (default 30 s, as the API's default). */
  defaultGraceSeconds?: number;
  /** How long an Event lives after its last write (kube-apiserver's --event-ttl; default 1 h). */
  eventTtlMs?: number;
  /** The clock Event expiry reads (ms since the epoch; default Date.now): tests move it. */
  clock?: () => number;
  /** The address the `kubernetes` Service's EndpointSlice points at (kube-apiserver's --advertise-address); none: the Service alone. */
  advertiseAddress?: string;
  /** LoadBalancer ingress IPs (IPv4 CIDR) the lab's controller hands out (loadbalancer.ts); none: no controller. */
  loadBalancerPool?: string;
  /** Draws the 5 characters of a ReplicaSet's pod names (values in [0, 1); default Math.random): tests fix it. */
  random?: () => number;
}

/** How the lab runs a command in a pod's container (pods/exec, exec.ts): the argv to spawn; throws an HttpError when the container cannot take one. */
export interface PodRuntime {
  argv(pod: Obj, container: string, command: readonly string[]): string[];
}

/** Authentication and authorization: token -> user, and RBAC documents (YAML texts). */
export interface AuthOptions {
  tokens: Map<string, UserInfo>;
  rbacYaml: string[];
}

/** Options of the server; everything is off by default (the unit tests' fake). */
export interface LabApiServerOptions {
  /** How a too-old watch resourceVersion is refused: 'event' (the real server's way) or 'http'. */
  goneAs?: 'event' | 'http';
  /** Resources answered with 404, as for a CRD that is not installed. */
  notServed?: ResourceName[];
  /** Listen address (default 127.0.0.1) and port (default: a free one). */
  host?: string;
  port?: number;
  /** Serve HTTPS with this PEM certificate and key. */
  tls?: { cert: string; key: string };
  auth?: AuthOptions;
  lab?: LabOptions;
  /** An etcd client URL (http://host:port): objects, resourceVersions, history and compaction persist there (etcd.ts); none: in memory. */
  etcd?: string;
  /** Where the lab's kubelet writes container logs (podlog.ts's layout): GET pods/NAME/log reads them; none: every log is "waiting to start". */
  podLogDir?: string;
  /** How pods/exec runs a command (exec.ts: netnsRuntime in the lab cluster); none: every exec is refused with a 400. */
  exec?: PodRuntime;
}
