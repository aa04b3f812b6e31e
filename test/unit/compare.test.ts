// lab compare's pure parts: kube-proxy's iptables-mode payload (whole text, for the study notes'
// Service default/svc-clusterip:svc-webport 10.200.1.63:9000 -> 10.10.1.3, 10.10.2.4, 10.10.3.3:80,
// whose chain names a real cluster showed), the binomial bound, profiles and weights, the table,
// the SVG chart and its PNG, flags and the progress line.
import { describe, expect, it } from '@jest/globals';
import { latencyAxis, renderChart } from '../../src/compare/chart.js';
import { CompareUsageError, parseCompareFlags } from '../../src/compare/flags.js';
import { type KubeProxyService, renderKubeProxyRestore, renderKubeProxyTeardown } from '../../src/compare/kube-proxy.js';
import { pngSize, renderPng } from '../../src/compare/png.js';
import { formatProgress } from '../../src/compare/progress.js';
import { binomialBounds, logHistogram, summarizeLatency } from '../../src/compare/stats.js';
import { renderTables } from '../../src/compare/table.js';
import {
  type CompareResults, type ModeRun, buildProfile, parseModes, parseProfiles, speedWeights,
} from '../../src/compare/types.js';
import { dedent } from '../support/iptables-text.js';

const notesService = (mut: (s: KubeProxyService) => void = () => {}): KubeProxyService => {
  const s: KubeProxyService = {
    namespace: 'default', name: 'svc-clusterip', portName: 'svc-webport', clusterIP: '10.200.1.63', port: 9000,
    endpoints: ['10.10.1.3', '10.10.2.4', '10.10.3.3'].map((ip) => ({ ip, port: 80 })), clusterCIDR: '10.10.0.0/16',
  };
  mut(s);
  return s;
};

describe('kube-proxy iptables mode payload', () => {
  it('is the notes\' chains: KUBE-SERVICES -> KUBE-SVC (random 1/3, 1/2, rest) -> KUBE-SEP DNAT, masquerade', () => {
    expect(renderKubeProxyRestore(notesService())).toBe(dedent(`
      *nat
      :KUBE-SERVICES - [0:0]
      :KUBE-POSTROUTING - [0:0]
      :KUBE-MARK-MASQ - [0:0]
      :KUBE-SVC-KBDEBIL6IU6WL7RF - [0:0]
      :KUBE-SEP-2WDU4O4C4SDCYWRE - [0:0]
      :KUBE-SEP-W5ROWLZT7Z7YVFGJ - [0:0]
      :KUBE-SEP-K7ALM6KJRBAYOHKX - [0:0]
      -I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
      -I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
      -I POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
      -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
      -A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
      -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
      -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
      -A KUBE-SERVICES -m comment --comment "default/svc-clusterip:svc-webport cluster IP" -m tcp -p tcp -d 10.200.1.63 --dport 9000 -j KUBE-SVC-KBDEBIL6IU6WL7RF
      -A KUBE-SVC-KBDEBIL6IU6WL7RF -m comment --comment "default/svc-clusterip:svc-webport cluster IP" -m tcp -p tcp -d 10.200.1.63 --dport 9000 ! -s 10.10.0.0/16 -j KUBE-MARK-MASQ
      -A KUBE-SVC-KBDEBIL6IU6WL7RF -m comment --comment "default/svc-clusterip:svc-webport -> 10.10.1.3:80" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-2WDU4O4C4SDCYWRE
      -A KUBE-SVC-KBDEBIL6IU6WL7RF -m comment --comment "default/svc-clusterip:svc-webport -> 10.10.2.4:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-W5ROWLZT7Z7YVFGJ
      -A KUBE-SVC-KBDEBIL6IU6WL7RF -m comment --comment "default/svc-clusterip:svc-webport -> 10.10.3.3:80" -j KUBE-SEP-K7ALM6KJRBAYOHKX
      -A KUBE-SEP-2WDU4O4C4SDCYWRE -m comment --comment default/svc-clusterip:svc-webport -s 10.10.1.3 -j KUBE-MARK-MASQ
      -A KUBE-SEP-2WDU4O4C4SDCYWRE -m comment --comment default/svc-clusterip:svc-webport -m tcp -p tcp -j DNAT --to-destination 10.10.1.3:80
      -A KUBE-SEP-W5ROWLZT7Z7YVFGJ -m comment --comment default/svc-clusterip:svc-webport -s 10.10.2.4 -j KUBE-MARK-MASQ
      -A KUBE-SEP-W5ROWLZT7Z7YVFGJ -m comment --comment default/svc-clusterip:svc-webport -m tcp -p tcp -j DNAT --to-destination 10.10.2.4:80
      -A KUBE-SEP-K7ALM6KJRBAYOHKX -m comment --comment default/svc-clusterip:svc-webport -s 10.10.3.3 -j KUBE-MARK-MASQ
      -A KUBE-SEP-K7ALM6KJRBAYOHKX -m comment --comment default/svc-clusterip:svc-webport -m tcp -p tcp -j DNAT --to-destination 10.10.3.3:80
      COMMIT
    `));
  });

  it('sessionAffinity ClientIP: a recent --rcheck per endpoint before the random rules, --set at the DNAT', () => {
    const text = renderKubeProxyRestore(notesService((s) => { s.affinitySeconds = 10800; }));
    const svc = text.split('\n').filter((l) => l.startsWith('-A KUBE-SVC-KBDEBIL6IU6WL7RF'));
    expect(svc[1]).toBe('-A KUBE-SVC-KBDEBIL6IU6WL7RF -m comment --comment "default/svc-clusterip:svc-webport -> 10.10.1.3:80" ' +
      '-m recent --name KUBE-SEP-2WDU4O4C4SDCYWRE --rcheck --seconds 10800 --reap -j KUBE-SEP-2WDU4O4C4SDCYWRE');
    expect(svc.slice(1, 4).every((l) => l.includes('--rcheck'))).toBe(true);
    expect(svc.slice(4).map((l) => /--probability (\S+)/.exec(l)?.[1] ?? 'rest')).toEqual(['0.3333333333', '0.5000000000', 'rest']);
    expect(text).toContain('-A KUBE-SEP-W5ROWLZT7Z7YVFGJ -m comment --comment default/svc-clusterip:svc-webport ' +
      '-m recent --name KUBE-SEP-W5ROWLZT7Z7YVFGJ --set -m tcp -p tcp -j DNAT --to-destination 10.10.2.4:80');
  });

  it('n endpoints get 1/n, 1/(n-1), ..., 1/2 and a last rule without statistic', () => {
    const text = renderKubeProxyRestore(notesService((s) => {
      s.endpoints = Array.from({ length: 5 }, (_, i) => ({ ip: `10.10.1.${i + 2}`, port: 8080 }));
    }));
    const probs = text.split('\n').filter((l) => l.includes(' -> ')).map((l) => /--probability (\S+)/.exec(l)?.[1] ?? 'rest');
    expect(probs).toEqual(['0.2000000000', '0.2500000000', '0.3333333333', '0.5000000000', 'rest']);
  });

  it('the teardown deletes the jumps, then flushes and deletes every chain it added', () => {
    expect(renderKubeProxyTeardown(notesService((s) => { s.endpoints = s.endpoints.slice(0, 1); }))).toBe(dedent(`
      *nat
      -D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
      -D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
      -D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
      -F KUBE-SERVICES
      -F KUBE-POSTROUTING
      -F KUBE-MARK-MASQ
      -F KUBE-SVC-KBDEBIL6IU6WL7RF
      -F KUBE-SEP-2WDU4O4C4SDCYWRE
      -X KUBE-SERVICES
      -X KUBE-POSTROUTING
      -X KUBE-MARK-MASQ
      -X KUBE-SVC-KBDEBIL6IU6WL7RF
      -X KUBE-SEP-2WDU4O4C4SDCYWRE
      COMMIT
    `));
  });
});

describe('statistics', () => {
  it('binomialBounds: exact tails, each at most alpha/2 and as tight as possible', () => {
    const { lo, hi } = binomialBounds(300, 1 / 3, 0.001);
    // Checked with an independent exact computation (Python's math.comb): P(X<74) = 0.00044,
    // P(X>127) = 0.00047. The normal approximation (z 3.29, sd 8.16) gives about 73..127.
    expect([lo, hi]).toEqual([74, 127]);
    expect(binomialBounds(100, 0.5, 0.05)).toEqual({ lo: 40, hi: 60 });
  });

  it('rejects nonsense', () => {
    expect(() => binomialBounds(10, 0, 0.01)).toThrow(/0 < p < 1/);
    expect(() => binomialBounds(1.5, 0.5, 0.01)).toThrow(/integer/);
  });

  it('summarizeLatency leaves errors out; logHistogram clamps to the end bins', () => {
    expect(summarizeLatency([['a', 10], ['b', 20], ['', 5000], ['a', 30], ['b', 40]]))
      .toEqual({ p50: 20, p95: 40, p99: 40, max: 40, mean: 25 });
    expect(summarizeLatency([])).toEqual({ p50: 0, p95: 0, p99: 0, max: 0, mean: 0 });
    expect(logHistogram([0.5, 1, 10, 99, 1000], 1, 100, 2)).toEqual([2, 3]);
  });
});

describe('profiles, modes, weights', () => {
  it('builds the four profiles for n backends, the last one odd', () => {
    expect(buildProfile('equal', 3).backends.map((b) => b.delayMs)).toEqual([20, 20, 20]);
    expect(buildProfile('one-slow', 3).backends.map((b) => b.delayMs)).toEqual([20, 20, 200]);
    expect(buildProfile('heterogeneous', 3).backends.map((b) => b.delayMs)).toEqual([10, 35, 120]);
    expect(buildProfile('stall', 2).backends).toEqual([
      { delayMs: 20, stallEveryMs: 0, stallMs: 0 }, { delayMs: 20, stallEveryMs: 2500, stallMs: 1000 }]);
    expect(() => parseProfiles('equal,fast', 3)).toThrow(/unknown profile "fast"/);
  });

  it('wrr weights follow speed: slowest 1', () => {
    expect(speedWeights(buildProfile('equal', 3))).toEqual([1, 1, 1]);
    expect(speedWeights(buildProfile('one-slow', 3))).toEqual([10, 10, 1]);
    expect(speedWeights(buildProfile('heterogeneous', 3))).toEqual([12, 3, 1]);
  });

  it('modes by name, in table order; unknown ones named', () => {
    expect(parseModes('sed,iptables,rr').map((m) => m.name)).toEqual(['iptables', 'rr', 'sed']);
    expect(parseModes('iptables-affinity')[0]).toEqual({ name: 'iptables-affinity', kind: 'iptables', affinity: true });
    expect(() => parseModes('rr,maglev')).toThrow(/unknown mode\(s\) \["maglev"\]/);
  });

  it('flags: defaults, and bad values as usage errors', () => {
    const defaults = { backends: '3', profiles: 'equal', modes: 'rr', requests: '600', concurrency: '8' };
    expect(parseCompareFlags(defaults)).toEqual({
      backends: 3, profiles: 'equal', modes: 'rr', load: { requests: 600, concurrency: 8, keepAlive: false, timeoutMs: 5000 },
    });
    expect(() => parseCompareFlags({ ...defaults, concurrency: '0' })).toThrow(CompareUsageError);
    expect(() => parseCompareFlags({ ...defaults, modes: 'nope' })).toThrow(CompareUsageError);
    expect(() => parseCompareFlags({ ...defaults, requests: '10', concurrency: '11' })).toThrow(/1\.\.10/);
  });
});

/** A results set as a run would produce: 3 backends, two profiles, three modes, made-up samples. */
function fixture(): CompareResults {
  const backends = [1, 2, 3].map((i) => ({ name: `webpod${i}`, ip: `10.10.1.${10 + i}`, port: 80 }));
  const runs: ModeRun[] = [];
  const profiles = [buildProfile('equal', 3), buildProfile('one-slow', 3)];
  for (const p of profiles) {
    for (const [mode, split] of [['iptables', [70, 62, 68]], ['rr', [67, 67, 66]], ['lc', [90, 88, 22]]] as const) {
      const samples: Array<[string, number]> = [];
      split.forEach((n, i) => {
        for (let k = 0; k < n; k++) samples.push([`webpod${i + 1}`, (p.backends[i]!.delayMs + 3) * (1 + (k % 10) / 20)]);
      });
      samples.push(['', 5000]);
      runs.push({
        profile: p.name, mode, requests: 201, ok: 200, errors: 1, errorKinds: { TIMEOUT: 1 },
        byPod: Object.fromEntries(split.map((n, i) => [`webpod${i + 1}`, n])), latencyMs: summarizeLatency(samples),
        durationMs: 1000, samples,
      });
    }
  }
  return {
    version: 1, startedAt: '2026-01-01T00:00:00.000Z', kernel: '6.1.0-test', vip: '10.200.1.10', port: 80, backends,
    load: { requests: 201, concurrency: 8, keepAlive: false, timeoutMs: 5000 }, profiles, modes: ['iptables', 'rr', 'lc'], runs,
  };
}

describe('rendering', () => {
  it('the table: per profile, counts and shares per backend, percentiles, errors', () => {
    const text = renderTables(fixture());
    expect(text).toContain('201 requests per mode and profile, 8 concurrent, keep-alive off; VIP 10.200.1.10:80, 3 backends');
    expect(text).toContain('profile one-slow: last backend 200 ms, others 20 ms (webpod1 20 ms, webpod2 20 ms, webpod3 200 ms)');
    const lc = text.split('\n').filter((l) => l.startsWith('lc '));
    expect(lc[1]).toMatch(/^lc\s+90\s+45\.0%\s+88\s+44\.0%\s+22\s+11\.0%\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+1$/);
    expect(text.split('\n').filter((l) => /^mode\s+webpod1\s+webpod2\s+webpod3\s+p50 ms\s+p95 ms\s+p99 ms\s+errors$/.test(l))).toHaveLength(2);
  });

  it('the chart: an SVG with one row per mode and profile, log axis ticks, and a PNG of its size', () => {
    const svg = renderChart(fixture());
    expect(svg.startsWith('<?xml')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    for (const label of ['iptables random', 'ipvs rr', 'ipvs lc', 'profile equal', 'profile one-slow', '20 ms', '100 ms']) {
      expect(svg).toContain(`>${label}`);
    }
    expect(svg.match(/<circle /g)).toHaveLength(6 + 1); // a p50 marker per row, one in the legend
    const [, w, h] = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(svg)!;
    const png = renderPng(svg);
    expect(pngSize(png)).toEqual({ width: Number(w), height: Number(h) });
    expect(png.length).toBeGreaterThan(10_000);
    expect(pngSize(Buffer.from('not a png'))).toBeUndefined();
  });

  it('latencyAxis: 1-2-5 bounds around the data, at least a decade', () => {
    expect(latencyAxis([23, 180, 1200])).toEqual({ lo: 20, hi: 2000, ticks: [20, 50, 100, 200, 500, 1000, 2000] });
    expect(latencyAxis([3, 4]).hi).toBe(20);
  });

  it('the progress line', () => {
    const run = fixture().runs[0]!;
    expect(formatProgress({ step: 3, total: 12, profile: 'one-slow', mode: 'lc', run }, 30_000))
      .toBe(`[ 3/12] ####............ one-slow      lc                  200 ok 1 err  p99 ${run.latencyMs.p99.toFixed(0)} ms  0:30 elapsed, ~1:30 left`);
  });
});
