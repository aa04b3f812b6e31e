// The Grafana dashboard shipped in manifests/grafana/ asks only for series the operator exports,
// with labels those series carry: its queries are checked against a real /metrics rendering (the
// operator's own registry and the IPVS series from a table with one Service in the view).
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { IpvsClient } from '../../../src/ipvs/types.js';
import { makeRealServer, makeVirtualServer, virtualServerKey } from '../../../src/model/ipvs.js';
import { Metrics } from '../../../src/metrics/metrics.js';

interface Panel { title: string; targets: Array<{ expr: string }> }
const dashboard = JSON.parse(readFileSync('manifests/grafana/ipvs-operator-balance.json', 'utf8')) as { panels: Panel[]; templating: { list: Array<{ type: string; query: string }> } };

/** Every series name of a rendering, with the label names it carries. */
async function exported(): Promise<Map<string, Set<string>>> {
  const m = new Metrics();
  // The kernel's dump as the netlink client returns it: counters on every server.
  const stats = { conns: 7n, inPkts: 1n, outPkts: 1n, inBytes: 1n, outBytes: 1n, cps: 0n, inPps: 0n, outPps: 0n, inBps: 0n, outBps: 0n };
  const vs = { ...makeVirtualServer({ family: 'IPv4', protocol: 'TCP', address: '10.96.0.1', port: 80, scheduler: 'wrr' }), stats };
  const ipvs = {
    listVirtualServers: async () => [vs],
    listRealServersMany: async (vss: unknown[]) =>
      vss.map(() => [{ ...makeRealServer({ address: '10.10.1.1', port: 8080 }), activeConns: 1, inactiveConns: 0, stats }]),
  } as unknown as IpvsClient;
  m.watchKernel(ipvs, () => new Map([[virtualServerKey(vs), { namespace: 'shop', name: 'web', portName: 'http' }]]));
  m.setBalanceView('shop/web/http', new Map([['10.10.1.1:8080', 0.05]]), new Map([['10.10.1.1:8080', 20]]), 0.3);
  m.balance.rejections.inc({ reason: 'stale' });
  const out = new Map<string, Set<string>>();
  for (const line of (await m.render(Date.now(), 0)).split('\n')) {
    const r = /^([a-z_:]+)(?:\{([^}]*)\})? /.exec(line);
    if (!r) continue;
    const labels = out.get(r[1]!) ?? new Set<string>();
    for (const l of (r[2] ?? '').matchAll(/([a-z_]+)="/g)) labels.add(l[1]!);
    out.set(r[1]!, labels);
  }
  return out;
}

const queries = [...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
  ...dashboard.templating.list.filter((v) => v.type === 'query').map((v) => v.query)];

describe('the Grafana dashboard', () => {
  it('has a panel for each thing the balancing issue asks: requests, open connections, imbalance, weights per backend', () => {
    const titles = dashboard.panels.map((p) => p.title).join('\n');
    for (const t of [/New connections per second per backend/, /Open connections per backend/, /Imbalance index/, /Cluster weights per backend/]) expect(titles).toMatch(t);
  });

  it.each(queries.map((q) => [q]))('%s: names exported series, with their labels', async (q) => {
    const series = await exported();
    const names = [...q.matchAll(/\bipvsop_[a-z_]+/g)].map((x) => x[0]);
    expect(names.length).toBeGreaterThan(0);
    for (const n of names) {
      expect({ n, exported: series.has(n) }).toEqual({ n, exported: true });
      const selector = new RegExp(`${n}\\{([^}]*)\\}`).exec(q)?.[1] ?? '';
      for (const l of selector.matchAll(/([a-z_]+)=/g)) expect({ n, label: l[1], has: series.get(n)!.has(l[1]!) }).toEqual({ n, label: l[1], has: true });
    }
    // Grouping and label_values labels: carried by the series the query reads.
    const grouped = [...q.matchAll(/by \(([^)]*)\)/g)].flatMap((b) => [...b[1]!.matchAll(/[a-z_]+/g)].map((x) => x[0]));
    const valuesOf = /label_values\([^,]+,\s*([a-z_]+)\)/.exec(q)?.[1];
    for (const l of [...grouped, ...(valuesOf ? [valuesOf] : [])]) expect({ l, onEvery: names.every((n) => series.get(n)!.has(l)) }).toEqual({ l, onEvery: true });
  });
});
