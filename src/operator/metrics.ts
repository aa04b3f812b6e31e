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
  readonly opsApplied = new Counter({
    name: 'ipvsop_ipvs_ops_total', help: 'IPVS operations applied, by kind and result', labelNames: ['kind', 'result'], registers: [this.registry],
  });

  /** Adds the per-server IPVS counters, read from the kernel on each scrape. */
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
    const vsGauges = fields.map(([f, n, h]) => [f, new Gauge({ name: `ipvsop_virtual_server_${n}`, help: `${h} (IPVS counter, virtual server)`, labelNames: vsLabels, registers: [this.registry] })] as const);
    const rsGauges = fields.map(([f, n, h]) => [f, new Gauge({ name: `ipvsop_real_server_${n}`, help: `${h} (IPVS counter, real server)`, labelNames: rsLabels, registers: [this.registry] })] as const);
    const active = new Gauge({ name: 'ipvsop_real_server_active_connections', help: 'Active connections (IPVS)', labelNames: rsLabels, registers: [this.registry] });
    const inactive = new Gauge({ name: 'ipvsop_real_server_inactive_connections', help: 'Inactive connections (IPVS)', labelNames: rsLabels, registers: [this.registry] });
    // One collect refreshes every per-server gauge; prom-client awaits it before serialising.
    const refresh = new Gauge({
      name: 'ipvsop_ipvs_scrape_virtual_servers', help: 'Virtual servers read from the kernel for this scrape', registers: [this.registry],
      collect: async () => {
        const o = origins();
        for (const [, g] of [...vsGauges, ...rsGauges]) g.reset();
        active.reset();
        inactive.reset();
        const list = await ipvs.listVirtualServers();
        refresh.set(list.length);
        for (const vs of list) {
          const key = virtualServerKey(vs);
          const origin = o.get(key);
          if (!origin) continue; // foreign virtual servers are not ours to report
          const base = { namespace: origin.namespace, service: origin.name, port: origin.portName, virtual_server: key };
          for (const [f, g] of vsGauges) if (vs.stats) g.set(base, Number(vs.stats[f]));
          for (const rs of await ipvs.listRealServers(vs)) {
            const labels = { ...base, endpoint: realServerKey(rs) };
            for (const [f, g] of rsGauges) if (rs.stats) g.set(labels, Number(rs.stats[f]));
            active.set(labels, rs.activeConns ?? 0);
            inactive.set(labels, rs.inactiveConns ?? 0);
          }
        }
      },
    });
  }
}
