// The chart of lab compare as SVG text: one panel per profile, one row per mode; on the left the
// share of requests each backend got (stacked bar), on the right the latency distribution on a
// log axis shared by all panels (a histogram drawn as a heat strip) with p50, p95 and p99
// marked at the median over the repetitions, each with a whisker over its min-max interval.
// pure: no I/O (png.ts rasterizes it).
import { type Spread, logHistogram, summarizeRuns } from './stats.js';
import type { CompareResults, ModeRun } from './types.js';

const W = 1100;
export const LABEL_X = 12;
const SHARE_X = 150;
const SHARE_W = 240;
const LAT_X = 430;
const LAT_W = W - LAT_X - 30;
export const ROW_H = 24;
export const BAR_H = 14;
const BINS = 60;
export const FONT = 'DejaVu Sans, Arial, Helvetica, sans-serif';
const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n2 = (v: number) => (Math.round(v * 10) / 10).toString();

/** How a mode is labelled in the chart. */
export function modeLabel(mode: string): string {
  if (mode === 'iptables') return 'iptables random';
  if (mode === 'iptables-affinity') return 'iptables ClientIP';
  if (mode === 'nftables') return 'nftables random';
  if (mode === 'nftables-affinity') return 'nftables ClientIP';
  if (mode === 'rr-affinity') return 'ipvs rr ClientIP';
  return `ipvs ${mode}`;
}

/** Latency axis bounds: 1-2-5 steps around the samples' range, at least one decade. */
export function latencyAxis(values: readonly number[]): { lo: number; hi: number; ticks: number[] } {
  const pos = values.filter((v) => v > 0);
  const min = pos.length ? Math.min(...pos) : 1;
  const max = pos.length ? Math.max(...pos) : 10;
  const steps: number[] = [];
  for (let e = -1; e <= 6; e++) for (const m of [1, 2, 5]) steps.push(m * 10 ** e);
  const lo = [...steps].reverse().find((s) => s <= min) ?? 0.1;
  let hi = steps.find((s) => s >= max) ?? 1e6;
  if (hi / lo < 10) hi = lo * 10;
  return { lo, hi, ticks: steps.filter((s) => s >= lo && s <= hi) };
}

/** The SVG document for a results set. */
export function renderChart(r: CompareResults): string {
  const all = r.runs.flatMap(latencies);
  const axis = latencyAxis(all);
  const lx = (ms: number) => LAT_X + (LAT_W * (Math.log(Math.max(ms, axis.lo)) - Math.log(axis.lo))) / (Math.log(axis.hi) - Math.log(axis.lo));
  const out: string[] = [];
  let y = 0;
  const text = (x: number, yy: number, s: string, attrs = '') => out.push(`<text x="${n2(x)}" y="${n2(yy)}"${attrs}>${esc(s)}</text>`);

  // Title and legend.
  y += 26;
  text(LABEL_X, y, 'Same backends, same VIP: kube-proxy iptables / nftables random vs IPVS schedulers', ' font-size="17" font-weight="bold"');
  y += 20;
  const l = r.load;
  const reps = r.reps ?? 1;
  text(LABEL_X, y, `${l.requests} requests per run, ${l.concurrency === 1 ? 'sequential' : `${l.concurrency} concurrent`}, ` +
    `keep-alive ${l.keepAlive ? 'on' : 'off'}; ${reps} run(s) per row, interleaved` +
    `${reps > 1 ? ': shares and markers are medians, whiskers the min-max over runs' : ''}; ${r.backends.length} backends; kernel ${r.kernel}`, ' fill="#444"');
  if (r.baseline) {
    y += 18;
    const b = r.baseline;
    text(LABEL_X, y, `baseline (0 ms backends): p50 ${b.p50Ms} ms; unit ${b.unitMs} ms; ` +
      (b.dominates ? 'backend times dominate' : 'backend times do NOT dominate (unit capped)'), b.dominates ? ' fill="#444"' : ' fill="#b00"');
  }
  y += 22;
  let x = LABEL_X;
  r.backends.forEach((b, i) => {
    out.push(`<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`);
    text(x + 16, y, b.name);
    x += 28 + b.name.length * 7.5;
  });
  x = LAT_X;
  out.push(`<rect x="${x}" y="${y - 10}" width="24" height="12" fill="#1f4e79" fill-opacity="0.55"/>`);
  text(x + 30, y, 'latency histogram');
  x += 160;
  out.push(marker('p50', x + 6, y - 4));
  text(x + 16, y, 'p50');
  out.push(marker('p95', x + 56, y - 4));
  text(x + 66, y, 'p95');
  out.push(marker('p99', x + 106, y - 4));
  text(x + 116, y, 'p99');
  y += 12;

  for (const p of r.profiles) {
    const groups = r.modes.map((m) => r.runs.filter((q) => q.profile === p.name && q.mode === m)).filter((g) => g.length > 0);
    if (!groups.length) continue;
    const names = r.backends.map((b) => b.name);
    const runs = groups.map((g) => ({ runs: g, s: summarizeRuns(g, names) }));
    y += 28;
    text(LABEL_X, y, `profile ${p.name}`, ' font-size="14" font-weight="bold"');
    text(LABEL_X + 150, y, p.summary, ' fill="#444"');
    y += 8;
    const top = y;
    const maxBin = Math.max(1, ...runs.map((q) => Math.max(...hist(q.runs))));
    runs.forEach(({ runs: group, s: q }, i) => {
      const ry = top + i * ROW_H;
      if (i % 2 === 0) out.push(`<rect x="0" y="${ry}" width="${W}" height="${ROW_H}" fill="#f4f6f8"/>`);
      const cy = ry + ROW_H / 2;
      text(LABEL_X, cy + 4, modeLabel(q.mode) + (q.errors ? `  (${q.errors} err)` : ''), q.errors ? ' fill="#b00"' : '');
      // Share of requests per backend (medians over the runs, normalized).
      let sx = SHARE_X;
      const med = (b: string) => q.byPod[b]?.median ?? 0;
      const total = Math.max(1, r.backends.reduce((a, b) => a + med(b.name), 0));
      r.backends.forEach((b, bi) => {
        const w = (SHARE_W * med(b.name)) / total;
        if (w <= 0) return;
        out.push(`<rect x="${n2(sx)}" y="${cy - BAR_H / 2}" width="${n2(w)}" height="${BAR_H}" fill="${COLORS[bi % COLORS.length]}"/>`);
        if (w > 34) text(sx + w / 2, cy + 4, `${Math.round((100 * med(b.name)) / total)}%`, ' text-anchor="middle" fill="#fff" font-size="10"');
        sx += w;
      });
      // Latency histogram (all runs pooled) as a heat strip, the whiskers, then the median markers.
      const h = hist(group);
      const bw = LAT_W / BINS;
      h.forEach((c, bi) => {
        if (c > 0) {
          const op = 0.12 + 0.88 * Math.sqrt(c / maxBin);
          out.push(`<rect x="${n2(LAT_X + bi * bw)}" y="${cy - BAR_H / 2}" width="${n2(bw + 0.3)}" height="${BAR_H}" fill="#1f4e79" fill-opacity="${op.toFixed(2)}"/>`);
        }
      });
      out.push(whisker(q.p50, cy - 3, '#8a6d00'), whisker(q.p95, cy, '#333'), whisker(q.p99, cy + 3, '#d62728'));
      out.push(marker('p50', lx(q.p50.median), cy), marker('p95', lx(q.p95.median), cy), marker('p99', lx(q.p99.median), cy));
    });
    y = top + runs.length * ROW_H;
    // Axes: share 0-100 %, latency log scale.
    out.push(`<line x1="${SHARE_X}" y1="${y}" x2="${SHARE_X + SHARE_W}" y2="${y}" stroke="#888"/>`);
    for (const f of [0, 0.5, 1]) {
      const tx = SHARE_X + f * SHARE_W;
      out.push(`<line x1="${tx}" y1="${y}" x2="${tx}" y2="${y + 4}" stroke="#888"/>`);
      text(tx, y + 16, `${f * 100}%`, ' text-anchor="middle" font-size="10" fill="#444"');
    }
    out.push(`<line x1="${LAT_X}" y1="${y}" x2="${LAT_X + LAT_W}" y2="${y}" stroke="#888"/>`);
    for (const t of axis.ticks) {
      const tx = lx(t);
      out.push(`<line x1="${n2(tx)}" y1="${top}" x2="${n2(tx)}" y2="${y + 4}" stroke="#ccc" stroke-dasharray="2,3"/>`);
      text(tx, y + 16, t >= 1000 ? `${t / 1000} s` : `${t} ms`, ' text-anchor="middle" font-size="10" fill="#444"');
    }
    y += 20;
  }
  y += 16;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${Math.ceil(y)}" ` +
    `viewBox="0 0 ${W} ${Math.ceil(y)}" font-family="${FONT}" font-size="12">\n` +
    `<rect width="100%" height="100%" fill="#ffffff"/>\n${out.join('\n')}\n</svg>\n`;

  function hist(g: readonly ModeRun[]): number[] {
    return logHistogram(g.flatMap(latencies), axis.lo, axis.hi, BINS);
  }

  function whisker(sp: Spread, wy: number, color: string): string {
    if (sp.hi <= sp.lo) return '';
    return `<line x1="${n2(lx(sp.lo))}" y1="${n2(wy)}" x2="${n2(lx(sp.hi))}" y2="${n2(wy)}" stroke="${color}" stroke-width="2" class="spread"/>`;
  }
}

/** A run's latencies (ms): its samples without errors, else its reported quantiles (one point each). */
function latencies(q: ModeRun): number[] {
  if (q.samples) return q.samples.filter(([p]) => p !== '').map(([, ms]) => ms);
  return (q.quantiles ?? []).map(([, ms]) => ms);
}

/** Percentile markers: p50 a white-edged circle, p95 a bar, p99 a red triangle. */
function marker(kind: 'p50' | 'p95' | 'p99', x: number, y: number): string {
  if (kind === 'p50') return `<circle cx="${n2(x)}" cy="${n2(y)}" r="4.5" fill="#ffd24d" stroke="#333" stroke-width="1.2"/>`;
  if (kind === 'p95') return `<rect x="${n2(x - 1.5)}" y="${n2(y - 8)}" width="3" height="16" fill="#333"/>`;
  return `<path d="M${n2(x)},${n2(y + 6)} L${n2(x - 5)},${n2(y - 6)} L${n2(x + 5)},${n2(y - 6)} Z" fill="#d62728" stroke="#fff" stroke-width="0.8"/>`;
}
