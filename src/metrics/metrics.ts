// Prometheus metrics with kube-proxy's meanings under our own prefix (kubeproxy_sync_proxy_rules_*
// -> ipvsop_sync_proxy_rules_*), plus per virtual/real server IPVS counters read from the kernel
// at scrape time and labelled with the Service they came from.
import { Registry } from 'prom-client';
import type { IpvsClient } from '../ipvs/types.js';
import { readDestMaps } from '../ipvs/read.js';
import { type IpvsStats, realServerKey, virtualServerKey } from '../model/ipvs.js';
import { balanceMetrics, kernelMetrics, sourceMetrics, syncMetrics } from './groups.js';

export { PROGRAMMING_BUCKETS, SYNC_BUCKETS } from './groups.js';

/** Where a virtual server came from, for labels. */
export type OriginLookup = () => ReadonlyMap<string, { namespace: string; name: string; portName: string }>;

/** How old the IPVS snapshot behind /metrics may be. */
export const KERNEL_SNAPSHOT_MS = 5000;

/** The operator's metrics in their own registry, grouped by concern (see groups.ts). */
export class Metrics {
  readonly registry = new Registry();
  readonly sync = syncMetrics(this.registry);
  readonly source = sourceMetrics(this.registry);
  readonly kernel = kernelMetrics(this.registry);
  readonly balance = balanceMetrics(this.registry);

  private rendered: { at: number; text: Promise<string> } | undefined;

  /** The leader's latest estimate, weights and imbalance of one Service port (view key ns/name/port). */
  setBalanceView(
    viewKey: string, estimate: ReadonlyMap<string, number | undefined>, weights: ReadonlyMap<string, number>,
    imbalance?: number,
  ): void {
    const [namespace = '', service = '', port = ''] = viewKey.split('/');
    if (imbalance === undefined) this.balance.imbalance.remove({ namespace, service, port });
    else this.balance.imbalance.set({ namespace, service, port }, imbalance);
    for (const [backend, w] of weights) this.balance.weight.set({ namespace, service, port, backend }, w);
    for (const [backend, e] of estimate) {
      if (e === undefined) this.balance.estimate.remove({ namespace, service, port, backend });
      else this.balance.estimate.set({ namespace, service, port, backend }, e);
    }
  }

  /** The IPVS series (watchKernel), rendered apart from prom-client's registry. */
  private kernelText: (() => Promise<string>) | undefined;

  /**
   * The /metrics text, rendered at most once per KERNEL_SNAPSHOT_MS and shared by every scrape
   * meanwhile: rendering tens of thousands of series is the scrape's real cost on the event loop
   * (and the IPVS dump behind it), so any number of scrapers costs one render per interval.
   */
  render(now: number = Date.now(), maxAgeMs = KERNEL_SNAPSHOT_MS): Promise<string> {
    if (this.rendered && now - this.rendered.at < maxAgeMs) return this.rendered.text;
    const kernel = this.kernelText;
    const text = this.registry.metrics().then(async (own) => (kernel
      ? `${own.endsWith('\n') ? own : `${own}\n`}${await kernel()}` : own));
    const entry = { at: now, text };
    this.rendered = entry;
    text.catch(() => { if (this.rendered === entry) this.rendered = undefined; });
    return text;
  }

  /**
   * Exports the kernel's per virtual and real server counters. Every scrape is served from one
   * snapshot of the IPVS table, read at most once per `snapshotMs` (default 5 s) however many
   * scrapers there are: a dump costs the sync socket's time. The series (tens of thousands on a
   * large node) are written as text here, in chunks that yield to the event loop between them,
   * not through prom-client, whose one-piece render of 140 000 series held /healthz for hundreds
   * of milliseconds.
   */
  watchKernel(ipvs: IpvsClient, origins: OriginLookup, opts: { snapshotMs?: number; now?: () => number } = {}): void {
    const snapshotMs = opts.snapshotMs ?? KERNEL_SNAPSHOT_MS;
    const now = opts.now ?? Date.now;
    let reading: Promise<string> | undefined;
    let readAt = -Infinity;
    this.kernelText = () => {
      if (reading && now() - readAt < snapshotMs) return reading;
      readAt = now();
      const r: Promise<string> = readKernel(ipvs, origins()).catch((e: unknown) => {
        if (reading === r) { reading = undefined; readAt = -Infinity; }
        throw e;
      });
      reading = r;
      return r;
    };
  }
}

/** One server's series: its label text and its counters. */
interface KernelRow { labels: string; stats?: IpvsStats; active?: number; inactive?: number }

const KERNEL_FIELDS: Array<[keyof IpvsStats, string, string]> = [
  ['conns', 'connections_total', 'Connections scheduled'],
  ['inPkts', 'packets_in_total', 'Packets in'],
  ['outPkts', 'packets_out_total', 'Packets out'],
  ['inBytes', 'bytes_in_total', 'Bytes in'],
  ['outBytes', 'bytes_out_total', 'Bytes out'],
];
/** Rows written between two yields to the event loop. */
const ROWS_PER_CHUNK = 500;

/** A Prometheus label value, escaped as the text format asks. */
function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/**
 * Reads the table (only virtual servers with a Service: foreign ones are not ours to report) and
 * writes the IPVS series in the Prometheus text format. The kernel's counters only grow (until
 * their virtual server is re-created, which Prometheus sees as a counter reset), so they are
 * counters; active and inactive connections are gauges.
 */
async function readKernel(
  ipvs: IpvsClient, o: ReadonlyMap<string, { namespace: string; name: string; portName: string }>,
): Promise<string> {
  const vsRows: KernelRow[] = [];
  const rsRows: KernelRow[] = [];
  const ours = (await ipvs.listVirtualServers()).filter((vs) => o.has(virtualServerKey(vs)));
  const dests = await readDestMaps(ipvs, ours);
  for (const [i, vs] of ours.entries()) {
    const key = virtualServerKey(vs);
    const origin = o.get(key)!;
    const base = `namespace="${labelValue(origin.namespace)}",service="${labelValue(origin.name)}",`
      + `port="${labelValue(origin.portName)}",virtual_server="${labelValue(key)}"`;
    vsRows.push({ labels: base, ...(vs.stats ? { stats: vs.stats } : {}) });
    for (const rs of dests[i]!.values()) {
      rsRows.push({ labels: `${base},endpoint="${labelValue(realServerKey(rs))}"`,
        ...(rs.stats ? { stats: rs.stats } : {}), active: rs.activeConns ?? 0, inactive: rs.inactiveConns ?? 0 });
    }
  }
  const out: string[] = [];
  const series = async (name: string, help: string, type: string, rows: readonly KernelRow[],
    value: (r: KernelRow) => number | undefined) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (let i = 0; i < rows.length; i++) {
      const v = value(rows[i]!);
      if (v !== undefined) out.push(`${name}{${rows[i]!.labels}} ${v}`);
      if (i % ROWS_PER_CHUNK === ROWS_PER_CHUNK - 1) await new Promise<void>((r) => setImmediate(r));
    }
  };
  for (const [f, n, h] of KERNEL_FIELDS) await series(`ipvsop_virtual_server_${n}`,
    `${h} (IPVS counter, virtual server)`, 'counter', vsRows, (r) => (r.stats ? Number(r.stats[f]) : undefined));
  for (const [f, n, h] of KERNEL_FIELDS) await series(`ipvsop_real_server_${n}`, `${h} (IPVS counter, real server)`,
    'counter', rsRows, (r) => (r.stats ? Number(r.stats[f]) : undefined));
  await series('ipvsop_real_server_active_connections', 'Active connections (IPVS)', 'gauge', rsRows, (r) => r.active);
  await series('ipvsop_real_server_inactive_connections', 'Inactive connections (IPVS)', 'gauge', rsRows,
    (r) => r.inactive);
  return `${out.join('\n')}\n`;
}
