// Cluster load view, pure parts one by one: report checks, Little's law, target weights, damping,
// the weights check, rendezvous reporters and the node's "moved" test. Backends 10.10.1.1-3:8080,
// nodes node-a.. ; times in ms from 0 (the clock is a parameter).
import { describe, expect, it } from '@jest/globals';
import { type BackendCounters, type NodeReport, type ReportLimits, checkReport, coefficientOfVariation, sumSamples, timeInSystem, viewImbalance } from '../../../src/balance/estimate.js';
import { ClusterWeights } from '../../../src/balance/cluster-view.js';
import { clusterShares, renderShares } from '../../../src/balance/shares.js';
import { PluginRegistry } from '../../../plugins/index.js';
import { KEY, VIEW, table } from '../../support/cluster-view.js';
import { imbalanceIndex } from '../../../lab/cluster/balance-stats.js';
import { DEFAULT_DAMPING, NO_DEAD_ZONE, checkWeights, deadZoneWidth, initialView, stepView, targetWeights } from '../../../src/balance/damping.js';
import { prng } from '../../support/fixtures.js';
import { pickReporters, shouldReport } from '../../../src/balance/reporting.js';
import { DEAL_MAX_NODES, assignFirstChoices, localFirstChoice, sameChoices, tiltFirstChoice } from '../../../src/balance/first-choice.js';
import { parseWeightsObject } from '../../../src/balance/view-objects.js';

const B = ['10.10.1.1:8080', '10.10.1.2:8080', '10.10.1.3:8080'];
const SET = new Set(B);
const LIMITS: ReportLimits = { periodMs: 10_000, stalePeriods: 3, maxSkewMs: 5_000, maxConnRate: 1_000, maxConns: 10_000 };

function counters(backend: string, mutate?: (c: BackendCounters) => void): BackendCounters {
  const c = { backend, active: 2, inactive: 1, conns: 100, inBytes: 1_000, outBytes: 5_000 };
  mutate?.(c);
  return c;
}

function report(node: string, at: number, mutate?: (c: BackendCounters) => void): NodeReport {
  return { node, at, backends: B.map((b) => counters(b, mutate)) };
}

describe('checkReport', () => {
  const prev = report('node-a', 0);

  it('a first report only sets the baseline; the next gives rates over the interval', () => {
    const first = checkReport(prev, undefined, SET, 0, LIMITS);
    expect(first.samples.size).toBe(0);
    expect(first.baseline).toEqual(prev);
    const next = checkReport(report('node-a', 10_000, (c) => { c.conns = 150; c.inBytes = 2_000; c.active = 4; }), prev, SET, 10_000, LIMITS);
    expect(next.rejections).toEqual([]);
    expect(next.samples.get(B[0]!)).toEqual({ active: 4, rate: 5, byteRate: 100 });
  });

  it.each([
    ['stale', report('node-a', 10_000), 50_001],
    ['future', report('node-a', 20_000), 10_000],
    ['non-finite', report('node-a', 10_000, (c) => { c.conns = NaN; }), 10_000],
    ['non-finite', { ...report('node-a', 10_000), at: Infinity }, 10_000],
    ['negative', report('node-a', 10_000, (c) => { c.active = -1; }), 10_000],
    ['backwards', report('node-a', 10_000, (c) => { c.conns = 99; }), 10_000],
    ['backwards', report('node-a', 10_000, (c) => { c.outBytes = 0; }), 10_000],
    ['absurd-rate', report('node-a', 10_000, (c) => { c.conns = 100 + 10_001; }), 10_000],
    ['absurd-conns', report('node-a', 10_000, (c) => { c.active = 10_001; }), 10_000],
  ] as [string, NodeReport, number][])('drops a %s report whole and clears the baseline', (reason, r, now) => {
    const c = checkReport(r, prev, SET, now, LIMITS);
    expect(c.rejections.map((x) => x.reason)).toEqual([reason]);
    expect(c.samples.size).toBe(0);
    expect(c.baseline).toBeUndefined();
  });

  it('a wrong-typed value is non-finite, not a crash', () => {
    const r = report('node-a', 10_000, (c) => { (c as unknown as Record<string, unknown>).conns = '150'; });
    expect(checkReport(r, prev, SET, 10_000, LIMITS).rejections[0]?.reason).toBe('non-finite');
  });

  it.each([
    { node: 'node-a', at: 10_000, backends: 'x' },
    { node: 'node-a', at: 10_000, backends: [null] },
    { node: 'node-a', at: 10_000, backends: [{ backend: 7 }] },
    { node: 7, at: 10_000, backends: [] },
  ])('drops a malformed report (%j) with a reason', (r) => {
    const c = checkReport(r as unknown as NodeReport, prev, SET, 10_000, LIMITS);
    expect(c.rejections.map((x) => x.reason)).toEqual(['malformed']);
    expect(c.baseline).toBeUndefined();
  });

  it('a report not newer than the baseline is refused and the baseline kept', () => {
    const c = checkReport(report('node-a', 0), prev, SET, 1_000, LIMITS);
    expect(c.rejections.map((x) => x.reason)).toEqual(['not-newer']);
    expect(c.baseline).toBe(prev);
  });

  it('drops an unknown backend alone and a duplicated one with the report', () => {
    const r = report('node-a', 10_000, (c) => { c.conns = 110; });
    const unknown = checkReport({ ...r, backends: [...r.backends, counters('10.10.9.9:80')] }, prev, SET, 10_000, LIMITS);
    expect(unknown.rejections.map((x) => [x.reason, x.backend])).toEqual([['unknown-backend', '10.10.9.9:80']]);
    expect(unknown.samples.size).toBe(3);
    const dup = checkReport({ ...r, backends: [...r.backends, r.backends[0]!] }, prev, SET, 10_000, LIMITS);
    expect(dup.rejections.map((x) => x.reason)).toEqual(['duplicate-backend']);
  });
});

describe("Little's law", () => {
  it('sums nodes and divides Σ active by Σ rate', () => {
    const s = sumSamples([new Map([[B[0]!, { active: 2, rate: 20, byteRate: 0 }]]), new Map([[B[0]!, { active: 3, rate: 30, byteRate: 0 }]])]);
    expect(s.get(B[0]!)).toEqual({ active: 5, rate: 50, nodes: 2 });
    expect(timeInSystem(5, 50, 0.001)).toBeCloseTo(0.1);
    expect(timeInSystem(0, 50, 0.001)).toBe(0.001);
    expect(timeInSystem(5, 0, 0.001)).toBeUndefined();
    // Less than one open connection: not measured, rather than "infinitely fast".
    expect(timeInSystem(0, 50, 0.001, 1)).toBeUndefined();
    expect(timeInSystem(0.5, 50, 0.001, 1)).toBeUndefined();
    expect(timeInSystem(1, 50, 0.001, 1)).toBeCloseTo(0.02);
  });
});

describe('weights', () => {
  it('are inversely proportional to the time in system, fastest at max, clamped to the floor', () => {
    const t = targetWeights(new Map([[B[0]!, 0.05], [B[1]!, 0.5], [B[2]!, 10]]), new Map(), DEFAULT_DAMPING);
    expect([...t.values()]).toEqual([20, 2, 1]);
  });

  it('a backend not measured keeps its previous weight, or max when new', () => {
    const t = targetWeights(new Map([[B[0]!, 0.05], [B[1]!, undefined], [B[2]!, undefined]]), new Map([[B[1]!, 7]]), DEFAULT_DAMPING);
    expect([...t.values()]).toEqual([20, 7, 20]);
  });

  /** Two nodes each reporting `perBackend` [active, new conns per period] at the end of period p. */
  function reports(p: number, perBackend: [number, number][]): NodeReport[] {
    return ['node-a', 'node-b'].map((node) => ({ node, at: p * 10_000, backends: B.map((backend, i) => ({
      backend, active: perBackend[i]![0], inactive: 0, conns: p * perBackend[i]![1], inBytes: 0, outBytes: 0 })) }));
  }

  it('move at most maxStep per period towards the target, and then stop writing', () => {
    let state = initialView(B);
    const writes: boolean[] = [];
    const trail: number[][] = [];
    for (let p = 0; p < 8; p++) {
      // 100 conns per period each: W = 0.5 s, 0.5 s and 5 s → target 20, 20, 2.
      const s = stepView(state, reports(p, [[5, 100], [5, 100], [50, 100]]), B, p * 10_000, LIMITS);
      state = s.state;
      writes.push(s.write);
      trail.push(B.map((b) => s.weights.get(b)!));
    }
    expect(trail.map((w) => w[2])).toEqual([20, 15, 10, 5, 2, 2, 2, 2]);
    expect(writes).toEqual([false, true, true, true, true, false, false, false]);
    expect(trail[7]!.slice(0, 2)).toEqual([20, 20]);
  });

  it('hysteresis: no write while every change stays below the threshold', () => {
    // Without the dead zone (tested below), so that a small difference makes a target at all.
    const damping = { ...DEFAULT_DAMPING, deadZone: NO_DEAD_ZONE };
    let state = initialView(B);
    for (let p = 0; p < 3; p++) state = stepView(state, reports(p, [[5, 100], [5, 100], [5, 100]]), B, p * 10_000, LIMITS, damping).state;
    // The second backend 10 % slower, 3 % after the EWMA: target 19, a change of 1 < threshold 2.
    const s = stepView(state, reports(3, [[5, 100], [5.5, 100], [5, 100]]), B, 30_000, LIMITS, damping);
    expect(s.target.get(B[1]!)).toBe(19);
    expect(s.write).toBe(false);
    expect(s.weights.get(B[1]!)).toBe(20);
  });

  it('the dead zone: as fast as the fastest within 1 + b, the plain inverse from 1 + 2b, a line between', () => {
    const at = (r: number, b: number): number =>
      targetWeights(new Map([[B[0]!, 0.1], [B[1]!, 0.1 * r]]), new Map(), DEFAULT_DAMPING, new Map([[B[1]!, b]])).get(B[1]!)!;
    expect([at(1.05, 0.1), at(1.1, 0.1), at(1.15, 0.1), at(1.2, 0.1), at(2, 0.1)]).toEqual([20, 20, 18, 17, 10]);
    // A wide dead zone keeps clearly slower backends where they were: 10× slower is weight 2 either way.
    expect([at(1.9, 1), at(2.5, 1), at(3, 1), at(10, 1)]).toEqual([20, 10, 7, 2]);
    expect(at(10, 0)).toBe(2);
    // No cliff: stepping r by 0.01 from 1 to 6 never moves the weight by more than 1.
    for (const b of [0.1, 0.5, 1]) {
      let last = at(1, b);
      for (let i = 101; i <= 600; i++) {
        const w = at(i / 100, b);
        expect(Math.abs(w - last)).toBeLessThanOrEqual(1);
        last = w;
      }
    }
  });

  it('the dead zone\'s width comes from the deviations, kept within [min, max]', () => {
    const est = new Map<string, number | undefined>([[B[0]!, 0.1], [B[1]!, 0.12], [B[2]!, undefined]]);
    const dz = { z: 2, min: 0.1, max: 1 };
    const d = (devs: (number | undefined)[]): Map<string, number> => deadZoneWidth(est,
      new Map(B.map((b, i) => [b, { load: 1, rate: 10, dev: devs[i] }])), { ...DEFAULT_DAMPING, alpha: 0.3, deadZone: dz });
    // (z, min and max here are the test's own, not the defaults.)
    // σ of a smoothed estimate = 1.25 × dev × √(0.3 / 1.7); z = 2; over the fastest's 0.1 s.
    const se = 1.25 * Math.sqrt(0.3 / 1.7);
    expect(d([0.02, 0.02, undefined]).get(B[1]!)).toBeCloseTo((2 * se * Math.hypot(0.02, 0.02)) / 0.1, 6);
    expect(d([0.001, 0.001, undefined]).get(B[1]!)).toBe(0.1); // the floor
    expect(d([0.5, 0.5, undefined]).get(B[1]!)).toBe(1); // the cap
    expect(d([undefined, 0.02, undefined]).get(B[1]!)).toBe(1); // no deviation known yet: the cap
    expect(d([0.02, 0.02, 0.02]).has(B[2]!)).toBe(false); // not measured: no width
  });

  it('equal backends with noisy reports keep equal weights; without the dead zone they drift apart', () => {
    // Two nodes, three equal backends (W = 0.1 s), each period's Σ active and new connections
    // drawn around their means (±60 % and ±30 %): the noise of a few connections per node.
    const run = (deadZone: typeof NO_DEAD_ZONE): number[][] => {
      const rand = prng(7);
      const damping = { ...DEFAULT_DAMPING, deadZone };
      let state = initialView(B, damping);
      const conns = B.map(() => 0);
      const trail: number[][] = [];
      for (let p = 0; p < 40; p++) {
        const rs = ['node-a', 'node-b'].map((node) => ({ node, at: p * 10_000, backends: B.map((backend, i) => {
          if (node === 'node-a') conns[i]! += Math.round(50 * (0.7 + 0.6 * rand()));
          return { backend, active: 5 * (0.4 + 1.2 * rand()), inactive: 0, conns: conns[i]!, inBytes: 0, outBytes: 0 };
        }) }));
        state = stepView(state, rs, B, p * 10_000, LIMITS, damping).state;
        trail.push(B.map((b) => state.weights.get(b)!));
      }
      return trail.slice(10);
    };
    const equal = (trail: number[][]): number => trail.filter((w) => w.every((x) => x === 20)).length;
    // Measured: 30 of 30 periods with the dead zone, 0 of 30 without.
    expect(equal(run(DEFAULT_DAMPING.deadZone))).toBeGreaterThanOrEqual(28);
    expect(equal(run(NO_DEAD_ZONE))).toBeLessThan(10);
  });

  it('near the floor a change of one is a write (1 → 2 doubles a share); a target between two weights keeps either', () => {
    const damping = { ...DEFAULT_DAMPING, deadZone: NO_DEAD_ZONE };
    const settle = (slowActive: number, start: number): { weight: number; writes: boolean[] } => {
      let state = initialView(B, damping);
      state.weights.set(B[2]!, start);
      const writes: boolean[] = [];
      for (let p = 0; p < 4; p++) {
        const s = stepView(state, reports(p, [[5, 100], [5, 100], [slowActive, 100]]), B, p * 10_000, LIMITS, damping);
        state = s.state;
        writes.push(s.write);
      }
      return { weight: state.weights.get(B[2]!)!, writes };
    };
    // 10× slower: exact target 2, one above the published 1: written although below threshold 2.
    expect(settle(50, 1)).toEqual({ weight: 2, writes: [false, true, false, false] });
    // 12.5× slower: exact target 1.6, between 1 and 2: neither 1 nor 2 moves, nothing is written.
    expect(settle(62.5, 1)).toEqual({ weight: 1, writes: [false, false, false, false] });
    expect(settle(62.5, 2)).toEqual({ weight: 2, writes: [false, false, false, false] });
  });

  it('a silent node keeps counting until its baseline is stale, then is forgotten', () => {
    let state = stepView(initialView(B), reports(0, [[5, 100], [5, 100], [5, 100]]), B, 0, LIMITS).state;
    state = stepView(state, reports(1, [[5, 100], [5, 100], [5, 100]]), B, 10_000, LIMITS).state;
    const quiet = stepView(state, [], B, 30_000, LIMITS);
    expect(quiet.rejections).toEqual([]);
    expect(quiet.estimate.get(B[0]!)).toBeCloseTo(0.5) // 5 active / 10 conn/s, from the samples kept;
    const stale = stepView(quiet.state, [], B, 40_001, LIMITS);
    expect(stale.rejections.map((r) => [r.node, r.reason])).toEqual([['node-a', 'stale'], ['node-b', 'stale']]);
    expect(stale.state.nodes.size).toBe(0);
  });

  it('a backend leaving or joining the Service is a write', () => {
    const s = stepView(initialView(B), [], B.slice(0, 2), 0, LIMITS);
    expect(s.write).toBe(true);
    expect([...s.weights.keys()]).toEqual(B.slice(0, 2));
  });

  it('a node checks a published weights object like any input', () => {
    expect(checkWeights({ [B[0]!]: 20, [B[1]!]: 1, [B[2]!]: 7 }, B)).toEqual([]);
    expect(checkWeights({ [B[0]!]: 0, [B[1]!]: 2.5, [B[2]!]: '7', '10.10.9.9:80': 3 }, B)).toHaveLength(4);
  });
});

describe('reporters', () => {
  const nodes = Array.from({ length: 50 }, (_, i) => `node-${i}`);

  it('picks K stable reporters per Service, spread over the nodes', () => {
    const r = pickReporters('ns1/svc1', nodes, 3);
    expect(r).toHaveLength(3);
    expect(pickReporters('ns1/svc1', [...nodes].reverse(), 3)).toEqual(r);
    const used = new Set(Array.from({ length: 100 }, (_, i) => pickReporters(`ns1/svc${i}`, nodes, 3)).flat());
    expect(used.size).toBeGreaterThan(40);
    expect(pickReporters('ns1/svc1', nodes, 99)).toHaveLength(50);
  });

  it('removing a node changes only the Services it reported for, by one node', () => {
    const gone = pickReporters('ns1/svc1', nodes, 3)[0]!;
    const after = pickReporters('ns1/svc1', nodes.filter((n) => n !== gone), 3);
    expect(after.filter((n) => pickReporters('ns1/svc1', nodes, 3).includes(n))).toHaveLength(2);
    for (let i = 0; i < 100; i++) {
      const before = pickReporters(`ns1/svc${i}`, nodes, 3);
      if (!before.includes(gone)) expect(pickReporters(`ns1/svc${i}`, nodes.filter((n) => n !== gone), 3)).toEqual(before);
    }
  });
});

describe('shouldReport', () => {
  const t = { relative: 0.2, minActive: 2, minRate: 1, maxSilentMs: 20_000 };
  const reading = (at: number, active: number, rate: number) => ({ at, active: new Map([[B[0]!, active]]), rate: new Map([[B[0]!, rate]]) });

  it('reports the first time, on a move past the threshold, and after maxSilentMs', () => {
    expect(shouldReport(undefined, reading(0, 1, 1), t)).toBe(true);
    expect(shouldReport(reading(0, 10, 10), reading(10_000, 11, 11), t)).toBe(false);
    expect(shouldReport(reading(0, 10, 10), reading(10_000, 13, 10), t)).toBe(true);
    expect(shouldReport(reading(0, 10, 10), reading(10_000, 10, 7), t)).toBe(true);
    expect(shouldReport(reading(0, 0, 0), reading(10_000, 1, 0.5), t)).toBe(false);
    expect(shouldReport(reading(0, 10, 10), reading(20_000, 10, 10), t)).toBe(true);
  });
});

describe('the imbalance index from the view and the cluster shares', () => {
  it('is the CV of the backends\' open connections: 0 when load follows capacity, as the experiment\'s index', () => {
    expect(coefficientOfVariation([])).toBe(0);
    expect(coefficientOfVariation([0, 0])).toBe(0);
    expect(coefficientOfVariation([2, 2, 2])).toBe(0);
    // rr over 50/50/500 ms: λ equal, L ∝ W = 1:1:10, the experiment's 1.06 for an even split.
    expect(viewImbalance([1, 1, 10])).toBeCloseTo(imbalanceIndex([80, 80, 80], [50, 50, 500]), 10);
    expect(viewImbalance([1, undefined, 3])).toBeUndefined();
  });

  it('sums every node\'s report per backend and shows the published weights; malformed reports are skipped', () => {
    const report = (node: string, backends: object[]) => ({ metadata: { name: node }, spec: { node, at: '2026-11-25T10:00:00Z', services: [{ key: 'ns/web/http', backends }, { key: 'ns/other/http', backends }] } });
    const b = (backend: string, active: number, conns: number) => ({ backend, active, inactive: 0, conns, inBytes: 0, outBytes: 0 });
    const shares = clusterShares('ns/web', [
      report('n1', [b('10.0.0.1:80', 1, 100), b('10.0.0.2:80', 5, 10)]),
      report('n2', [b('10.0.0.1:80', 2, 50)]),
      { metadata: { name: 'bad' }, spec: { node: 'evil' } },
    ], { spec: { leader: 'n1', ports: [{ port: 'http', weights: { '10.0.0.1:80': 20, '10.0.0.2:80': 4 }, estimates: { '10.0.0.2:80': 0.5 } }] } });
    expect(shares).toEqual([
      { port: 'http', backend: '10.0.0.1:80', active: 3, conns: 150, nodes: 2, weight: 20 },
      { port: 'http', backend: '10.0.0.2:80', active: 5, conns: 10, nodes: 1, weight: 4, estimateSeconds: 0.5 },
    ]);
    const text = renderShares('ns/web', shares, 'n1');
    expect(text).toContain('(weights from n1)');
    expect(text).toMatch(/http +10\.0\.0\.2:80 +4 +500 +5 +10 +6\.3% +1/);
    expect(renderShares('ns/none', [], undefined)).toMatch(/no node reports this Service/);
    // With first choices dealt: how many nodes each backend is the first choice of.
    const dealt = clusterShares('ns/web', [], { spec: { leader: 'n1', ports: [{ port: 'http', weights: { '10.0.0.1:80': 20, '10.0.0.2:80': 20, '10.0.0.3:80': 1 },
      firstChoices: { n1: '10.0.0.1:80', n2: '10.0.0.2:80', n3: '10.0.0.1:80' } }] } });
    expect(dealt.map((l) => [l.backend, l.firstOf])).toEqual([['10.0.0.1:80', 2], ['10.0.0.2:80', 1], ['10.0.0.3:80', 0]]);
    expect(renderShares('ns/web', dealt, 'n1')).toMatch(/http +10\.0\.0\.1:80 +20 +- +0 +0 +- +0 +2/);
  });
});

describe('plugins see the cluster view (weigh)', () => {
  const live = (weighOf: ConstructorParameters<typeof ClusterWeights>[2]) => {
    const cw = new ClusterWeights(30_000, undefined, weighOf);
    cw.apply(table, new Set([KEY]), 0);
    cw.setAlive(true, 0);
    cw.publish('shop/web', new Map([[VIEW, new Map([['10.10.1.1:8080', 20], ['10.10.1.2:8080', 20], ['10.10.1.3:8080', 2]])]]));
    return cw;
  };
  const weights = (cw: ClusterWeights) => cw.apply(table, new Set(), 1).table.get(KEY)!.dests.map((d) => d.weight);

  it('the built-in weighted plugins scale their own weights by the view\'s', () => {
    const wrr = new PluginRegistry().get('wrr')!;
    expect(wrr.weigh!([{ address: '10.10.1.1', port: 8080, weight: 3 }, { address: '10.10.1.3', port: 8080, weight: 0 }, { address: 'fd00::1', port: 80, weight: 2 }],
      { weights: new Map([['10.10.1.1:8080', 5], ['[fd00::1]:80', 4]]) })).toEqual([15, 0, 8]);
    expect(weights(live((n) => new PluginRegistry().get(n)?.weigh))).toEqual([20, 20, 2]);
  });

  it('a third-party weigh() decides the weights, from frozen inputs', () => {
    let seen: unknown;
    const cw = live(() => (eps, view) => { seen = { frozen: Object.isFrozen(eps) && eps.every(Object.isFrozen), view: [...view.weights.values()] }; return eps.map((e) => (view.weights.get(`${e.address}:${e.port}`) ?? 1) ** 2); });
    expect(weights(cw)).toEqual([400, 400, 4]);
    expect(seen).toEqual({ frozen: true, view: [20, 20, 2] });
    expect(cw.lastProblems).toEqual([]);
  });

  it.each([
    ['throws', () => { throw new Error('boom'); }],
    ['answers too few weights', () => [1]],
    ['answers a fraction', () => [1.5, 1, 1]],
    ['answers a negative weight', () => [1, -1, 1]],
    ['mutates what it is given', (eps: readonly { weight: number }[]) => { (eps[0] as { weight: number }).weight = 99; return [1, 1, 1]; }],
  ])('a weigh() that %s falls back to weight × the view\'s, with a problem on that Service', (_, weigh) => {
    const cw = live(() => weigh as never);
    expect(weights(cw)).toEqual([20, 20, 2]);
    expect(cw.lastProblems).toEqual([expect.objectContaining({ service: 'shop/web', reason: 'PluginWeighFailed' })]);
  });

  it('the registry refuses a weigh that is not a function', () => {
    const r = new PluginRegistry();
    const wrr = r.get('wrr')!;
    expect(r.register({ ...wrr, name: 'bad-weigh', weigh: 42 }, 'test')).toMatchObject({ reason: 'InvalidPlugin', message: expect.stringContaining('weigh, when given, must be a function') });
  });
});

describe('a restarted node', () => {
  it('applies the published weights in its first sync (no flap to local weights), and local ones once the view is seen stale', () => {
    const cw = new ClusterWeights(30_000);
    cw.publish('shop/web', new Map([[VIEW, new Map([['10.10.1.1:8080', 20], ['10.10.1.2:8080', 20], ['10.10.1.3:8080', 2]])]]));
    const first = cw.apply(table, new Set([KEY]), 0);
    expect(first.table.get(KEY)!.dests.map((d) => d.weight)).toEqual([20, 20, 2]);
    cw.setAlive(false, 1000);
    expect(cw.apply(table, new Set(), 1000).table.get(KEY)!.dests.map((d) => d.weight)).toEqual([1, 1, 1]);
  });
});

describe('first choices: the nodes dealt out over the backends in proportion to the weights', () => {
  const nodes = (n: number) => Array.from({ length: n }, (_, i) => `node-${i}`);
  const counts = (m: ReadonlyMap<string, string>) => [...m.values()].reduce((c, b) => c.set(b, (c.get(b) ?? 0) + 1), new Map<string, number>());
  const equal = new Map(B.map((b) => [b, 20]));
  /** Every backend's count within one of N × w / Σw, and the counts adding up to N. */
  const proportional = (c: ReadonlyMap<string, string>, w: ReadonlyMap<string, number>, n: number) => {
    const total = [...w.values()].reduce((x, y) => x + y, 0);
    expect(c.size).toBe(n);
    for (const [b, x] of w) expect(Math.abs((counts(c).get(b) ?? 0) - (n * x) / total)).toBeLessThan(1);
  };

  it.each([1, 2, 3, 4, 5, 7, 12, 64])('%i nodes over three equal backends: every node one, counts within one of each other', (n) => {
    const c = assignFirstChoices(nodes(n), equal);
    expect([...c.keys()].sort()).toEqual(nodes(n).sort());
    const per = B.map((b) => counts(c).get(b) ?? 0);
    expect(Math.max(...per) - Math.min(...per)).toBeLessThanOrEqual(1);
    proportional(c, equal, n);
  });

  it.each([
    [4, [20, 20, 3], [2, 2, 0]],
    [4, [20, 15, 15], [2, 1, 1]], // equal pods whose estimates the noise split: no herd on the 20
    [4, [20, 8, 3], [3, 1, 0]],
    [50, [20, 20, 2], [24, 24, 2]],
    [64, [20, 16, 6], [31, 24, 9]],
  ])('%i nodes over weights %j: %j nodes each', (n, w, want) => {
    const weights = new Map(B.map((b, i) => [b, w[i]!]));
    const c = assignFirstChoices(nodes(n), weights);
    expect(B.map((b) => counts(c).get(b) ?? 0)).toEqual(want);
    proportional(c, weights, n);
  });

  it('above DEAL_MAX_NODES each node chooses its own, by weighted rendezvous: proportional over many nodes, stable, no map', () => {
    const w = new Map([[B[0]!, 20], [B[1]!, 20], [B[2]!, 2]]);
    const many = nodes(10_000);
    const chosen = new Map(many.map((n) => [n, localFirstChoice(n, VIEW, w)!]));
    const per = B.map((b) => counts(chosen).get(b) ?? 0);
    // Expected 4762, 4762 and 476; binomial σ ≈ 50 and 21.
    expect(Math.abs(per[0]! - 4762)).toBeLessThan(250);
    expect(Math.abs(per[1]! - 4762)).toBeLessThan(250);
    expect(Math.abs(per[2]! - 476)).toBeLessThan(100);
    expect(localFirstChoice('node-7', VIEW, w)).toBe(chosen.get('node-7'));
    // A backend's weight going down moves only nodes off it, never between the others.
    const down = new Map([[B[0]!, 20], [B[1]!, 20], [B[2]!, 1]]);
    for (const n of many.slice(0, 2000)) {
      const after = localFirstChoice(n, VIEW, down)!;
      if (after !== chosen.get(n)) expect(chosen.get(n)).toBe(B[2]);
    }
    expect(localFirstChoice('', VIEW, w)).toBeUndefined();
    expect(localFirstChoice('node-1', VIEW, new Map([[B[0]!, 0]]))).toBeUndefined();
    expect(assignFirstChoices(nodes(DEAL_MAX_NODES + 1), w).size).toBe(0); // no map above the cap
  });

  it('nothing to deal: one backend, or no node', () => {
    expect(assignFirstChoices(nodes(4), new Map([[B[0]!, 20]])).size).toBe(0);
    expect(assignFirstChoices([], equal).size).toBe(0);
  });

  it('keeps every choice its quota allows: a node joining moves no other node, one leaving moves at most one', () => {
    const before = assignFirstChoices(nodes(6), equal);
    const joined = assignFirstChoices(nodes(7), equal, before);
    for (const n of nodes(6)) expect(joined.get(n)).toBe(before.get(n));
    const left = assignFirstChoices(nodes(7).filter((n) => n !== 'node-2'), equal, joined);
    const moved = [...left].filter(([n, b]) => joined.get(n) !== b);
    expect(moved.length).toBeLessThanOrEqual(1);
    proportional(left, equal, 6);
    // A backend weighted down: only as many of its nodes move as its quota lost.
    const down = assignFirstChoices(nodes(6), new Map([[B[0]!, 20], [B[1]!, 20], [B[2]!, 2]]), before);
    expect([...down].filter(([n, b]) => before.get(n) !== b).length).toBe(2);
    expect(sameChoices(before, assignFirstChoices(nodes(6), equal, before))).toBe(true);
    expect(sameChoices(before, joined)).toBe(false);
  });

  it('tilt: sed\'s idle choice becomes the dealt one; other schedulers only break a tie at the top', () => {
    expect(tiltFirstChoice([20, 20, 2], 1, 1000, 'wrr')).toEqual([20, 21, 2]);
    expect(tiltFirstChoice([20, 20, 2], 1, 1000, 'sed')).toEqual([20, 21, 2]);
    expect(tiltFirstChoice([20, 15, 15], 2, 1000, 'sed')).toEqual([20, 15, 21]); // sed: above the highest
    expect(tiltFirstChoice([20, 15, 15], 2, 1000, 'wrr')).toEqual([20, 15, 15]); // wrr: a share, left alone
    expect(tiltFirstChoice([20, 15, 15], 2, 1000, 'wlc')).toEqual([20, 15, 15]);
    expect(tiltFirstChoice([20, 8, 2], 0, 1000, 'sed')).toEqual([20, 8, 2]); // already the only highest
    expect(tiltFirstChoice([20, 20], -1, 1000, 'sed')).toEqual([20, 20]); // no such real server here
    expect(tiltFirstChoice([0, 5], 0, 1000, 'sed')).toEqual([0, 5]); // quiesced stays quiesced
    expect(tiltFirstChoice([1000, 1000], 0, 1000, 'sed')).toEqual([1000, 1000]); // never above the cap
  });

  it('a node applies its own first choice only; a published choice naming no backend refuses the object', () => {
    const obj = (firstChoices: unknown) => ({ metadata: { namespace: 'shop', name: 'web' },
      spec: { ports: [{ port: 'http', weights: { '10.10.1.1:8080': 20, '10.10.1.2:8080': 20, '10.10.1.3:8080': 2 }, firstChoices }] } });
    const parsed = parseWeightsObject(obj({ 'node-a': '10.10.1.2:8080', 'node-b': '10.10.1.1:8080' }));
    if ('error' in parsed) throw new Error(parsed.error);
    const applied = (node: string) => {
      const cw = new ClusterWeights(30_000, undefined, undefined, node);
      cw.publish('shop/web', parsed.views, parsed.firstChoices);
      return cw.apply(table, new Set([KEY]), 0).table.get(KEY)!.dests.map((d) => d.weight);
    };
    expect(applied('node-a')).toEqual([20, 21, 2]);
    expect(applied('node-b')).toEqual([21, 20, 2]);
    // node-c was dealt nothing (not yet, or a cluster above DEAL_MAX_NODES): it takes its own.
    const own = localFirstChoice('node-c', VIEW, parsed.views.get(VIEW)!);
    expect(applied('node-c')).toEqual(B.map((b, i) => (b === own && i < 2 ? 21 : [20, 20, 2][i])));
    // Under sed the dealt backend becomes the idle choice even below the highest weight.
    const sedTable = new Map([[KEY, { ...table.get(KEY)!, vs: { ...table.get(KEY)!.vs, scheduler: 'sed' } }]]);
    const cw = new ClusterWeights(30_000, undefined, undefined, 'node-c');
    cw.publish('shop/web', parsed.views, new Map([[VIEW, new Map([['node-c', '10.10.1.3:8080']])]]));
    expect(cw.apply(sedTable, new Set([KEY]), 0).table.get(KEY)!.dests.map((d) => d.weight)).toEqual([20, 20, 21]);
    expect(parseWeightsObject(obj({ 'node-a': '10.9.9.9:8080' }))).toEqual({ error: expect.stringContaining('first choice of node-a is "10.9.9.9:8080", not a backend of its weights') });
    expect(parseWeightsObject(obj({ 'node-a': 7 }))).toEqual({ error: expect.stringContaining('first choice of node-a is 7') });
    expect(parseWeightsObject(obj(['x']))).toEqual({ error: expect.stringContaining('firstChoices is not an object') });
    // Reporters: a list of node names, or the whole object is refused.
    const withReporters = (reporters: unknown) => ({ ...obj(undefined), spec: { ...obj(undefined).spec, reporters } });
    const named = parseWeightsObject(withReporters(['node-a', 'node-b']));
    if ('error' in named) throw new Error(named.error);
    expect(named.reporters).toEqual(['node-a', 'node-b']);
    expect(parseWeightsObject(withReporters('node-a'))).toEqual({ error: 'spec.reporters is not a list of node names' });
    expect(parseWeightsObject(withReporters([7]))).toEqual({ error: 'spec.reporters is not a list of node names' });
    const reporter = new ClusterWeights(30_000, undefined, undefined, 'node-a');
    const bystander = new ClusterWeights(30_000, undefined, undefined, 'node-c');
    for (const cw of [reporter, bystander]) {
      cw.apply(table, new Set([KEY]), 0);
      cw.publish('shop/web', named.views, named.firstChoices, named.reporters);
    }
    expect([reporter.reports(VIEW), [...reporter.optedServers()].length]).toEqual([true, 1]);
    expect([bystander.reports(VIEW), [...bystander.optedServers()].length]).toEqual([false, 0]);
    bystander.forget('shop/web');
    expect(bystander.reports(VIEW)).toBe(true);
  });

  it('a plugin\'s weigh() is told the node\'s first choice, and the tie it leaves is broken the same way', () => {
    let told: string | undefined;
    const cw = new ClusterWeights(30_000, undefined, () => (eps, view) => { told = view.firstChoice; return eps.map(() => 7); }, 'node-a');
    cw.publish('shop/web', new Map([[VIEW, new Map(B.map((b) => [b, 20]))]]), new Map([[VIEW, new Map([['node-a', B[2]!]])]]));
    expect(cw.apply(table, new Set([KEY]), 0).table.get(KEY)!.dests.map((d) => d.weight)).toEqual([7, 7, 8]);
    expect(told).toBe(B[2]);
  });
});
