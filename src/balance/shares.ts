// `status --service`: each backend of a Service across the cluster, from the nodes' reports and
// the published weights, and its table. pure.
import { isRecord, parseReportObject } from './view-objects.js';

/** One backend's line in `status --service`: the cluster's view of it. */
export interface BackendShare {
  port: string;
  backend: string;
  weight?: number;
  estimateSeconds?: number;
  active: number;
  conns: number;
  /** Nodes whose report names this backend. */
  nodes: number;
  /** Nodes dealt this backend as their first choice (first-choice.ts); absent when none were dealt. */
  firstOf?: number;
}

/**
 * Each backend of a Service across the cluster, from every node's report and the published
 * weights: Σ active and Σ new connections (since each node added it), and the weight in force.
 */
export function clusterShares(service: string, reports: readonly unknown[], weights: unknown): BackendShare[] {
  const out = new Map<string, BackendShare>();
  const line = (port: string, backend: string) => {
    const k = `${port} ${backend}`;
    const l = out.get(k) ?? { port, backend, active: 0, conns: 0, nodes: 0 };
    out.set(k, l);
    return l;
  };
  for (const r of reports) {
    const parsed = parseReportObject(r);
    if ('error' in parsed) continue;
    for (const [vk, rep] of parsed.reports) {
      if (!vk.startsWith(`${service}/`)) continue;
      for (const b of rep.backends) {
        if (typeof b?.backend !== 'string') continue;
        const l = line(vk.slice(service.length + 1), b.backend);
        l.active += Number(b.active) || 0;
        l.conns += Number(b.conns) || 0;
        l.nodes++;
      }
    }
  }
  const spec = isRecord(weights) && isRecord(weights.spec) ? weights.spec : undefined;
  for (const p of Array.isArray(spec?.ports) ? spec.ports : []) {
    if (!isRecord(p) || typeof p.port !== 'string') continue;
    for (const [b, w] of Object.entries(isRecord(p.weights) ? p.weights : {})) {
      if (typeof w === 'number') line(p.port, b).weight = w;
    }
    for (const [b, e] of Object.entries(isRecord(p.estimates) ? p.estimates : {})) {
      if (typeof e === 'number') line(p.port, b).estimateSeconds = e;
    }
    if (isRecord(p.firstChoices)) {
      for (const b of Object.keys(isRecord(p.weights) ? p.weights : {})) line(p.port, b).firstOf = 0;
      for (const b of Object.values(p.firstChoices)) {
        if (typeof b === 'string') { const l = line(p.port, b); l.firstOf = (l.firstOf ?? 0) + 1; }
      }
    }
  }
  return [...out.values()].sort((a, b) =>
    (a.port === b.port ? (a.backend < b.backend ? -1 : 1) : a.port < b.port ? -1 : 1));
}

/** `status --service`'s table: one line per port and backend, with its share of the cluster's new connections. */
export function renderShares(service: string, shares: readonly BackendShare[], leader: string | undefined): string {
  const total = new Map<string, number>();
  for (const s of shares) total.set(s.port, (total.get(s.port) ?? 0) + s.conns);
  const lines = [
    `${service}: cluster load view${leader ? ` (weights from ${leader})` : ' (no weights published: local weights)'}`,
    `${'PORT'.padEnd(10)} ${'BACKEND'.padEnd(24)} ${'WEIGHT'.padStart(6)} ${'EST ms'.padStart(8)} ` +
    `${'ACTIVE'.padStart(7)} ${'CONNS'.padStart(10)} ${'SHARE'.padStart(7)} ${'NODES'.padStart(5)} ` +
    `${'FIRST'.padStart(5)}`];
  for (const s of shares) {
    const t = total.get(s.port) ?? 0;
    lines.push(
      `${(s.port || '-').padEnd(10)} ${s.backend.padEnd(24)} ${String(s.weight ?? '-').padStart(6)} ` +
      `${(s.estimateSeconds === undefined ? '-' : (s.estimateSeconds * 1000).toFixed(0)).padStart(8)} ` +
      `${String(s.active).padStart(7)} ${String(s.conns).padStart(10)} ` +
      `${(t ? `${((100 * s.conns) / t).toFixed(1)}%` : '-').padStart(7)} ${String(s.nodes).padStart(5)} ` +
      `${String(s.firstOf ?? '-').padStart(5)}`);
  }
  if (shares.length === 0) lines.push(
    '(no node reports this Service: is it annotated ipvs-operator.io/balance: cluster?)');
  return lines.join('\n');
}
