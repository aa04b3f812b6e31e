// src/balance: node-seeded real server order, the slow-start ramp and weight composition, pure.
// Addresses: Service 10.200.1.10:80 (fixtures.ts), pods 10.10.1.<n>; virtual server keys are
// made-up strings where only the tracker's bookkeeping matters.
import { describe, expect, it } from '@jest/globals';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { buildDesired } from '../../../src/desired/state.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import type { DesiredTable, DesiredVirtualServer } from '../../../src/desired/types.js';
import { makeRealServer, makeVirtualServer, realServerKey } from '../../../src/model/ipvs.js';
import { ENDPOINT_ORDER_ANNOTATION, addOrder, fnv1a32, preferenceOrder, seedOffset } from '../../../src/balance/order.js';
import {
  MIN_RAMP_STEP_MS, RAMP_STEPS, SLOW_START_ANNOTATION, SlowStartTracker, nextRampAt, parseSlowStart, rampFactor, rampStep, slowStartInapplicable,
} from '../../../src/balance/slow-start.js';
import { MAX_WEIGHT, RAMP_RESOLUTION, composeWeight } from '../../../src/balance/weights.js';
import { makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const PODS = ['10.10.1.1', '10.10.1.2', '10.10.1.3'];

function desiredOn(nodeName: string, mutate?: (s: V1Service) => void, pods = PODS) {
  return buildDesired({ services: [makeService('ns1', 'svc1', mutate)], endpointSlices: [makeSlice('ns1', 'svc1', 'a', pods.map((ip) => ({ ip, node: 'node-x' })))],
    node: makeNode(), nodeName }, defaultProxyConfig, new PluginRegistry());
}

function annotate(a: Record<string, string>): (s: V1Service) => void {
  return (s) => { s.metadata!.annotations = { ...s.metadata!.annotations, ...a }; };
}

/** The backend the kernel lists first once `dests` are added in order: the last one added. */
function kernelHead(dests: readonly { address: string }[]): string {
  return dests[dests.length - 1]!.address;
}

describe('node-seeded order', () => {
  it('fnv1a32 matches the published FNV-1a test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it("fnv1a32 hashes the bytes Buffer.from(s, 'utf8') makes, lone surrogates as U+FFFD", () => {
    const byBuffer = (s: string) => {
      let h = 0x811c9dc5;
      for (const b of Buffer.from(s, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
      return h;
    };
    const samples = ['node-1\u0000default/web/http/IPv4', 'é', '\u07ff', '\u0800', 'ü-zone/日本', '\uffff', '😀x',
      '\ud83d', 'a\ud83d', '\ude00b', '\udbff\udfff', '\ud800\ud800\udc00'];
    // And a thousand strings of random UTF-16 units, surrogates among them.
    let seed = 7;
    const unit = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % 0x10000;
    for (let i = 0; i < 1000; i++) samples.push(String.fromCharCode(...Array.from({ length: i % 9 }, unit)));
    for (const s of samples) expect([s, fnv1a32(s)]).toEqual([s, byBuffer(s)]);
  });

  it('a rotation of the sorted list, reversed for adding', () => {
    const sorted = ['a', 'b', 'c', 'd', 'e'];
    for (const node of ['n1', 'n2', 'worker-17']) {
      const pref = preferenceOrder(sorted, node, 'ns/svc/http/IPv4');
      const k = seedOffset(node, 'ns/svc/http/IPv4', sorted.length);
      expect(pref).toEqual([...sorted.slice(k), ...sorted.slice(0, k)]);
      expect([...pref].sort()).toEqual(sorted);
      expect(addOrder(sorted, node, 'ns/svc/http/IPv4')).toEqual([...pref].reverse());
    }
    expect(preferenceOrder([], 'n1', 's')).toEqual([]);
  });

  it.each([2, 3, 5, 20])('first choices of 1000 nodes spread over %i backends', (n) => {
    const counts = new Array<number>(n).fill(0);
    for (let i = 0; i < 1000; i++) counts[seedOffset(`node-${i}`, 'default/web/http/IPv4', n)]!++;
    const mean = 1000 / n;
    // Binomial(1000, 1/n): 5 standard deviations either side.
    const sd = Math.sqrt(1000 * (1 / n) * (1 - 1 / n));
    for (const c of counts) {
      expect(c).toBeGreaterThan(mean - 5 * sd);
      expect(c).toBeLessThan(mean + 5 * sd);
    }
  });

  it('one node spreads its first choices over Services too', () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 300; i++) counts[seedOffset('node-a', `ns/svc-${i}/http/IPv4`, 3)]!++;
    expect(Math.min(...counts)).toBeGreaterThan(50);
  });

  it('buildDesired: nodes put different backends at the head of the kernel list; sorted turns it off', () => {
    const heads = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const dests = desiredOn(`node-${i}`).table.get('TCP 10.200.1.10:80')!.dests;
      expect(dests.map((d) => d.address).sort()).toEqual(PODS);
      heads.add(kernelHead(dests));
    }
    expect([...heads].sort()).toEqual(PODS);
    const sortedHeads = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const d = desiredOn(`node-${i}`, annotate({ [ENDPOINT_ORDER_ANNOTATION]: 'sorted' }));
      expect(d.table.get('TCP 10.200.1.10:80')!.dests.map((r) => r.address)).toEqual(PODS);
      sortedHeads.add(kernelHead(d.table.get('TCP 10.200.1.10:80')!.dests));
    }
    expect([...sortedHeads]).toEqual(['10.10.1.3']); // the herd: every node's first choice alike
  });

  it('buildDesired: a bad endpoint-order is a problem on that Service, and the default is used', () => {
    const d = desiredOn('node-a', annotate({ [ENDPOINT_ORDER_ANNOTATION]: 'random' }));
    expect(d.problems).toEqual([expect.objectContaining({ service: 'ns1/svc1', reason: 'InvalidEndpointOrder' })]);
    expect(d.table.get('TCP 10.200.1.10:80')!.dests.map((r) => r.address))
      .toEqual(desiredOn('node-a').table.get('TCP 10.200.1.10:80')!.dests.map((r) => r.address));
  });
});

describe('slow start: parsing and applicability', () => {
  it.each([
    ['30s', 30_000], ['2m', 120_000], ['1m30s', 90_000], ['1.5s', 1500], [' 45s ', 45_000], ['0s', 0], ['1h', 3_600_000],
  ])('%j is %i ms', (v, ms) => expect(parseSlowStart(v)).toEqual({ ms }));

  it.each([['30'], ['abc'], ['-5s'], ['500ms'], ['2h'], ['1d'], [''], [30], [null], [{}]])('%j is refused with a message', (v) => {
    const r = parseSlowStart(v);
    expect('error' in r && r.error.startsWith(SLOW_START_ANNOTATION)).toBe(true);
  });

  it('applies to the share-by-weight schedulers and says why not for the others', () => {
    for (const s of ['wrr', 'wlc', 'sed', 'nq', 'twos']) expect(slowStartInapplicable(s)).toBeUndefined();
    for (const s of ['rr', 'lc', 'dh']) expect(slowStartInapplicable(s)).toMatch(/ignores weights/);
    for (const s of ['sh', 'mh']) expect(slowStartInapplicable(s)).toMatch(/remap/);
    for (const s of ['lblc', 'lblcr', 'ovf']) expect(slowStartInapplicable(s)).toMatch(/thresholds/);
    expect(slowStartInapplicable('fo')).toMatch(/highest weight/);
    expect(slowStartInapplicable('mine')).toMatch(/not known/);
  });

  it('buildDesired: wlc gets the window; rr a SlowStartInapplicable problem; a bad value only its own Service', () => {
    const wlc = desiredOn('node-a', annotate({ 'ipvs-operator.io/scheduler': 'wlc', [SLOW_START_ANNOTATION]: '30s' }));
    expect(wlc.problems).toEqual([]);
    expect(wlc.table.get('TCP 10.200.1.10:80')!.slowStartMs).toBe(30_000);
    const rr = desiredOn('node-a', annotate({ [SLOW_START_ANNOTATION]: '30s' }));
    expect(rr.problems).toEqual([expect.objectContaining({ reason: 'SlowStartInapplicable', message: expect.stringMatching(/rr ignores weights/) })]);
    expect(rr.table.get('TCP 10.200.1.10:80')!.slowStartMs).toBeUndefined();
    const bad = makeService('ns1', 'bad', (s) => {
      s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11'];
      s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'wlc', [SLOW_START_ANNOTATION]: 'soon' };
    });
    const both = buildDesired({ services: [makeService('ns1', 'svc1', annotate({ 'ipvs-operator.io/scheduler': 'wlc', [SLOW_START_ANNOTATION]: '30s' })), bad],
      endpointSlices: [], node: makeNode(), nodeName: 'node-a' }, defaultProxyConfig, new PluginRegistry());
    expect(both.problems).toEqual([expect.objectContaining({ service: 'ns1/bad', reason: 'InvalidSlowStart' })]);
    expect(both.table.get('TCP 10.200.1.10:80')!.slowStartMs).toBe(30_000);
    expect(both.table.has('TCP 10.200.1.11:80')).toBe(true);
    expect(both.table.get('TCP 10.200.1.11:80')!.slowStartMs).toBeUndefined();
  });
});

describe('slow start: the ramp', () => {
  it.each([1000, 5000, 30_000, 3_600_000])('a %i ms window rises in steps from 0 to 1, changing only when nextRampAt says', (w) => {
    const first = 1_000_000;
    expect(rampFactor(first, first, w)).toBe(0);
    expect(rampFactor(first, first + w, w)).toBe(1);
    expect(rampFactor(-Infinity, first, w)).toBe(1);
    expect(nextRampAt(first, first + w, w)).toBeUndefined();
    let t = first;
    let prev = 0;
    let steps = 0;
    while (t < first + w) {
      const at = nextRampAt(first, t, w)!;
      expect(at).toBeGreaterThan(t);
      expect(at - t).toBeLessThanOrEqual(rampStep(w));
      expect(rampFactor(first, at - 1, w)).toBe(rampFactor(first, t, w)); // constant until the step
      const f = rampFactor(first, at, w);
      expect(f).toBeGreaterThan(prev);
      prev = f;
      t = at;
      steps++;
    }
    expect(prev).toBe(1);
    expect(steps).toBeLessThanOrEqual(RAMP_STEPS);
    expect(rampStep(w)).toBeGreaterThanOrEqual(MIN_RAMP_STEP_MS);
  });

  it('composeWeight: base x resolution x factor, at least 1, 0 stays 0, clamped', () => {
    expect(composeWeight({ base: 3 })).toBe(3);
    expect(composeWeight({ base: 1, slowStart: 0 })).toBe(1);
    expect(composeWeight({ base: 1, slowStart: 1 })).toBe(RAMP_RESOLUTION);
    expect(composeWeight({ base: 3, slowStart: 0.5 })).toBe(150);
    expect(composeWeight({ base: 0, slowStart: 1 })).toBe(0);
    expect(composeWeight({ base: MAX_WEIGHT, slowStart: 1 })).toBe(MAX_WEIGHT);
    expect(composeWeight({ base: 1, slowStart: 7 })).toBe(RAMP_RESOLUTION);
  });
});

describe('SlowStartTracker', () => {
  const vs = makeVirtualServer({ family: 'IPv4', protocol: 'TCP', address: '10.200.1.10', port: 80, scheduler: 'wlc' });
  const entry = (pods: string[], slowStartMs: number | null = 10_000): DesiredVirtualServer => ({
    vs, dests: pods.map((a) => makeRealServer({ address: a, port: 8080, weight: 1, forward: 'masq' })),
    origin: { namespace: 'ns1', name: 'svc1', portName: 'http', kind: 'cluster-ip', plugin: 'wlc' },
    ...(slowStartMs === null ? {} : { slowStartMs }),
  });
  const K = 'TCP 10.200.1.10:80';
  const weights = (t: DesiredTable) => Object.fromEntries(t.get(K)!.dests.map((r) => [r.address, r.weight]));

  it('established at first sight, a later one ramps, and the planner is told when weights move', () => {
    const ss = new SlowStartTracker();
    const t0 = 1_000_000;
    let r = ss.apply(new Map([[K, entry(['10.10.1.1', '10.10.1.2'])]]), new Set([K]), t0);
    expect(weights(r.table)).toEqual({ '10.10.1.1': 100, '10.10.1.2': 100 });
    expect(r.nextAt).toBeUndefined();
    const t1 = t0 + 5000;
    const scaled = new Map([[K, entry(['10.10.1.1', '10.10.1.2', '10.10.1.3'])]]);
    r = ss.apply(scaled, new Set([K]), t1);
    expect(weights(r.table)).toEqual({ '10.10.1.1': 100, '10.10.1.2': 100, '10.10.1.3': 1 });
    expect(r.nextAt).toBe(t1 + rampStep(10_000));
    expect(ss.factor(K, realServerKey(r.table.get(K)!.dests[2]!), t1)).toBe(0);
    // A timer sync: nothing changed in the desired state, but the ramp moved.
    const changed = new Set<string>();
    r = ss.apply(scaled, changed, t1 + 5000);
    expect(changed.has(K)).toBe(true);
    expect(weights(r.table)['10.10.1.3']).toBe(50);
    const changed2 = new Set<string>();
    r = ss.apply(scaled, changed2, t1 + 5001); // same step: nothing to plan
    expect(changed2.size).toBe(0);
    r = ss.apply(scaled, new Set(), t1 + 10_000);
    expect(weights(r.table)['10.10.1.3']).toBe(100);
    expect(r.nextAt).toBeUndefined();
    // It leaves and comes back: it ramps again.
    ss.apply(new Map([[K, entry(['10.10.1.1', '10.10.1.2'])]]), new Set([K]), t1 + 20_000);
    r = ss.apply(scaled, new Set([K]), t1 + 21_000);
    expect(weights(r.table)['10.10.1.3']).toBe(1);
  });

  it('a plugin\'s ramp() decides the weights during a ramp from frozen inputs; a bad answer falls back, with a problem on that Service', () => {
    let seen: unknown;
    const quadratic = new SlowStartTracker(() => (eps) => {
      seen = { frozen: Object.isFrozen(eps) && eps.every(Object.isFrozen), factors: eps.map((e) => e.factor) };
      return eps.map((e) => Math.max(1, Math.round(e.weight * 100 * e.factor * e.factor)));
    });
    const t0 = 1_000_000;
    quadratic.apply(new Map([[K, entry(['10.10.1.1', '10.10.1.2'])]]), new Set([K]), t0);
    const scaled = new Map([[K, entry(['10.10.1.1', '10.10.1.2', '10.10.1.3'])]]);
    quadratic.apply(scaled, new Set([K]), t0 + 1000);
    const r = quadratic.apply(scaled, new Set([K]), t0 + 6000);
    expect(weights(r.table)).toEqual({ '10.10.1.1': 100, '10.10.1.2': 100, '10.10.1.3': 25 });
    expect(seen).toEqual({ frozen: true, factors: [1, 1, 0.5] });
    expect(quadratic.problems).toEqual([]);
    for (const bad of [() => { throw new Error('boom'); }, () => [1], () => [1, 1, 0.5], () => [1, -1, 1]]) {
      const ss = new SlowStartTracker(() => bad as never);
      ss.apply(new Map([[K, entry(['10.10.1.1', '10.10.1.2'])]]), new Set([K]), t0);
      const back = ss.apply(scaled, new Set([K]), t0 + 1000);
      expect(weights(back.table)).toEqual({ '10.10.1.1': 100, '10.10.1.2': 100, '10.10.1.3': 1 });
      expect(ss.problems).toEqual([expect.objectContaining({ service: 'ns1/svc1', reason: 'PluginRampFailed' })]);
      // Slow start turned off: the problem goes with it.
      ss.apply(new Map([[K, entry(['10.10.1.1'], null)]]), new Set([K]), t0 + 2000);
      expect(ss.problems).toEqual([]);
    }
  });

  it('a virtual server without slow start passes through untouched, and the view reads like the table', () => {
    const ss = new SlowStartTracker();
    const plain = new Map([[K, entry(['10.10.1.1'], null)]]);
    expect(ss.apply(plain, new Set([K]), 0).table).toBe(plain);
    const other = 'TCP 10.200.1.11:80';
    const mixed = new Map<string, DesiredVirtualServer>([[K, entry(['10.10.1.1'])], [other, entry(['10.10.1.9'], null)]]);
    const view = ss.apply(mixed, new Set([K, other]), 0).table;
    expect(view.size).toBe(2);
    expect([...view.keys()]).toEqual([K, other]);
    expect([...view.values()].map((e) => e.dests[0]!.weight)).toEqual([100, 1]);
    expect(view.get(other)).toBe(mixed.get(other));
    expect(view.get('nope')).toBeUndefined();
    // Slow start turned off: back to the plain weights.
    const off = new Map([[K, entry(['10.10.1.1'], null)]]);
    expect(ss.apply(off, new Set([K]), 1).table).toBe(off);
  });
});
