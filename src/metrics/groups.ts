// The operator's metric handles, grouped by concern (sync loop, kernel-side effects, sources, the
// cluster load view), each group registered in the one registry the Metrics class renders.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** kube-proxy's sync duration buckets: prometheus.ExponentialBuckets(0.001, 2, 15), 1 ms .. 16.4 s. */
export const SYNC_BUCKETS = Array.from({ length: 15 }, (_, i) => 0.001 * 2 ** i);

/**
 * kube-proxy's network programming buckets (pkg/proxy/metrics): 0, then 0.25 s and 0.5 s, every
 * second to 59 s, every 5 s to 115 s, every 30 s from 2 to 5 minutes.
 */
export const PROGRAMMING_BUCKETS = [
  0, 0.25, 0.5,
  ...Array.from({ length: 59 }, (_, i) => 1 + i),
  ...Array.from({ length: 12 }, (_, i) => 60 + 5 * i),
  ...Array.from({ length: 7 }, (_, i) => 120 + 30 * i),
];

/** The sync loop's series, with kube-proxy's meanings (kubeproxy_sync_proxy_rules_* -> ipvsop_*). */
export function syncMetrics(registry: Registry) {
  return {
    duration: new Histogram({
      name: 'ipvsop_sync_proxy_rules_duration_seconds',
      help: 'SyncProxyRules latency in seconds (one sync of IPVS, VIPs and iptables)', buckets: SYNC_BUCKETS,
      registers: [registry],
    }),
    lastSync: new Gauge({
      name: 'ipvsop_sync_proxy_rules_last_timestamp_seconds',
      help: 'The last time proxy rules were successfully synced',
      registers: [registry],
    }),
    programmingLatency: new Histogram({
      name: 'ipvsop_network_programming_duration_seconds',
      help: 'From the first unsynced change seen to the kernel programmed, in seconds', buckets: PROGRAMMING_BUCKETS,
      registers: [registry],
    }),
    endpointChangesPending: new Gauge({
      name: 'ipvsop_sync_proxy_rules_endpoint_changes_pending', help: 'Pending proxy rules EndpointSlice changes',
      registers: [registry],
    }),
    endpointChanges: new Counter({
      name: 'ipvsop_sync_proxy_rules_endpoint_changes_total', help: 'Cumulative proxy rules EndpointSlice changes',
      registers: [registry],
    }),
    serviceChangesPending: new Gauge({
      name: 'ipvsop_sync_proxy_rules_service_changes_pending', help: 'Pending proxy rules Service changes',
      registers: [registry],
    }),
    serviceChanges: new Counter({
      name: 'ipvsop_sync_proxy_rules_service_changes_total', help: 'Cumulative proxy rules Service changes',
      registers: [registry],
    }),
    failures: new Counter({
      name: 'ipvsop_sync_proxy_rules_failures_total', help: 'Syncs that failed (and were retried)',
      registers: [registry],
    }),
  };
}

/** Problems in what the sources delivered: Service/config problems now, malformed API items. */
export function sourceMetrics(registry: Registry) {
  return {
    serviceProblems: new Gauge({
      name: 'ipvsop_service_problems',
      help: 'Problems now (a Service\'s Event reasons, configuration problems), by reason', labelNames: ['reason'],
      registers: [registry],
    }),
    apiMalformed: new Counter({
      name: 'ipvsop_api_malformed_total',
      help: 'Watch lines and list items from the API server skipped as malformed, by resource and reason',
      labelNames: ['resource', 'reason'], registers: [registry],
    }),
  };
}

/** What syncs did to the kernel: IPVS operations and conntrack cleanup. */
export function kernelMetrics(registry: Registry) {
  return {
    conntrackDeleted: new Counter({
      name: 'ipvsop_conntrack_reconciler_deleted_entries_total',
      help: 'Stale UDP conntrack entries deleted after a sync '
        + '(kube-proxy\'s conntrack_reconciler_deleted_entries_total)',
      registers: [registry],
    }),
    conntrackFailures: new Counter({
      name: 'ipvsop_conntrack_cleanup_failures_total',
      help: 'Conntrack lists or deletes that failed (logged; the sync is not failed by them)',
      registers: [registry],
    }),
    opsApplied: new Counter({
      name: 'ipvsop_ipvs_ops_total', help: 'IPVS operations applied, by kind and result',
      labelNames: ['kind', 'result'],
      registers: [registry],
    }),
  };
}

/** The cluster load view as its leader last computed it, and the reports it refused. */
export function balanceMetrics(registry: Registry) {
  return {
    rejections: new Counter({
      name: 'ipvsop_balance_report_rejections_total',
      help: 'Node load reports (or entries) the cluster load view\'s leader refused, by reason', labelNames: ['reason'],
      registers: [registry],
    }),
    weight: new Gauge({
      name: 'ipvsop_balance_weight', help: 'Cluster load view weight per backend, as the leader last computed it',
      labelNames: ['namespace', 'service', 'port', 'backend'], registers: [registry],
    }),
    estimate: new Gauge({
      name: 'ipvsop_balance_estimate_seconds',
      help: 'Cluster load view estimate of a backend\'s mean time in system (Little\'s law), from the leader',
      labelNames: ['namespace', 'service', 'port', 'backend'], registers: [registry],
    }),
    imbalance: new Gauge({
      name: 'ipvsop_balance_imbalance',
      help: 'Imbalance index of a Service port from the cluster load view (CV of each backend\'s open connections; '
        + '0 = load in proportion to capacity), from the leader',
      labelNames: ['namespace', 'service', 'port'], registers: [registry],
    }),
  };
}
