// The cluster load view's settings: what ClusterView (cluster-view.ts) is given, and the
// constants it and its decisions (cluster-view-steps.ts) share. The model: docs/balance.md.
import type { IpvsClient } from '../ipvs/types.js';
import type { ClusterWeights } from '../balance/cluster-view.js';
import { DEFAULT_DAMPING, type DampingConfig } from '../balance/damping.js';
import type { RejectReason, ReportLimits } from '../balance/estimate.js';
import type { MoveThreshold } from '../balance/reporting.js';
import type { Log } from '../util/log.js';
import type { KubeClient } from './client.js';
import type { Healing } from './informer.js';

/** The Lease annotation the leader stamps after each aggregation. */
export const VIEW_AT_ANNOTATION = 'ipvs-operator.io/view-at';
export const LEASE_NAME = 'ipvs-operator-balance';
/** A node keeps its dealt first choice while its last report is younger than this many stale windows. */
export const DEAL_STALE_PERIODS = 10;
/**
 * The operator's damping: the model's defaults, but a backend counts as measured from 0.2 open
 * connections on average over the reporters (DEFAULT_DAMPING says 1, for a single read per
 * period). With reports carrying the mean of several reads per period, Σ active is a time
 * average: a fast backend at low load holds well under one connection on average, and at 1 the
 * view never measured it (seen in the lab experiment: no weights were ever published).
 */
export const VIEW_DAMPING: DampingConfig = { ...DEFAULT_DAMPING, minLoad: 0.2 };

export interface ClusterViewOptions {
  client: KubeClient;
  nodeName: string;
  /** Where the Lease lives (the operator's namespace). */
  namespace: string;
  ipvs: Pick<IpvsClient, 'listRealServers'>;
  /** The node's tracker, applied by the sync loop. */
  weights: ClusterWeights;
  /** The opted-in Service ports this node knows and their backends (`ip:port`), for the leader. */
  backends: () => ReadonlyMap<string, readonly string[]>;
  /** Ask the sync loop for a sync (new weights, or the view died or came back). */
  poke: () => void;
  log: Log;
  /** Reads of the active connections per period, averaged into the report (default 10). */
  readsPerPeriod?: number;
  /** false: report and apply, never lead (default true). */
  elect?: boolean;
  /** Reporting and aggregation period (default 10 s). */
  periodMs?: number;
  /**
   * K: how many nodes report each Service (rendezvous hash; the leader names them in the
   * Service's IPVSServiceWeights). 0 or undefined: every node reports every Service it has.
   */
  reporters?: number;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  limits?: Partial<ReportLimits>;
  damping?: DampingConfig;
  move?: MoveThreshold;
  healing?: Healing;
  now?: () => number;
  /** A report (or one entry) the leader refused, by reason (a metric). */
  onRejection?: (reason: RejectReason) => void;
  /** Each published Service port's estimate and weights (metrics), from the leader. */
  onEstimate?: (
    viewKey: string, estimate: ReadonlyMap<string, number | undefined>, weights: ReadonlyMap<string, number>,
    imbalance: number | undefined,
  ) => void;
}

/** Relative move of 20 %, at least 2 active or 1 conn/s, and at least every 2 periods. */
export function defaultMove(periodMs: number): MoveThreshold {
  return { relative: 0.2, minActive: 2, minRate: 1, maxSilentMs: 2 * periodMs };
}

/**
 * Writes one object and resolves with its new resourceVersion: ClusterView's put (the API calls
 * stay in cluster-view.ts), handed to its reporter and its leader side.
 */
export type PutObject = (
  collection: string, name: string, body: Record<string, unknown>, rv: string | undefined,
) => Promise<string | undefined>;
