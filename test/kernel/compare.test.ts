// lab compare on a real kernel (runs in the lab VM: `node dist/lab/cli.js test -- dist/test/kernel/compare`).
// Three small runs of runCompare (load by wrk), each with its own topology (pods webpod1-3 on
// 10.10.1.11-13, a client 192.168.100.10, VIP 10.200.1.10:80, see lab/compare/lab.ts), and
// structural properties that must hold whatever the machine's speed:
//   sequential, equal backends: rr spreads evenly (+-1); kube-proxy's statistic-random chains and
//     its nftables numgen vmap give each backend a share inside an exact binomial bound of 1/n; sh
//     and mh keep the one client on one backend;
//   8 concurrent, the last backend answering after 1 s, the others at once: lc and sed send it
//     clearly less than rr does;
//   the affinity preset's modes, 2 runs interleaved after a zero-delay baseline: every run of
//     iptables -m recent, nftables affinity sets and IPVS persistence sends all to one pod.
// Then the outputs (table, SVG, PNG) are rendered from the real results into
// bench/results/compare-test/ (gitignored), where they can be looked at after the run.
import { describe, expect, test } from '@jest/globals';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { renderOutputs } from '../../lab/compare/command.js';
import { runCompare } from '../../lab/compare/lab.js';
import { pngSize } from '../../lab/compare/png.js';
import { projectRoot } from '../../lab/paths.js';
import { binomialBounds } from '../../lab/compare/stats.js';
import { type CompareResults, type ModeRun, type Profile, buildProfile, parseModes } from '../../lab/compare/types.js';

const lab = process.env.IPVS_LAB === '1' ? describe : describe.skip;
const PODS = ['webpod1', 'webpod2', 'webpod3'];
const counts = (r: ModeRun) => PODS.map((p) => r.byPod[p] ?? 0);
const runOf = (res: CompareResults, mode: string, profile: string) => {
  const r = res.runs.find((x) => x.mode === mode && x.profile === profile);
  if (!r) throw new Error(`no run ${mode}/${profile}`);
  return r;
};
const log = (s: string) => process.stdout.write(`${s}\n`);
const steady = (delayMs: number) => ({ delayMs, stallEveryMs: 0, stallMs: 0 });
/**
 * Each request's timeout. It bounds a stalled request, not the machine's speed: the assertions
 * count errors exactly, and in a busy CI run (CI 85: four TCG VMs on two cores) one sequential
 * request of 150 took over 5 s, the run 43 s against 5-10 s.
 */
const TIMEOUT_MS = 30_000;
const oneSlow: Profile = { name: 'one-slow', summary: 'last backend 1000 ms, others 0 ms', backends: [steady(0), steady(0), steady(1000)] };

lab('lab compare', () => {
  let sequential: CompareResults;
  let concurrent: CompareResults;

  test('sequential requests, equal backends: rr even, iptables and nftables random within the binomial bound, sh/mh pinned', async () => {
    // 150 per mode (TCG is slow, and other VMs may share the cores): the exact bound for 1/3 at a
    // family-wise 0.1 % (Bonferroni over the 3 backends) is 30..71, wide enough never to flake
    // and narrow enough to catch wrong probabilities (0.5 / 0.25 / 0.25 would give 75 / 38 / 38).
    sequential = await runCompare({
      backends: 3, profiles: [buildProfile('equal', 3)], modes: parseModes('iptables,nftables,rr,sh,mh'), baseline: false,
      load: { requests: 150, concurrency: 1, keepAlive: false, timeoutMs: TIMEOUT_MS },
      onProgress: (p) => { if (p.run) log(`${p.mode}: ${JSON.stringify(p.run.byPod)} errors ${p.run.errors} in ${p.run.durationMs} ms`); },
    });
    for (const r of sequential.runs) expect({ mode: r.mode, errors: r.errors, ok: r.ok }).toEqual({ mode: r.mode, errors: 0, ok: 150 });

    const rr = counts(runOf(sequential, 'rr', 'equal'));
    expect(Math.max(...rr) - Math.min(...rr)).toBeLessThanOrEqual(1);

    const { lo, hi } = binomialBounds(150, 1 / 3, 0.001 / 3);
    for (const mode of ['iptables', 'nftables']) {
      for (const c of counts(runOf(sequential, mode, 'equal'))) {
        expect({ mode, c, inBound: c >= lo && c <= hi }).toEqual({ mode, c, inBound: true });
      }
    }
    for (const mode of ['sh', 'mh']) {
      expect(Object.values(runOf(sequential, mode, 'equal').byPod)).toEqual([150]);
    }
  }, 900_000);

  test('8 concurrent, one slow backend: lc and sed send it clearly less traffic than rr', async () => {
    concurrent = await runCompare({
      backends: 3, profiles: [oneSlow], modes: parseModes('rr,lc,sed'), baseline: false,
      load: { requests: 150, concurrency: 8, keepAlive: false, timeoutMs: TIMEOUT_MS },
      onProgress: (p) => { if (p.run) log(`${p.mode}: ${JSON.stringify(p.run.byPod)} p99 ${p.run.latencyMs.p99} ms in ${p.run.durationMs} ms`); },
    });
    for (const r of concurrent.runs) expect({ mode: r.mode, errors: r.errors }).toEqual({ mode: r.mode, errors: 0 });
    const slow = (mode: string) => counts(runOf(concurrent, mode, 'one-slow'))[2]!;
    // rr ignores load: a third of the connections, whatever the backend's speed. wrk stops after
    // 150 answers, so up to 8 requests still in flight (mostly on the slow backend) go uncounted.
    expect(slow('rr')).toBeGreaterThanOrEqual(50 - 8);
    expect(slow('rr')).toBeLessThanOrEqual(51);
    // lc and sed count the slow backend's connections still open: it gets far fewer new ones.
    expect(slow('lc')).toBeLessThan(0.6 * slow('rr'));
    expect(slow('sed')).toBeLessThan(0.6 * slow('rr'));
  }, 900_000);

  test('affinity modes after a baseline, 2 runs interleaved: every run sticks to one pod', async () => {
    const res = await runCompare({
      backends: 3, profiles: (unit) => [buildProfile('equal', 3, unit)], modes: parseModes('iptables-affinity,nftables-affinity,rr-affinity'),
      load: { requests: 20, concurrency: 1, keepAlive: false, timeoutMs: TIMEOUT_MS }, reps: 2,
      onProgress: (p) => { if (p.run) log(`${p.profile} ${p.mode} #${p.run.rep}: ${JSON.stringify(p.run.byPod)} p50 ${p.run.latencyMs.p50} ms`); },
    });
    expect(res.baseline?.runs).toHaveLength(2);
    expect(res.baseline!.p50Ms).toBeGreaterThan(0);
    expect(res.baseline!.unitMs).toBeGreaterThanOrEqual(20);
    expect(res.profiles[0]!.backends[0]!.delayMs).toBe(res.baseline!.unitMs);
    // Interleaved: A, B, C, A, B, C.
    expect(res.runs.map((r) => `${r.mode}#${r.rep}`)).toEqual([
      'iptables-affinity#1', 'nftables-affinity#1', 'rr-affinity#1', 'iptables-affinity#2', 'nftables-affinity#2', 'rr-affinity#2']);
    for (const r of res.runs) expect({ mode: r.mode, errors: r.errors, pods: Object.values(r.byPod) }).toEqual({ mode: r.mode, errors: 0, pods: [20] });
  }, 900_000);

  test('the table, results.json, chart.svg and chart.png are written from the real results', () => {
    const merged: CompareResults = {
      ...concurrent, profiles: [...sequential.profiles, ...concurrent.profiles],
      modes: ['iptables', 'nftables', 'rr', 'lc', 'sed', 'sh', 'mh'], runs: [...sequential.runs, ...concurrent.runs],
    };
    const out = join(projectRoot, 'bench', 'results', 'compare-test');
    rmSync(out, { recursive: true, force: true });
    expect(renderOutputs(merged, out)).toBe(0);
    const svg = readFileSync(join(out, 'chart.svg'), 'utf8');
    expect(svg.startsWith('<?xml')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('>ipvs sed');
    // Non-trivial: a row per mode with its share bars, and latency histogram cells for every run.
    // (Byte sizes depend on how many histogram bins a run fills, so they are bounded loosely.)
    for (const m of ['iptables random', 'nftables random', 'ipvs rr', 'ipvs lc', 'ipvs sed', 'ipvs sh', 'ipvs mh']) expect(svg).toContain(`>${m}<`);
    expect((svg.match(/<rect /g) ?? []).length).toBeGreaterThan(8 * 10);
    expect(statSync(join(out, 'chart.svg')).size).toBeGreaterThan(5_000);
    const png = readFileSync(join(out, 'chart.png'));
    const size = pngSize(png);
    expect(size?.width).toBe(1100);
    expect(size?.height).toBeGreaterThan(300);
    expect(png.length).toBeGreaterThan(5_000);
    const table = readFileSync(join(out, 'table.txt'), 'utf8');
    expect(table).toMatch(/^nftables\s+\d+\s+\d+\s+\d+\s/m);
    expect((JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as CompareResults).runs).toHaveLength(8);
  });
});
