// The balance experiment's chart (lab/cluster/balance-chart.ts): a results.json becomes a panel,
// rows per mode and placement, medians and ranges over the repeats. Pure: strings in, SVG out.
import { describe, expect, it } from '@jest/globals';
import { balanceModeLabel, panelFromResults, panelRows, renderBalanceChart, spread } from '../../../lab/cluster/balance-chart.js';

const results = {
  header: 'profile one-slow (service ms webpod-1 50, webpod-2 50, webpod-3 500); 240 requests from 4 closed-loop clients',
  runs: [
    { mode: 'rr', placement: 'spread', concurrency: 1, byBackend: [80, 80, 80], p50: 120, p95: 592, rep: 0 },
    { mode: 'sed+balance=cluster', placement: 'spread', concurrency: 1, byBackend: [60, 180, 0], p50: 76, p95: 110, rep: 0 },
    { mode: 'rr', placement: 'spread', concurrency: 1, byBackend: [80, 80, 80], p50: 110, p95: 580, rep: 1 },
    { mode: 'sed+balance=cluster', placement: 'spread', concurrency: 1, byBackend: [120, 120, 0], p50: 72, p95: 112, rep: 1 },
    { mode: 'lc', placement: 'one', concurrency: 2, byBackend: [100, 100, 40], p50: 110, p95: 629, rep: 0 },
  ],
};

describe('the balance chart', () => {
  it('reads a results.json: the profile, the pods with their service times, every run', () => {
    const p = panelFromResults(results, 'quiet');
    expect(p.title).toBe('profile one-slow');
    expect(p.backends).toEqual(['webpod-1 (50 ms)', 'webpod-2 (50 ms)', 'webpod-3 (500 ms)']);
    expect(p.runs).toHaveLength(5);
    expect(() => panelFromResults({ runs: [] }, '')).toThrow(/no header or runs/);
    expect(() => panelFromResults({ header: 'x', runs: [] }, '')).toThrow(/does not name a profile/);
    expect(() => panelFromResults({ ...results, runs: [{ mode: 'rr' }] }, '')).toThrow(/lacks mode, byBackend, p50 or p95/);
  });

  it('one row per mode and placement, repeats together, in the order the modes ran', () => {
    const rows = panelRows(panelFromResults(results, '').runs);
    expect(rows.map((r) => [r.label, r.runs.length])).toEqual([['rr', 2], ['sed + cluster view', 2], ['lc (all on one node) ×2', 1]]);
    expect(balanceModeLabel('iptables', 'spread', 1)).toBe('kube-proxy iptables');
    expect(balanceModeLabel('sed+endpoint-order=sorted', 'spread', 1)).toBe('sed + endpoint-order=sorted');
  });

  it('medians as the tables give them, with the range', () => {
    expect(spread([76, 72])).toEqual({ median: 74, min: 72, max: 76 });
    expect(spread([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3 });
  });

  it('draws each row: its label, its shares and its p95 median', () => {
    const svg = renderBalanceChart([panelFromResults(results, '2026-11-26, quiet')], 'title');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('>sed + cluster view<');
    expect(svg).toContain('>2026-11-26, quiet<');
    // sed's median shares 90/150/0 of 240: 38 % and 63 % (rounded each), no bar for webpod-3.
    expect(svg).toContain('>38%<');
    expect(svg).toContain('>63%<');
    expect(svg).toContain('>111<'); // p95 median of 110 and 112
    expect(svg).toContain('>586<'); // rr's: 592 and 580
  });
});
