// The seams between where Kubernetes objects come from (informers in src/kube/, or a YAML
// directory in src/source/files.ts) and the operator's sync loop (src/sync/).
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Problem } from '../desired/types.js';
import type { ProxyConfig } from '../config/types.js';

/** One change seen by a source. Deletions carry the last known object. */
export type SourceEvent =
  | { kind: 'service'; type: 'upsert' | 'delete'; object: V1Service }
  | { kind: 'endpointslice'; type: 'upsert' | 'delete'; object: V1EndpointSlice }
  | { kind: 'node'; type: 'upsert' | 'delete'; object: V1Node }
  /** A valid IPVSProxyConfig's spec merged over the defaults (invalid ones are reported, not sent). */
  | { kind: 'config'; type: 'upsert' | 'delete'; config: ProxyConfig };

/** Where Services, EndpointSlices, this node's Node and the config come from. */
export interface Source {
  /**
   * Starts watching. Every object present at start arrives through `onEvent` before the promise
   * resolves (the initial list); later changes arrive as they happen. While the source cannot
   * reach its backend it sends nothing (the kernel stays as it is) and keeps retrying with backoff.
   */
  start(onEvent: (e: SourceEvent) => void): Promise<void>;
  /** True once the initial list arrived and the last watch/list attempt succeeded. */
  healthy(): boolean;
  /** healthy() with when it last changed and why it is false: /healthz fails after a bound. */
  health(): SourceHealth;
  /** Stops watching; no events after it resolves. */
  stop(): Promise<void>;
}

/** A source's link to its backend, as /healthz reads it. */
export interface SourceHealth {
  /** The initial list arrived and the backend answers now (healthy()). */
  ok: boolean;
  /** When `ok` last changed, in ms since the epoch (the source's start before the first list). */
  since: number;
  /** Why not ok: the last error, for logs and the /healthz body. */
  reason?: string;
}

/** A Service an Event is about. */
export interface ServiceRef {
  namespace: string;
  name: string;
  uid?: string;
}

/**
 * Turns problems into Kubernetes Events (or log lines), deduplicated: the same reason+message for
 * the same object is posted once.
 */
export interface EventSink {
  /** Posts Events for problems not already posted; problems that went away may be posted again later. */
  report(problems: readonly Problem[], services: ReadonlyMap<string, ServiceRef>): Promise<void>;
}

/** What the operator writes into its IPVSNodeState's status. */
export interface NodeStatus {
  kernelIPVSVersion: string;
  schedulersAvailable: string[];
  virtualServers: number;
  realServers: number;
  lastSyncTime: string;
  lastSyncDurationSeconds: number;
  lastError: string;
  /** Problems now: the desired state's and one per Service whose ops the kernel refuses. */
  problems: number;
  /** Syncs failed in a row (0 after a successful one). */
  consecutiveFailedSyncs: number;
  /** The /healthz verdict when this status was written. */
  healthy: boolean;
  /** Why not healthy; empty when healthy. */
  healthReason: string;
}

/** Writes this node's IPVSNodeState status (kube), or nothing (files source). */
export interface StatusSink {
  write(status: NodeStatus): Promise<void>;
}
