// The sync loop's seams: what the Operator is built with (OperatorDeps) and what it reports.
import type { PluginRegistry } from '../../plugins/index.js';
import type { ClusterWeights } from '../balance/cluster-view.js';
import type { Desired, Problem } from '../desired/types.js';
import type { HealthCheck } from '../desired/health-checks.js';
import type { ProxyConfig } from '../config/types.js';
import type { IpvsClient } from '../ipvs/types.js';
import type { SyncPlan } from '../plan/sync.js';
import type { VipLink } from '../rtnl/vips.js';
import type { EventSink, StatusSink } from '../source/types.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { ConntrackClient } from '../conntrack/client.js';
import type { ComponentHealth } from '../healthcheck/health.js';
import type { OwnershipRecord } from './record.js';
import type { SyncPhases } from './outcome.js';
import type { Log } from '../util/log.js';
import type { Collect } from '../util/gc.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Clock } from './runner.js';

/** What the kernel offers, probed once at start. */
export interface KernelInfo {
  release: string;
  ipvsVersion: string;
  schedulers: ReadonlySet<string>;
}

export interface OperatorDeps {
  ipvs: IpvsClient;
  vips: VipLink;
  iptables: IptablesSync;
  events: EventSink;
  status: StatusSink;
  log: Log;
  kernel: KernelInfo;
  registry: PluginRegistry;
  nodeName: string;
  metrics?: Metrics;
  clock?: Clock;
  /** The source's health (Source.health), for /healthz. */
  sourceHealth?: () => ComponentHealth;
  /** The kernel socket's health, for /healthz. */
  kernelHealth?: () => ComponentHealth;
  /**
   * Which IPVS the client talks to (NetlinkIpvs.familyId; undefined while disconnected): when it
   * changes, ip_vs was loaded again and its table, timeouts and sysctls start from scratch.
   */
  kernelGeneration?: () => number | undefined;
  /** Called when kernelGeneration changed, before the full resync it causes (sysctls, timeouts). */
  onKernelReset?: () => Promise<void>;
  /** How long a failure may last before /healthz fails; default health.ts's. */
  healthBoundMs?: number;
  /** The ownership record (record.ts); default: one in memory (tests). */
  record?: OwnershipRecord;
  /**
   * ctnetlink, for deleting the UDP conntrack entries a sync left leading to removed real servers
   * (plan/conntrack.ts says why); none: no conntrack cleanup (dry runs, tests without it).
   */
  conntrack?: ConntrackClient;
  /** Called with each plan before it is carried out: `--dry-run` prints it (formatSyncPlan). */
  onPlan?: (plan: SyncPlan) => void;
  /**
   * After each successful sync, before Events: edge work that follows the desired state (the
   * health-check servers, health-edge.ts). Its problems are reported with the others; a throw is
   * logged and keeps the previous problems.
   */
  afterSync?: (view: AfterSyncView) => Promise<readonly Problem[]>;
  /**
   * Cluster load view weights (balance/cluster-view.ts), applied before slow start; none: local
   * weights only.
   */
  clusterWeights?: ClusterWeights;
  /**
   * V8's young generation emptied (util/gc.ts), once at the end of the first sync (rehearsal.ts,
   * collectAfterFirstSync); none: no collection asked for (tests, hosts without it).
   */
  collect?: Collect;
}

/** What afterSync sees: the desired state just programmed and the configuration in force. */
export interface AfterSyncView {
  desired: Desired;
  healthChecks: readonly HealthCheck[];
  config: ProxyConfig;
}

/** The outcome of the last sync, for status and tests. */
export interface SyncReport {
  at: number;
  durationMs: number;
  /** Where durationMs went (outcome.ts, syncPhases). */
  phasesMs: SyncPhases;
  ops: number;
  /** Ops the kernel refused (each a Problem of its Service). */
  failed: number;
  full: boolean;
  /** Set when the sync itself failed. */
  error?: string;
}

/** What the VIP link and the iptables path were last made to match (planSync's `applied`). */
export interface Applied {
  vips?: number;
  iptables?: { sets: number; config: ProxyConfig };
}
