// Prometheus metrics with kube-proxy's meanings under our own prefix (kubeproxy_sync_proxy_rules_*
// -> ipvsop_sync_proxy_rules_*), plus per virtual/real server IPVS counters read from the kernel
// at scrape time and labelled with the Service they came from.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { IpvsClient } from '../ipvs/types.js';
import { type IpvsStats, realServerKey, virtualServerKey } from '../model/ipvs.js';

/** Where a virtual server came from, for labels. */
export type OriginLookup = () => ReadonlyMap<string, { namespace: string; name: string; portName: string }>;

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

/** The operator's metrics in their own registry. */
/** How old the IPVS snapshot behind /metrics may be. */
export const KERNEL_SNAPSHOT_MS = 5000;

export class Metrics {
  readonly registry = new Registry();
  readonly syncDuration = new Histogram({
    name: 'ipvsop_sync_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds (one sync of IPVS, VIPs and iptables)', buckets: SYNC_BUCKETS, registers: [this.registry],
  });
  readonly lastSync = new Gauge({
    name: 'ipvsop_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced', registers: [this.registry],
  });
  readonly programmingLatency = new Histogram({
    name: 'ipvsop_network_programming_duration_seconds', help: 'From the first unsynced change seen to the kernel programmed, in seconds', buckets: PROGRAMMING_BUCKETS, registers: [this.registry],
  });
  readonly endpointChangesPending = new Gauge({
    name: 'ipvsop_sync_proxy_rules_endpoint_changes_pending', help: 'Pending proxy rules EndpointSlice changes', registers: [this.registry],
  });
  readonly endpointChanges = new Counter({
    name: 'ipvsop_sync_proxy_rules_endpoint_changes_total', help: 'Cumulative proxy rules EndpointSlice changes', registers: [this.registry],
  });
  readonly serviceChangesPending = new Gauge({
    name: 'ipvsop_sync_proxy_rules_service_changes_pending', help: 'Pending proxy rules Service changes', registers: [this.registry],
  });
  readonly serviceChanges = new Counter({
    name: 'ipvsop_sync_proxy_rules_service_changes_total', help: 'Cumulative proxy rules Service changes', registers: [this.registry],
  });
  readonly syncFailures = new Counter({
    name: 'ipvsop_sync_proxy_rules_failures_total', help: 'Syncs that failed (and were retried)', registers: [this.registry],
  });
  readonly serviceProblems = new Gauge({
    name: 'ipvsop_service_problems', help: 'Problems now (a Service\'s Event reasons, configuration problems), by reason', labelNames: ['reason'], registers: [this.registry],
  });
  readonly conntrackDeleted = new Counter({
    name: 'ipvsop_conntrack_reconciler_deleted_entries_total', help: 'Stale UDP conntrack entries deleted after a sync (kube-proxy\'s conntrack_reconciler_deleted_entries_total)', registers: [this.registry],
  });
  readonly apiMalformed = new Counter({
    name: 'ipvsop_api_malformed_total', help: 'Watch lines and list items from the API server skipped as malformed, by resource and reason', labelNames: ['resource', 'reason'], registers: [this.registry],
  });
  readonly conntrackFailures = new Counter({
    name: 'ipvsop_conntrack_cleanup_failures_total', help: 'Conntrack lists or deletes that failed (logged; the sync is not failed by them)', registers: [this.registry],
  });
  readonly opsApplied = new Counter({
    name: 'ipvsop_ipvs_ops_total', help: 'IPVS operations applied, by kind and result', labelNames: ['kind', 'result'], registers: [this.registry],
  });

  /** Adds the per-server IPVS counters, read from the kernel once per scrape. */
  private rendered: { at: number; text: Promise<string> } | undefined;

  /**
   * The /metrics text, rendered at most once per KERNEL_SNAPSHOT_MS and shared by every scrape
   * meanwhile: rendering tens of thousands of series is the scrape's real cost on the event loop
   * (and the IPVS dump behind it), so any number of scrapers costs one render per interval.
   */
  render(now: number = Date.now(), maxAgeMs = KERNEL_SNAPSHOT_MS): Promise<string> {
    if (this.rendered && now - this.rendered.at < maxAgeMs) return this.rendered.text;
    const text = this.registry.metrics();
    const entry = { at: now, text };
    this.rendered = entry;
    text.catch(() => { if (this.rendered === entry) this.rendered = undefined; });
    return text;
  }

  /**
   * Exports the kernel's per virtual and real server counters. Every scrape is served from one
   * snapshot of the IPVS table, read at most once per `snapshotMs` (default 5 s) however many
   * scrapers there are: a dump costs the sync socket's time, and eight scrapers in a loop on a
   * 5 000-Service node had pushed /healthz past 700 ms.
   */
  watchKernel(ipvs: IpvsClient, origins: OriginLookup, opts: { snapshotMs?: number; now?: () => number } = {}): void {
    const snapshotMs = opts.snapshotMs ?? KERNEL_SNAPSHOT_MS;
    const now = opts.now ?? Date.now;
    const vsLabels = ['namespace', 'service', 'port', 'virtual_server'];
    const rsLabels = [...vsLabels, 'endpoint'];
    const fields: Array<[keyof IpvsStats, string, string]> = [
      ['conns', 'connections_total', 'Connections scheduled'],
      ['inPkts', 'packets_in_total', 'Packets in'],
      ['outPkts', 'packets_out_total', 'Packets out'],
      ['inBytes', 'bytes_in_total', 'Bytes in'],
      ['outBytes', 'bytes_out_total', 'Bytes out'],
    ];
    // prom-client collects every metric of a scrape concurrently: each gauge's collect awaits the
    // same kernel read, started by whichever collect runs first; its values serve every scrape
    // until the snapshot is `snapshotMs` old. A failed read is not kept: the next scrape reads.
    let reading: Promise<void> | undefined;
    let readAt = -Infinity;
    const collect = (): Promise<void> => {
      if (reading && now() - readAt < snapshotMs) return reading;
      readAt = now();
      const r: Promise<void> = read().catch((e: unknown) => {
        if (reading === r) { reading = undefined; readAt = -Infinity; }
        throw e;
      });
      reading = r;
      return r;
    };
    const gauge = (name: string, help: string, labelNames: string[]) =>
      new Gauge({ name, help, labelNames, registers: [this.registry], collect });
    // The kernel's counters only grow (until their virtual server is re-created, which Prometheus
    // sees as a counter reset): exported as counters, set to the kernel's value at each scrape.
    const counter = (name: string, help: string, labelNames: string[]) =>
      new Counter({ name, help, labelNames, registers: [this.registry], collect });
    const vsGauges = fields.map(([f, n, h]) => [f, counter(`ipvsop_virtual_server_${n}`, `${h} (IPVS counter, virtual server)`, vsLabels)] as const);
    const rsGauges = fields.map(([f, n, h]) => [f, counter(`ipvsop_real_server_${n}`, `${h} (IPVS counter, real server)`, rsLabels)] as const);
    const active = gauge('ipvsop_real_server_active_connections', 'Active connections (IPVS)', rsLabels);
    const inactive = gauge('ipvsop_real_server_inactive_connections', 'Inactive connections (IPVS)', rsLabels);
    const all = [...vsGauges.map(([, g]) => g), ...rsGauges.map(([, g]) => g), active, inactive];

    async function read(): Promise<void> {
      const o = origins();
      const list = await ipvs.listVirtualServers();
      const rows: Array<() => void> = [];
      for (const vs of list) {
        const key = virtualServerKey(vs);
        const origin = o.get(key);
        if (!origin) continue; // foreign virtual servers are not ours to report
        const base = { namespace: origin.namespace, service: origin.name, port: origin.portName, virtual_server: key };
        rows.push(() => { for (const [f, c] of vsGauges) if (vs.stats) c.inc(base, Number(vs.stats[f])); });
        for (const rs of await ipvs.listRealServers(vs)) {
          const labels = { ...base, endpoint: realServerKey(rs) };
          rows.push(() => {
            for (const [f, c] of rsGauges) if (rs.stats) c.inc(labels, Number(rs.stats[f]));
            active.set(labels, rs.activeConns ?? 0);
            inactive.set(labels, rs.inactiveConns ?? 0);
          });
        }
      }
      // Replace all values at once, so a scrape never mixes two reads (or keeps deleted servers).
      for (const g of all) g.reset();
      for (const r of rows) r();
    }
  }
}
