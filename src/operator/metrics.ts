// Prometheus metrics with kube-proxy's meanings under our own prefix (kubeproxy_sync_proxy_rules_*
// -> ipvsop_sync_proxy_rules_*), plus per virtual/real server IPVS counters read from the kernel
// at scrape time and labelled with the Service they came from.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { IpvsClient } from '../ipvs/types.js';
import { type IpvsStats, realServerKey, virtualServerKey } from '../model/ipvs.js';

/** Where a virtual server came from, for labels. */
export type OriginLookup = () => ReadonlyMap<string, { namespace: string; name: string; portName: string }>;

const buckets = [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384];

/** The operator's metrics in their own registry. */
export class Metrics {
  readonly registry = new Registry();
  readonly syncDuration = new Histogram({
    name: 'ipvsop_sync_proxy_rules_duration_seconds', help: 'Duration of one sync of IPVS (and iptables) state', buckets, registers: [this.registry],
  });
  readonly lastSync = new Gauge({
    name: 'ipvsop_sync_proxy_rules_last_timestamp_seconds', help: 'Time of the last successful sync (unix seconds)', registers: [this.registry],
  });
  readonly programmingLatency = new Histogram({
    name: 'ipvsop_network_programming_duration_seconds', help: 'From the first unsynced change seen to the kernel programmed', buckets, registers: [this.registry],
  });
  readonly pendingChanges = new Gauge({
    name: 'ipvsop_sync_proxy_rules_changes_pending', help: 'Source changes not yet synced', registers: [this.registry],
  });
  readonly syncFailures = new Counter({
    name: 'ipvsop_sync_proxy_rules_failures_total', help: 'Syncs that failed (and were retried)', registers: [this.registry],
  });
  readonly serviceProblems = new Gauge({
    name: 'ipvsop_service_problems', help: 'Problems now (a Service\'s Event reasons, configuration problems), by reason', labelNames: ['reason'], registers: [this.registry],
  });
  readonly opsApplied = new Counter({
    name: 'ipvsop_ipvs_ops_total', help: 'IPVS operations applied, by kind and result', labelNames: ['kind', 'result'], registers: [this.registry],
  });

  /** Adds the per-server IPVS counters, read from the kernel once per scrape. */
  watchKernel(ipvs: IpvsClient, origins: OriginLookup): void {
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
    // same kernel read, started by whichever collect runs first and shared until it settles.
    let reading: Promise<void> | undefined;
    const collect = (): Promise<void> => {
      reading ??= read().finally(() => setImmediate(() => { reading = undefined; }));
      return reading;
    };
    const gauge = (name: string, help: string, labelNames: string[]) =>
      new Gauge({ name, help, labelNames, registers: [this.registry], collect });
    const vsGauges = fields.map(([f, n, h]) => [f, gauge(`ipvsop_virtual_server_${n}`, `${h} (IPVS counter, virtual server)`, vsLabels)] as const);
    const rsGauges = fields.map(([f, n, h]) => [f, gauge(`ipvsop_real_server_${n}`, `${h} (IPVS counter, real server)`, rsLabels)] as const);
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
        rows.push(() => { for (const [f, g] of vsGauges) if (vs.stats) g.set(base, Number(vs.stats[f])); });
        for (const rs of await ipvs.listRealServers(vs)) {
          const labels = { ...base, endpoint: realServerKey(rs) };
          rows.push(() => {
            for (const [f, g] of rsGauges) if (rs.stats) g.set(labels, Number(rs.stats[f]));
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
