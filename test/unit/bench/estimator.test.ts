// The bench's reading of bench/stall-probe.c (the kernel's stalls, bench/estimator.ts): the probe's
// own output, compiled and run on this machine, and what a broken one is refused as.
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { estimatorParagraph, parseStallProbe, probeStalls, summarizeStalls } from '../../../bench/estimator.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');

describe('the stall probe', () => {
  it('reads the gaps and the done line', () => {
    const r = parseStallProbe('gap 1 1004.2 132.50\ngap 1 3010.0 128.00\ndone 1 2 260.50\n');
    expect(r).toEqual({ cpu: 1, totalMs: 260.5, stalls: [{ cpu: 1, atMs: 1004.2, ms: 132.5 }, { cpu: 1, atMs: 3010, ms: 128 }] });
  });

  it('refuses output it does not print: no done line, a count that differs, a strange line', () => {
    expect(() => parseStallProbe('gap 0 10 20\n')).toThrow(/no done line/);
    expect(() => parseStallProbe('gap 0 10 20\ndone 0 2 20\n')).toThrow(/1 gaps printed, 2 counted/);
    expect(() => parseStallProbe('gap 0 ten 20\ndone 0 1 20\n')).toThrow(/does not print/);
    expect(() => parseStallProbe('Segmentation fault\n')).toThrow(/does not print/);
  });

  it('sums the CPUs in CPU order, with the worst stall', () => {
    const p = summarizeStalls([
      { cpu: 1, totalMs: 12, stalls: [{ cpu: 1, atMs: 5, ms: 12 }] },
      { cpu: 0, totalMs: 250, stalls: [{ cpu: 0, atMs: 900, ms: 130 }, { cpu: 0, atMs: 2900, ms: 120 }] },
    ], 8, 10);
    expect(p.perCpu).toEqual([{ cpu: 0, count: 2, totalMs: 250 }, { cpu: 1, count: 1, totalMs: 12 }]);
    expect(p.worstMs).toBe(130);
    expect(p.stalls.map((s) => s.atMs)).toEqual([900, 2900, 5]);
  });

  it('runs the compiled probe on this machine and reads what it printed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stall-probe-'));
    try {
      const bin = join(dir, 'stall-probe');
      const cc = spawnSync('gcc', ['-O2', '-Wall', '-o', bin, join(root, 'bench', 'stall-probe.c')], { encoding: 'utf8' });
      expect(cc.stderr).toBe('');
      // Gaps over 0.5 µs in 0.3 s: at least the kernel's timer ticks, printed in the real format.
      const p = await probeStalls(bin, 1, 0.3, 0.0005);
      expect(p.perCpu).toHaveLength(1);
      expect(p.perCpu[0]!.count).toBe(p.stalls.length);
      expect(p.stalls.length).toBeGreaterThan(0);
      expect(p.stalls.every((s) => s.cpu === 0 && s.ms >= 0 && s.atMs >= 0 && s.atMs <= 400)).toBe(true);
      await expect(probeStalls(join(dir, 'none'), 1, 0.01, 0)).rejects.toThrow(/no stall probe/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says in the report what the changes took with the estimator off, against on', () => {
    const probe = summarizeStalls([{ cpu: 0, totalMs: 0, stalls: [] }], 8, 10);
    const [, line] = estimatorParagraph(30000, {
      probeOn: probe, probeOff: probe, changesOff: { count: 100, exactlyOneOp: true, p50: 6.2, p99: 31, max: 40 },
    }, { p99: 71, warmP99: 20 });
    expect(line).toContain('p99 31 ms (meets the guest\'s 50 ms), against 71 ms with it on (20 ms without each kind\'s first');
    expect(line).toContain('kernel unknown: kernels before 6.2 walk');
    expect(estimatorParagraph(30000, undefined, { p99: 71 })).toEqual([]);
  });

  it('names the kernel, and how it estimates by its version', () => {
    const probe = summarizeStalls([{ cpu: 0, totalMs: 0, stalls: [] }], 8, 10);
    const run = { probeOn: probe, probeOff: probe, changesOff: { count: 30, exactlyOneOp: true, p50: 8, p99: 25, max: 26 } };
    const para = (k: string) => estimatorParagraph(10000, run, { p99: 88 }, k)[1]!;
    expect(para('6.1.0-57-amd64')).toContain('kernel 6.1.0-57-amd64: kernels before 6.2 walk');
    expect(para('6.12.117+deb13-amd64')).toContain('kernel 6.12.117+deb13-amd64: since 6.2 kernel threads estimate');
    expect(para('7.0.1')).toContain('since 6.2 kernel threads');
    expect(para('5.15.0')).toContain('before 6.2');
  });
});
