// The cross-node balance experiment's arithmetic (lab/cluster/balance-stats.ts) and its mode syntax.
import { describe, expect, it } from '@jest/globals';
import { imbalanceIndex, renderBalanceTable, spread, summarize } from '../../../lab/cluster/balance-stats.js';
import { modeAnnotations } from '../../../lab/cluster/balance.js';

describe('imbalance index', () => {
  it('is 0 when load follows capacity, whatever the scale', () => {
    expect(imbalanceIndex([10, 10, 10], [50, 50, 50])).toBe(0);
    expect(imbalanceIndex([100, 100, 10], [50, 50, 500])).toBeCloseTo(0, 10);
  });
  it('an even split over 50/50/500 ms backends (rr) is about 1.06; everything to the slow one is worse', () => {
    expect(imbalanceIndex([80, 80, 80], [50, 50, 500])).toBeCloseTo(1.0607, 3);
    expect(imbalanceIndex([0, 0, 240], [50, 50, 500])).toBeGreaterThan(imbalanceIndex([80, 80, 80], [50, 50, 500]));
  });
  it('is the same for any permutation of backends with their times', () => {
    expect(imbalanceIndex([5, 30, 7], [20, 90, 300])).toBeCloseTo(imbalanceIndex([7, 5, 30], [300, 20, 90]), 12);
  });
  it('refuses mismatched lengths and reads no requests as 0', () => {
    expect(() => imbalanceIndex([1, 2], [1, 2, 3])).toThrow(/one count per backend/);
    expect(imbalanceIndex([0, 0, 0], [1, 2, 3])).toBe(0);
  });
});

describe('one run summarized', () => {
  const clients = [
    { node: 'n1', ok: 3, errors: 0, samples: [['b', 10], ['a', 30], ['b', 20]] as Array<[string, number]>, first: 'b' },
    { node: 'n2', ok: 2, errors: 1, samples: [['a', 40], ['', 5000], ['c', 50]] as Array<[string, number]>, first: 'a' },
  ];
  const s = summarize({ mode: 'sed', placement: 'spread', concurrency: 1, backends: ['a', 'b', 'c'], serviceMs: [1, 1, 1], clients, seconds: 1.234 });
  it('counts requests per backend over every client, errors apart, latency percentiles of the answered ones', () => {
    expect(s.byBackend).toEqual([2, 2, 1]);
    expect({ errors: s.errors, p50: s.p50, p99: s.p99, seconds: s.seconds }).toEqual({ errors: 1, p50: 30, p99: 50, seconds: 1.2 });
    expect(s.firsts).toEqual(['n1: b', 'n2: a']);
  });
  it('folds repeats into median [min-max] rows', () => {
    expect(spread([3, 1, 2])).toBe('2 [1-3]');
    expect(spread([4, 4])).toBe('4');
    const t = renderBalanceTable([s, { ...s, byBackend: [4, 0, 1] }], ['a', 'b', 'c']).split('\n');
    expect(t).toHaveLength(3);
    expect(t[2]).toContain('| sed | spread | 1 | 3 [2-4] | 1 [0-2] | 1 |');
  });
});

describe('modes', () => {
  it('are a scheduler then +key=value annotations of ipvs-operator.io/', () => {
    expect(modeAnnotations('sed+endpoint-order=sorted+balance=cluster')).toEqual({
      'ipvs-operator.io/scheduler': 'sed', 'ipvs-operator.io/endpoint-order': 'sorted', 'ipvs-operator.io/balance': 'cluster',
    });
    expect(() => modeAnnotations('+x=y')).toThrow(/scheduler first/);
    expect(() => modeAnnotations('rr+oops')).toThrow(/not key=value/);
  });
});
