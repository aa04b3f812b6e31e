// The balance experiment's chart as SVG text (README, docs/balance-measure.md): one panel per
// results.json of `lab balance`, one row per mode and placement; on the left each pod's share of
// the requests (stacked, medians over the repeats), on the right p50 and p95 on a log axis shared
// by all panels, each a marker at the median with a whisker over the repeats' min-max.
// pure: no I/O (`lab balance-chart` reads the files and writes chart.svg and chart.png).
import { BAR_H, FONT, LABEL_X, ROW_H, latencyAxis } from '../compare/chart.js';
import type { RunSummary } from './balance-stats.js';

/** One run of results.json (the fields the chart uses). */
export type BalanceRun = Pick<RunSummary, 'mode' | 'placement' | 'concurrency' | 'byBackend' | 'p50' | 'p95'>;

/** One panel: a results.json with its title and a line saying how it was run. */
export interface BalancePanel {
  title: string;
  note: string;
  backends: string[];
  runs: BalanceRun[];
}

const W = 1000;
const SHARE_X = 250;
const SHARE_W = 260;
const LAT_X = 550;
const LAT_W = W - LAT_X - 30;
const COLORS = ['#4e79a7', '#f28e2b', '#e15759'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n1 = (v: number) => (Math.round(v * 10) / 10).toString();

/** Median (the mean of the two middle ones for an even count, as the tables' medians) and range. */
export function spread(xs: readonly number[]): { median: number; min: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return { median: m, min: s[0]!, max: s[s.length - 1]! };
}

/** How a mode reads in the chart: `sed+balance=cluster` as "sed + cluster view". */
export function balanceModeLabel(mode: string, placement: string, concurrency: number): string {
  const name = mode === 'iptables' ? 'kube-proxy iptables' : mode.split('+').map((p) => (p === 'balance=cluster' ? 'cluster view' : p)).join(' + ');
  return `${name}${placement === 'one' ? ' (all on one node)' : ''}${concurrency > 1 ? ` ×${concurrency}` : ''}`;
}

/** Rows of a panel: modes in the order they first appear, each with its repeats. */
export function panelRows(runs: readonly BalanceRun[]): Array<{ label: string; runs: BalanceRun[] }> {
  const rows = new Map<string, BalanceRun[]>();
  for (const r of runs) {
    const k = balanceModeLabel(r.mode, r.placement, r.concurrency);
    rows.set(k, [...(rows.get(k) ?? []), r]);
  }
  return [...rows].map(([label, rs]) => ({ label, runs: rs }));
}

export function renderBalanceChart(panels: readonly BalancePanel[], title: string): string {
  const axis = latencyAxis(panels.flatMap((p) => p.runs.flatMap((r) => [r.p50, r.p95])));
  const lx = (ms: number) => LAT_X + (LAT_W * (Math.log(Math.max(ms, axis.lo)) - Math.log(axis.lo))) / (Math.log(axis.hi) - Math.log(axis.lo));
  const out: string[] = [];
  const text = (x: number, y: number, s: string, attrs = '') => out.push(`<text x="${n1(x)}" y="${n1(y)}"${attrs}>${esc(s)}</text>`);
  let y = 26;
  text(LABEL_X, y, title, ' font-size="17" font-weight="bold"');
  y += 22;
  out.push(`<circle cx="${LAT_X + 6}" cy="${y - 4}" r="4" fill="#8a6d00"/>`);
  text(LAT_X + 16, y, 'p50');
  out.push(`<rect x="${LAT_X + 58}" y="${y - 8}" width="8" height="8" fill="#333"/>`);
  text(LAT_X + 72, y, 'p95 (median, min-max of the repeats)');
  text(SHARE_X, y, 'share of requests per pod', ' fill="#444"');
  for (const p of panels) {
    y += 30;
    text(LABEL_X, y, p.title, ' font-size="14" font-weight="bold"');
    y += 16;
    text(LABEL_X, y, p.note, ' fill="#444" font-size="11"');
    y += 16;
    let x = SHARE_X;
    p.backends.forEach((b, i) => {
      out.push(`<rect x="${x}" y="${y - 9}" width="10" height="10" fill="${COLORS[i % COLORS.length]}"/>`);
      text(x + 14, y, b, ' font-size="11"');
      x += 24 + b.length * 7;
    });
    y += 6;
    const top = y;
    const rows = panelRows(p.runs);
    rows.forEach((row, i) => {
      const ry = top + i * ROW_H;
      if (i % 2 === 0) out.push(`<rect x="0" y="${ry}" width="${W}" height="${ROW_H}" fill="#f4f6f8"/>`);
      const cy = ry + ROW_H / 2;
      text(LABEL_X, cy + 4, row.label);
      const shares = p.backends.map((_, bi) => spread(row.runs.map((r) => r.byBackend[bi] ?? 0)).median);
      const total = Math.max(1, shares.reduce((a, b) => a + b, 0));
      let sx = SHARE_X;
      shares.forEach((s, bi) => {
        const w = (SHARE_W * s) / total;
        if (w <= 0) return;
        out.push(`<rect x="${n1(sx)}" y="${cy - BAR_H / 2}" width="${n1(w)}" height="${BAR_H}" fill="${COLORS[bi % COLORS.length]}"/>`);
        if (w > 30) text(sx + w / 2, cy + 4, `${Math.round((100 * s) / total)}%`, ' text-anchor="middle" fill="#fff" font-size="10"');
        sx += w;
      });
      const p50 = spread(row.runs.map((r) => r.p50));
      const p95 = spread(row.runs.map((r) => r.p95));
      out.push(`<line x1="${n1(lx(p50.min))}" y1="${cy - 3}" x2="${n1(lx(p50.max))}" y2="${cy - 3}" stroke="#8a6d00"/>`);
      out.push(`<line x1="${n1(lx(p95.min))}" y1="${cy + 3}" x2="${n1(lx(p95.max))}" y2="${cy + 3}" stroke="#333"/>`);
      out.push(`<circle cx="${n1(lx(p50.median))}" cy="${cy - 3}" r="4" fill="#8a6d00"/>`);
      out.push(`<rect x="${n1(lx(p95.median) - 4)}" y="${cy - 1}" width="8" height="8" fill="#333"/>`);
      text(LAT_X + LAT_W + 4, cy + 4, `${Math.round(p95.median)}`, ' font-size="10" fill="#333"');
    });
    y = top + rows.length * ROW_H;
    out.push(`<line x1="${LAT_X}" y1="${y}" x2="${LAT_X + LAT_W}" y2="${y}" stroke="#888"/>`);
    for (const t of axis.ticks) {
      const tx = lx(t);
      out.push(`<line x1="${n1(tx)}" y1="${top}" x2="${n1(tx)}" y2="${y + 4}" stroke="#ccc" stroke-dasharray="2,3"/>`);
      text(tx, y + 15, `${t} ms`, ' text-anchor="middle" font-size="10" fill="#444"');
    }
    y += 16;
  }
  y += 14;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="${FONT}" font-size="12">\n` +
    `<rect width="${W}" height="${y}" fill="#fff"/>\n${out.join('\n')}\n</svg>\n`;
}

/**
 * A panel from a parsed results.json of `lab balance`: its profile as the title, the pods with
 * their service times (from the header), and `note` (where and how it was run) under it.
 */
export function panelFromResults(results: unknown, note: string): BalancePanel {
  const r = results as { header?: unknown; runs?: unknown };
  if (typeof r?.header !== 'string' || !Array.isArray(r.runs)) throw new Error('not a results.json of lab balance: no header or runs');
  const profile = /^profile (\S+) \(service ms ([^)]*)\)/.exec(r.header);
  if (!profile) throw new Error(`results.json header ${JSON.stringify(r.header.slice(0, 80))} does not name a profile`);
  const backends = profile[2]!.split(', ').map((x) => x.replace(/^(\S+) (\d+)$/, '$1 ($2 ms)'));
  const runs = r.runs.map((x: Record<string, unknown>) => {
    if (typeof x.mode !== 'string' || !Array.isArray(x.byBackend) || typeof x.p50 !== 'number' || typeof x.p95 !== 'number') {
      throw new Error('a run of results.json lacks mode, byBackend, p50 or p95');
    }
    return { mode: x.mode, placement: String(x.placement ?? 'spread'), concurrency: Number(x.concurrency ?? 1), byBackend: x.byBackend as number[], p50: x.p50, p95: x.p95 };
  });
  return { title: `profile ${profile[1]}`, note, backends, runs };
}
