// Cluster load view, simulated: a fleet of nodes with closed-loop clients, backends with different
// service times, stepped in time; the aggregator (src/balance/damping.ts) publishes weights every
// period from the nodes' reports and every node applies them. Pure and seeded: the place to tune.
//
// The model, stated:
// - Each client holds one connection at a time and opens a new one as soon as the last ends
//   (closed loop, a new connection per request, no think time).
// - A backend serves every connection in its service time × uniform[0.5, 1.5) whatever its load
//   (an infinite server), so its capacity share is ∝ 1 / service time: 50/50/500 ms gives the
//   slow backend 1/21 by capacity, the figure of issue 27.
// - Each node picks with the kernel's wrr (net/netfilter/ipvs/ip_vs_wrr.c: walk the list from
//   the last pick, take the first destination with weight ≥ cw; at the end of the list cw -= gcd,
//   and below 1 cw = max weight; a weight change restarts at the list head with cw cleared when it
//   exceeds the new max). The node's list is its node-seeded preference order (order.ts).
//   wrr, not sed: with a few connections per node sed's (active+1)/weight sends almost nothing to
//   a low weight, so the share would follow the node's concurrency, not the weights.
// - At each period's end every node reports its counters as IPVS keeps them (active = open
//   connections, cumulative connections and bytes) and the weights published then apply at once,
//   each node's first choice among equal highest weights one higher (first-choice.ts), unless
//   `firstChoices: false`.
// Backends 10.10.1.1-3:8080; nodes node-0..node-11.
import { describe, expect, it } from '@jest/globals';
import { preferenceOrder } from '../../../src/balance/order.js';
import { type DampingConfig, DEFAULT_DAMPING, NO_DEAD_ZONE, type ViewState, initialView, stepView } from '../../../src/balance/damping.js';
import { type NodeReport, type ReportLimits } from '../../../src/balance/estimate.js';
import { prng } from '../../support/fixtures.js';
import { assignFirstChoices, sameChoices, tiltFirstChoice } from '../../../src/balance/first-choice.js';

const BACKENDS = ['10.10.1.1:8080', '10.10.1.2:8080', '10.10.1.3:8080'];
const SERVICE = 'ns1/svc1/http/IPv4';
const PERIOD_MS = 2_000;
const LIMITS: ReportLimits = { periodMs: PERIOD_MS, stalePeriods: 3, maxSkewMs: 1_000, maxConnRate: 1_000_000, maxConns: 10_000_000 };


const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** One node's wrr, as ip_vs_wrr.c keeps it: the last pick (-1 = list head), cw, max weight, gcd. */
class Wrr {
  private cl = -1;
  private cw = 0;
  private mw = 0;
  private di = 1;
  private weights = new Map<string, number>();
  constructor(private readonly list: string[], weights: Map<string, number>) { this.setWeights(weights); }

  /** ip_vs_wrr_dest_changed. */
  setWeights(weights: Map<string, number>): void {
    this.weights = new Map(weights);
    const ws = this.list.map((b) => this.weights.get(b) ?? 0).filter((w) => w > 0);
    this.di = ws.reduce(gcd, 0) || 1;
    this.mw = (ws.length ? Math.max(...ws) : 0) - (this.di - 1);
    if (this.cw > this.mw) this.cw = 0;
    this.cl = -1;
  }

  pick(): string {
    for (;;) {
      this.cl += 1;
      if (this.cl >= this.list.length) {
        this.cl = -1;
        this.cw -= this.di;
        if (this.cw <= 0) this.cw = this.mw;
        continue;
      }
      const b = this.list[this.cl]!;
      if ((this.weights.get(b) ?? 0) >= this.cw) return b;
    }
  }
}

/**
 * One node's sed (ip_vs_sed.c): the destination with the least (active + 1) / weight, compared
 * as (a + 1) × w' > (a' + 1) × w so that the first of equal candidates in the list wins.
 */
class Sed {
  private weights = new Map<string, number>();
  constructor(private readonly list: string[], weights: Map<string, number>, private readonly active: (b: string) => number) {
    this.setWeights(weights);
  }

  setWeights(weights: Map<string, number>): void { this.weights = new Map(weights); }

  pick(): string {
    let best: string | undefined;
    for (const b of this.list) {
      const w = this.weights.get(b) ?? 0;
      if (w <= 0) continue;
      if (best === undefined || (this.active(best) + 1) * w > (this.active(b) + 1) * this.weights.get(best)!) best = b;
    }
    return best!;
  }
}

type Lie = 'absurd' | 'backwards' | 'negative';

interface SimOptions {
  seed: number;
  nodes: number;
  clientsPerNode: number;
  /** Service time per backend in ms, from period 0. */
  serviceMs: number[];
  periods: number;
  /** First period whose published weights the nodes apply (before: equal weights). */
  viewFrom: number;
  /** At the start of this period backend `backend` takes `ms`. */
  change?: { period: number; backend: number; ms: number };
  /** Node 0 lies this way in every report. */
  lie?: Lie;
  damping?: DampingConfig;
  /** The nodes' scheduler (default wrr). */
  scheduler?: 'wrr' | 'sed';
  /** Service time spread: uniform [0.5, 1.5) × mean (default), or exponential with that mean. */
  spread?: 'uniform' | 'exponential';
  /** Whether the aggregator deals first choices among equal highest weights (default true, as the operator does). */
  firstChoices?: boolean;
}

interface PeriodRecord {
  /** New connections per backend during the period, all nodes. */
  conns: number[];
  /** Weights the nodes use during the next period. */
  weights: number[];
  /** Estimated time in system per backend, seconds. */
  estimate: (number | undefined)[];
  rejectionsOfNode0: string[];
  /** Whether the liar's report, removed, would have given the same step (true without a liar). */
  lieIgnored: boolean;
  /** The backend each node's first new connection of the period went to. */
  firsts: number[];
}

/** Run the fleet; returns one record per period. */
function simulate(o: SimOptions): PeriodRecord[] {
  const rand = prng(o.seed);
  const damping = o.damping ?? DEFAULT_DAMPING;
  const serviceMs = [...o.serviceMs];
  const nodes = Array.from({ length: o.nodes }, (_, i) => `node-${i}`);
  const equal = new Map(BACKENDS.map((b) => [b, damping.maxWeight]));
  // Per node and backend: open connections, cumulative connections and bytes.
  const active = nodes.map(() => BACKENDS.map(() => 0));
  const total = nodes.map(() => BACKENDS.map(() => 0));
  const wrr = nodes.map((n, i) => (o.scheduler === 'sed'
    ? new Sed(preferenceOrder(BACKENDS, n, SERVICE), equal, (b) => active[i]![BACKENDS.indexOf(b)]!)
    : new Wrr(preferenceOrder(BACKENDS, n, SERVICE), equal)));
  const serve = (b: number): number => (o.spread === 'exponential' ? -Math.log(1 - rand()) : 0.5 + rand()) * serviceMs[b]!;
  let periodConns = BACKENDS.map(() => 0);
  let firsts: (number | undefined)[] = nodes.map(() => undefined);
  // Pending completions: [time ms, node, backend], kept sorted by time (few hundred entries).
  let pending: [number, number, number][] = [];
  const insert = (e: [number, number, number]): void => {
    let lo = 0;
    let hi = pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pending[mid]![0] <= e[0]) lo = mid + 1;
      else hi = mid;
    }
    pending.splice(lo, 0, e);
  };
  const open = (t: number, n: number): void => {
    const b = BACKENDS.indexOf(wrr[n]!.pick());
    active[n]![b]! += 1;
    total[n]![b]! += 1;
    periodConns[b]! += 1;
    firsts[n] ??= b;
    insert([t + serve(b), n, b]);
  };
  for (let n = 0; n < o.nodes; n++) for (let c = 0; c < o.clientsPerNode; c++) open(rand() * 10, n);

  let view: ViewState = initialView(BACKENDS, damping);
  let choices = new Map<string, string>();
  const out: PeriodRecord[] = [];
  for (let p = 0; p < o.periods; p++) {
    if (o.change && p === o.change.period) serviceMs[o.change.backend] = o.change.ms;
    const end = (p + 1) * PERIOD_MS;
    while (pending.length && pending[0]![0] < end) {
      const [t, n, b] = pending[0]!;
      pending = pending.slice(1);
      active[n]![b]! -= 1;
      open(t, n);
    }
    const reports: NodeReport[] = nodes.map((node, n) => ({
      node, at: end, backends: BACKENDS.map((backend, b) => ({
        backend, active: active[n]![b]!, inactive: 0, conns: total[n]![b]!, inBytes: 300 * total[n]![b]!, outBytes: 2_000 * total[n]![b]!,
      })),
    }));
    if (o.lie) reports[0] = lie(reports[0]!, o.lie, p);
    const step = stepView(view, reports, BACKENDS, end, LIMITS, damping);
    let lieIgnored = true;
    if (o.lie) {
      const without = stepView(view, reports.slice(1), BACKENDS, end, LIMITS, damping);
      lieIgnored = JSON.stringify([...without.estimate]) === JSON.stringify([...step.estimate])
        && JSON.stringify([...without.weights]) === JSON.stringify([...step.weights]);
    }
    view = step.state;
    // As the operator does: update-dest (and so the scheduler's dest_changed reset) only when a
    // weight or a first choice moved, not every period.
    const dealt = o.firstChoices === false ? new Map<string, string>() : assignFirstChoices([...step.state.nodes.keys()], step.weights, choices);
    if (p + 1 === o.viewFrom || (p + 1 > o.viewFrom && (step.write || !sameChoices(dealt, choices)))) {
      wrr.forEach((w, n) => {
        const tilted = tiltFirstChoice(BACKENDS.map((b) => step.weights.get(b)!), BACKENDS.indexOf(dealt.get(nodes[n]!) ?? ''), Number.MAX_SAFE_INTEGER, o.scheduler ?? 'wrr');
        w.setWeights(new Map(BACKENDS.map((b, i) => [b, tilted[i]!])));
      });
    }
    choices = dealt;
    out.push({
      conns: periodConns, weights: BACKENDS.map((b) => step.weights.get(b)!), estimate: BACKENDS.map((b) => step.estimate.get(b)),
      rejectionsOfNode0: step.rejections.filter((r) => r.node === 'node-0').map((r) => r.reason), lieIgnored,
      firsts: firsts.map((b) => b ?? -1),
    });
    periodConns = BACKENDS.map(() => 0);
    firsts = nodes.map(() => undefined);
  }
  return out;
}

/** Node 0's report turned into a lie of the given kind (on the slow backend, where it would hurt most). */
function lie(r: NodeReport, kind: Lie, period: number): NodeReport {
  const backends = r.backends.map((b) => ({ ...b }));
  const slow = backends[2]!;
  if (kind === 'absurd') slow.conns += 1e9 * (period + 1); // ~5e8 conn/s: "the slow one is fast"
  if (kind === 'backwards') slow.conns = period % 2 ? 0 : slow.conns;
  if (kind === 'negative') slow.active = -5;
  return { ...r, backends };
}

const share = (recs: PeriodRecord[], b: number): number => {
  const all = recs.reduce((s, r) => s + r.conns.reduce((x, y) => x + y, 0), 0);
  return recs.reduce((s, r) => s + r.conns[b]!, 0) / all;
};

const BASE: SimOptions = { seed: 27, nodes: 12, clientsPerNode: 2, serviceMs: [50, 50, 500], periods: 90, viewFrom: 5,
  change: { period: 45, backend: 1, ms: 500 } };

describe('cluster load view, simulated fleet (12 nodes × 2 clients, wrr, period 2 s)', () => {
  const run = simulate(BASE);

  it('before the view (equal weights) the slow backend gets about 1/3 of new connections', () => {
    expect(Math.abs(share(run.slice(0, 5), 2) - 1 / 3)).toBeLessThan(0.02);
  });

  it('after convergence the slow backend gets its share by capacity, 1/21 ± 0.015', () => {
    // Periods 25..44: 20 periods after the view started, before the step change. With weights
    // 1..20 the ideal is 20/20/2.
    expect(Math.abs(share(run.slice(25, 45), 2) - 1 / 21)).toBeLessThan(0.015);
    for (const r of run.slice(25, 45)) {
      expect(Math.max(r.weights[0]!, r.weights[1]!)).toBe(20);
      expect(r.weights[2]).toBeGreaterThanOrEqual(1);
      expect(r.weights[2]).toBeLessThanOrEqual(3);
    }
  });

  it('after a fast backend turns slow the weights converge again within 16 periods', () => {
    // Steady state: 20/2/2 (capacity 1/12 each for the two slow ones). Converged = every weight
    // within 2 of it from that period to the end (seed 27: 14 periods, the EWMA's lag).
    const steady = [20, 2, 2];
    const near = (r: PeriodRecord): boolean => r.weights.every((w, i) => Math.abs(w - steady[i]!) <= 2);
    let first = run.length;
    while (first > 45 && near(run[first - 1]!)) first -= 1;
    expect(first).toBeLessThan(run.length);
    expect(first - 45).toBeLessThanOrEqual(16);
    expect(Math.abs(share(run.slice(70, 90), 1) - 1 / 12)).toBeLessThan(0.02);
    expect(Math.abs(share(run.slice(70, 90), 2) - 1 / 12)).toBeLessThan(0.02);
  });

  it('oscillation is bounded: max - min of each weight over 20 periods', () => {
    const range = (from: number, b: number): number => {
      const ws = run.slice(from, from + 20).map((r) => r.weights[b]!);
      return Math.max(...ws) - Math.min(...ws);
    };
    // After the step change (one fast backend, always 20; the slow ones near the floor): ≤ 2.
    for (let b = 0; b < BACKENDS.length; b++) expect(range(70, b)).toBeLessThanOrEqual(2);
    // Before it, two fast backends of ~3 active connections each: the sampled Σ active is noisy.
    // Without the dead zone whichever was not at 20 wandered (seed 27: 12..20); with it both stay
    // at 20 (measured: 0), and the slow one within 2.
    expect(Math.max(range(25, 0), range(25, 1))).toBeLessThanOrEqual(2);
    expect(range(25, 2)).toBeLessThanOrEqual(2);
  });

  it.each(['absurd', 'backwards', 'negative'] as Lie[])('a node that lies (%s) does not move the estimate', (kind) => {
    const lied = simulate({ ...BASE, periods: 45, lie: kind });
    // Every period, the step with the liar's report equals the step without it.
    expect(lied.every((r) => r.lieIgnored)).toBe(true);
    // Each rejection clears the liar's baseline, so its next report only sets one: absurd and
    // backwards reports are refused every other period, negative ones every period.
    const expected = { absurd: 'absurd-rate', backwards: 'backwards', negative: 'negative' }[kind];
    expect(lied.slice(1).filter((r) => r.rejectionsOfNode0.includes(expected)).length).toBeGreaterThanOrEqual(kind === 'negative' ? 43 : 21);
    expect(Math.abs(share(lied.slice(25, 45), 2) - 1 / 21)).toBeLessThan(0.015);
  });
});

describe('equal backends, one sequential client per node, sed (the lab\'s herd)', () => {
  // 4 nodes × 1 client, three backends of 50 ms with exponential service times: a few open
  // connections per node, so every period's estimate is noisy. A sequential client finds every
  // backend idle, so sed sends its node to the highest weight, the first of equals in the node's
  // list: with equal weights each node keeps its own first choice (node-seeded order: here 3 of
  // the 4 nodes prefer one backend and 1 another, the hash's luck); with weights made from noise,
  // every node goes to the single highest one. Eight seeds (the service times' draws).
  const EQUAL: SimOptions = { seed: 0, nodes: 4, clientsPerNode: 1, serviceMs: [50, 50, 50], periods: 60, viewFrom: 5,
    scheduler: 'sed', spread: 'exponential' };
  const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
  const allOnOne = (recs: PeriodRecord[]): number => recs.filter((r) => r.conns.filter((c) => c > 0).length === 1).length;
  const equalWeights = (recs: PeriodRecord[]): number => recs.filter((r) => r.weights.every((w) => w === 20)).length;
  const withZone = SEEDS.map((seed) => simulate({ ...EQUAL, seed }).slice(20));
  // The dead zone alone (first choices off), then the first choices on top.
  const without = SEEDS.map((seed) => simulate({ ...EQUAL, seed, firstChoices: false, damping: { ...DEFAULT_DAMPING, deadZone: NO_DEAD_ZONE } }).slice(20));
  const hashOnly = SEEDS.map((seed) => simulate({ ...EQUAL, seed, firstChoices: false }).slice(20));
  /** Per period, the most connections any one backend got, as a share of the period's. */
  const topShare = (r: PeriodRecord) => Math.max(...r.conns) / r.conns.reduce((x, y) => x + y, 0);

  it('with the dead zone the weights stay equal and the nodes keep their own first choices', () => {
    for (const run of withZone) {
      expect(equalWeights(run)).toBeGreaterThanOrEqual(36);
      expect(allOnOne(run)).toBe(0);
    }
  });

  it('without it, noise becomes weights and sed herds', () => {
    // Measured: 0-5 periods of 40 with equal weights, and every connection of the period on one
    // backend in 22-40 of 40, in every seed.
    for (const run of without) {
      expect(equalWeights(run)).toBeLessThan(10);
      expect(allOnOne(run)).toBeGreaterThanOrEqual(20);
    }
  });

  it('first choices deal the idle nodes out evenly: 2, 1 and 1 nodes per backend where the hash gave 3, 1 and 0', () => {
    for (const [i, run] of withZone.entries()) {
      // Each period: the nodes' first connections spread 2/1/1 over the backends, every backend
      // gets connections, and none more than about half of them.
      for (const r of run) {
        expect([0, 1, 2].map((b) => r.firsts.filter((f) => f === b).length).sort()).toEqual([1, 1, 2]);
        expect(r.conns.every((c) => c > 0)).toBe(true);
      }
      // The hash alone (node-0..3 over three backends): three nodes on one backend, one idle.
      for (const r of hashOnly[i]!) {
        expect([0, 1, 2].map((b) => r.firsts.filter((f) => f === b).length).sort()).toEqual([0, 1, 3]);
      }
      // Measured, mean over the 40 periods of each seed: 0.49-0.51 dealt, 0.75-0.76 by the hash alone.
      const mean = (rs: PeriodRecord[]) => rs.reduce((x, r) => x + topShare(r), 0) / rs.length;
      expect(mean(run)).toBeLessThan(0.56);
      expect(mean(hashOnly[i]!)).toBeGreaterThan(0.68);
    }
  });

  it('first choices alone, without the dead zone: weights from noise no longer herd the idle nodes', () => {
    const dealtNoZone = SEEDS.map((seed) => simulate({ ...EQUAL, seed, damping: { ...DEFAULT_DAMPING, deadZone: NO_DEAD_ZONE } }).slice(20));
    for (const run of dealtNoZone) {
      // Measured: weights equal in 0-5 periods of 40, as without first choices; yet no period
      // with every connection on one backend, and the busiest backend had 0.49-0.50 of a period's.
      expect(allOnOne(run)).toBe(0);
      expect(run.map(topShare).reduce((x, y) => x + y) / run.length).toBeLessThan(0.56);
    }
  });

  it('one slow backend (500 ms) still gets less than its share by capacity', () => {
    for (const seed of SEEDS.slice(0, 3)) expect(share(simulate({ ...EQUAL, seed, serviceMs: [50, 50, 500] }).slice(20), 2)).toBeLessThan(1 / 21);
  });
});
