// lab compare's pure parts: kube-proxy's iptables-mode payload (whole text, for the study notes'
// Service default/svc-clusterip:svc-webport 10.200.1.63:9000 -> 10.10.1.3, 10.10.2.4, 10.10.3.3:80,
// whose chain names a real cluster showed), the binomial bound, profiles and weights, the table,
// the SVG chart and its PNG, flags and the progress line.
import { describe, expect, it } from '@jest/globals';
import { latencyAxis, renderChart } from '../../../lab/compare/chart.js';
import { CompareUsageError, parseCompareFlags } from '../../../lab/compare/flags.js';
import { type KubeProxyService, renderKubeProxyRestore, renderKubeProxyTeardown } from '../../../lab/compare/kube-proxy.js';
import { pngSize, renderPng } from '../../../lab/compare/png.js';
import { formatProgress } from '../../../lab/compare/progress.js';
import { hashName, nftNames, renderNftRuleset, renderNftTeardown } from '../../../lab/compare/kube-proxy-nft.js';
import {
  binomialBounds, calloutDifferences, formatSpread, logHistogram, separated, spread, summarizeLatency, summarizeRuns,
} from '../../../lab/compare/stats.js';
import { renderTables } from '../../../lab/compare/table.js';
import {
  type CompareResults, type ModeRun, buildProfile, parseModes, parseProfiles, scaleUnit, speedWeights,
} from '../../../lab/compare/types.js';
import { WRK_SCRIPT, parseWrkOutput, toModeRun, wrkArgs } from '../../../lab/compare/wrk.js';
import { dedent } from '../../support/iptables-text.js';

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
      reps: 3, baseline: true,
    });
    expect(parseCompareFlags({})).toMatchObject({ profiles: 'equal,one-slow,heterogeneous,stall', modes: 'iptables,nftables,rr,wrr,lc,wlc,sed,nq,sh,mh' });
    expect(parseCompareFlags({ ...defaults, reps: '5', 'unit-ms': '40', 'no-baseline': true })).toMatchObject({ reps: 5, unitMs: 40, baseline: false });
    expect(() => parseCompareFlags({ ...defaults, reps: '0' })).toThrow(/--reps must be an integer 1\.\.50/);
    expect(() => parseCompareFlags({ ...defaults, concurrency: '0' })).toThrow(CompareUsageError);
    expect(() => parseCompareFlags({ ...defaults, modes: 'nope' })).toThrow(CompareUsageError);
    expect(() => parseCompareFlags({ ...defaults, requests: '10', concurrency: '11' })).toThrow(/1\.\.10/);
  });

  it('presets: the notes\' two experiments; explicit flags still win; unknown ones named', () => {
    expect(parseCompareFlags({ preset: 'notes-100' })).toMatchObject({
      modes: 'iptables,nftables,rr,lc,sed', profiles: 'equal', load: { requests: 100, concurrency: 1, keepAlive: false },
    });
    expect(parseCompareFlags({ preset: 'affinity' }).modes).toBe('iptables-affinity,nftables-affinity,rr-affinity');
    expect(parseCompareFlags({ preset: 'notes-100', requests: '300', modes: 'rr' })).toMatchObject({ modes: 'rr', load: { requests: 300 } });
    expect(() => parseCompareFlags({ preset: 'nope' })).toThrow(/unknown preset "nope"; use notes-100, affinity/);
    expect(parseModes('rr-affinity,nftables-affinity')).toEqual([
      { name: 'nftables-affinity', kind: 'nftables', affinity: true },
      { name: 'rr-affinity', kind: 'ipvs', scheduler: 'rr', affinity: true },
    ]);
  });

  it('profiles scale to a unit; scaleUnit makes the fast backend 4x the baseline p50 (20..250 ms)', () => {
    expect(buildProfile('one-slow', 3, 50).backends.map((b) => b.delayMs)).toEqual([50, 50, 500]);
    expect(buildProfile('stall', 2, 40).backends[1]).toEqual({ delayMs: 40, stallEveryMs: 5000, stallMs: 2000 });
    expect(parseProfiles('heterogeneous', 3, 40).map((p) => p.backends.map((b) => b.delayMs))).toEqual([[20, 69, 240]]);
    const cases: Array<[number, { unitMs: number; dominates: boolean }]> = [
      [2, { unitMs: 20, dominates: true }],
      [11.2, { unitMs: 45, dominates: true }],
      [62.5, { unitMs: 250, dominates: true }],
      [80, { unitMs: 250, dominates: false }],
    ];
    for (const [p50, want] of cases) expect({ p50, ...scaleUnit(p50) }).toEqual({ p50, ...want });
  });
});

describe('kube-proxy nftables mode ruleset', () => {
  it('chain names hash as kube-proxy\'s hashAndTruncate (values from its proxier_test.go)', () => {
    expect(hashName('ns1/svc1/tcp/p80')).toBe('ULMVA6XW-ns1/svc1/tcp/p80');
    expect(hashName('ns1/svc1/tcp/p80__10.180.0.1/80')).toBe('5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80');
    expect(hashName('ns4/svc4/tcp/p80__10.180.0.5/80')).toBe('5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80');
    expect(hashName('ns5/svc5/tcp/p80__10.180.0.3/80')).toBe('GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80');
    expect(hashName('x'.repeat(300))).toHaveLength(240);
  });

  it('is the whole ruleset for the notes\' Service: base rules, service-ips map, numgen random vmap, DNAT per endpoint', () => {
    const base = (cidr: string, node: string) => dedent(`
      add table ip kube-proxy { comment "rules for kube-proxy" ; }

      add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
      add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }

      add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
      add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
      add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
      add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
      add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }

      add chain ip kube-proxy cluster-ips-check
      add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
      add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
      add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
      add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
      add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
      add chain ip kube-proxy firewall-check
      add chain ip kube-proxy mark-for-masquerade
      add chain ip kube-proxy masquerading
      add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
      add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
      add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
      add chain ip kube-proxy nodeport-endpoints-check
      add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
      add chain ip kube-proxy services
      add chain ip kube-proxy service-endpoints-check

      add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
      add rule ip kube-proxy cluster-ips-check ip daddr { ${cidr} } drop comment "Drop traffic to unallocated ClusterIPs"
      add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
      add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
      add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
      add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
      add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
      add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
      add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
      add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
      add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
      add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
      add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
      add rule ip kube-proxy masquerading mark set mark xor 0x4000
      add rule ip kube-proxy masquerading masquerade fully-random
      add rule ip kube-proxy nat-output jump services
      add rule ip kube-proxy nat-postrouting jump masquerading
      add rule ip kube-proxy nat-prerouting jump services
      add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
      add rule ip kube-proxy reject-chain reject
      add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
      add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
      XX
      add element ip kube-proxy nodeport-ips { ${node} }
      add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
    `).replace('XX', '');
    // kube-proxy's baseRules in its proxier_test.go, with its test's service CIDR and node IP.
    const text = renderNftRuleset(notesService(), { serviceCIDR: '10.200.0.0/16', nodeIPs: ['192.168.10.10'] });
    const ep1 = 'endpoint-4QS5T2A7-default/svc-clusterip/tcp/svc-webport__10.10.1.3/80';
    const ep2 = 'endpoint-FP33LDJM-default/svc-clusterip/tcp/svc-webport__10.10.2.4/80';
    const ep3 = 'endpoint-U2OX22NR-default/svc-clusterip/tcp/svc-webport__10.10.3.3/80';
    const svc = 'service-TBJA4EUE-default/svc-clusterip/tcp/svc-webport';
    expect(text).toBe(base('10.200.0.0/16', '192.168.10.10') + dedent(`
      XX
      # default/svc-clusterip
      add chain ip kube-proxy ${ep1}
      add chain ip kube-proxy ${ep2}
      add chain ip kube-proxy ${ep3}
      add chain ip kube-proxy ${svc}
      add rule ip kube-proxy ${svc} ip daddr 10.200.1.63 ip saddr != 10.10.0.0/16 jump mark-for-masquerade
      add rule ip kube-proxy ${svc} numgen random mod 3 vmap { 0 : goto ${ep1} , 1 : goto ${ep2} , 2 : goto ${ep3} }

      add rule ip kube-proxy ${ep1} ip saddr 10.10.1.3 jump mark-for-masquerade
      add rule ip kube-proxy ${ep1} meta l4proto tcp dnat to 10.10.1.3:80
      add rule ip kube-proxy ${ep2} ip saddr 10.10.2.4 jump mark-for-masquerade
      add rule ip kube-proxy ${ep2} meta l4proto tcp dnat to 10.10.2.4:80
      add rule ip kube-proxy ${ep3} ip saddr 10.10.3.3 jump mark-for-masquerade
      add rule ip kube-proxy ${ep3} meta l4proto tcp dnat to 10.10.3.3:80

      add element ip kube-proxy cluster-ips { 10.200.1.63 }
      add element ip kube-proxy service-ips { 10.200.1.63 . tcp . 9000 : goto ${svc} }
    `).replace('XX', ''));
    expect(renderNftTeardown()).toBe('delete table ip kube-proxy\n');
  });

  it('sessionAffinity ClientIP: a timeout set per endpoint, checked before numgen, updated before the DNAT', () => {
    const s = notesService((x) => { x.affinitySeconds = 10800; x.endpoints = x.endpoints.slice(0, 2); });
    const n = nftNames(s);
    const lines = renderNftRuleset(s, { serviceCIDR: '10.200.0.0/16', nodeIPs: [] }).split('\n');
    const svcRules = lines.filter((l) => l.startsWith(`add rule ip kube-proxy ${n.service} `)).map((l) => l.slice(`add rule ip kube-proxy ${n.service} `.length));
    expect(svcRules).toEqual([
      'ip daddr 10.200.1.63 ip saddr != 10.10.0.0/16 jump mark-for-masquerade',
      `ip saddr @${n.affinity[0]} goto ${n.endpoints[0]}`,
      `ip saddr @${n.affinity[1]} goto ${n.endpoints[1]}`,
      `numgen random mod 2 vmap { 0 : goto ${n.endpoints[0]} , 1 : goto ${n.endpoints[1]} }`,
    ]);
    expect(lines).toContain(`add set ip kube-proxy ${n.affinity[1]} { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }`);
    expect(lines.filter((l) => l.startsWith(`add rule ip kube-proxy ${n.endpoints[0]} `))).toEqual([
      `add rule ip kube-proxy ${n.endpoints[0]} ip saddr 10.10.1.3 jump mark-for-masquerade`,
      `add rule ip kube-proxy ${n.endpoints[0]} update @${n.affinity[0]} { ip saddr }`,
      `add rule ip kube-proxy ${n.endpoints[0]} meta l4proto tcp dnat to 10.10.1.3:80`,
    ]);
    expect(() => renderNftRuleset(notesService((x) => { x.endpoints = []; }), { serviceCIDR: '10.200.0.0/16', nodeIPs: [] })).toThrow(/at least one endpoint/);
  });
});

describe('wrk', () => {
  const line = 'WRK-RESULT {"requests":100,"durationUs":2500000,"bad":1,"byPod":{"webpod1":40,"webpod2":59},' +
    '"errors":{"connect":2,"read":0,"write":0,"status":0,"timeout":1},' +
    '"latencyUs":{"min":21000,"max":250000,"mean":30500.5,"stdev":9000.1,"q":[[0.5,21000],[1.5,21500],[50,24000],[95,90000],[99,200000]]}}';

  it('arguments: one thread, N connections, the script with its request count and Connection: close without keep-alive', () => {
    expect(wrkArgs('http://10.200.1.10:80/', { requests: 100, concurrency: 1, keepAlive: false, timeoutMs: 5000 }, '/t/c.lua'))
      .toEqual(['-t', '1', '-c', '1', '-d', '530s', '--timeout', '5s', '-s', '/t/c.lua', 'http://10.200.1.10:80/', '--', '100', 'close']);
    expect(wrkArgs('http://x/', { requests: 10, concurrency: 8, keepAlive: true, timeoutMs: 2000 }, 's').slice(-2)).toEqual(['10', 'keep-alive']);
    expect(WRK_SCRIPT).toContain('wrk.headers["Connection"] = "close"');
    expect(WRK_SCRIPT).toContain('latency:percentile(p)');
  });

  it('its result line becomes a ModeRun: counts, errors by kind, percentiles in ms, the distribution', () => {
    const r = toModeRun('equal', 'rr', 2, parseWrkOutput(`Running 1m test\n  100 requests in 2.50s\n${line}\n`));
    expect(r).toEqual({
      profile: 'equal', mode: 'rr', rep: 2, requests: 103, ok: 99, errors: 4, errorKinds: { connect: 2, timeout: 1, 'bad answer': 1 },
      byPod: { webpod1: 40, webpod2: 59 }, latencyMs: { p50: 24, p95: 90, p99: 200, max: 250, mean: 30.5 }, durationMs: 2500,
      quantiles: [[0.5, 21], [1.5, 21.5]],
    });
    expect(() => parseWrkOutput('Running 1m test\nunable to connect')).toThrow(/no WRK-RESULT line/);
  });
});

describe('repetitions and spread', () => {
  it('spread: median and min-max; separated only when the intervals do not touch', () => {
    expect(spread([5, 1, 3])).toEqual({ median: 3, lo: 1, hi: 5 });
    expect(spread([4, 1, 3, 2])).toEqual({ median: 2.5, lo: 1, hi: 4 });
    expect(spread([])).toEqual({ median: 0, lo: 0, hi: 0 });
    expect(separated({ median: 2, lo: 1, hi: 3 }, { median: 5, lo: 4, hi: 6 })).toBe(true);
    expect(separated({ median: 2, lo: 1, hi: 4 }, { median: 5, lo: 4, hi: 6 })).toBe(false);
    expect(formatSpread({ median: 24.04, lo: 20, hi: 130.2 })).toBe('24 [20-130]');
    expect(formatSpread({ median: 7, lo: 7, hi: 7 })).toBe('7');
  });

  it('callouts: each mode against the first and rr, only beyond the spread', () => {
    const names = ['a', 'b', 'c'];
    const run = (mode: string, p95: number, c: number): ModeRun => ({
      profile: 'x', mode, requests: 100, ok: 100, errors: 0, errorKinds: {}, byPod: { a: 50 - c / 2, b: 50 - c / 2, c },
      latencyMs: { p50: 10, p95, p99: p95 * 2, max: 0, mean: 0 }, durationMs: 1,
    });
    const sum = (mode: string, rows: Array<[number, number]>) => summarizeRuns(rows.map(([p95, c]) => run(mode, p95, c)), names);
    const ipt = sum('iptables', [[100, 33], [120, 30], [90, 36]]);
    const rr = sum('rr', [[110, 33], [105, 33], [95, 34]]);
    const lc = sum('lc', [[40, 6], [50, 8], [45, 5]]);
    expect(calloutDifferences([ipt, rr, lc], names)).toEqual([
      'lc p95 below iptables: 45 [40-50] vs 100 [90-120] ms',
      'lc p99 below iptables: 90 [80-100] vs 200 [180-240] ms',
      'lc sends c fewer requests than iptables: 6 [5-8] vs 33 [30-36]',
      'lc p95 below rr: 45 [40-50] vs 105 [95-110] ms',
      'lc p99 below rr: 90 [80-100] vs 210 [190-220] ms',
      'lc sends c fewer requests than rr: 6 [5-8] vs 33 [33-34]',
    ]);
    expect(calloutDifferences([ipt, rr], names)).toEqual([]);
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

/** 3 interleaved runs of iptables, nftables and lc under one-slow, with a baseline, latencies as quantiles. */
function repsFixture(withBaseline: boolean): CompareResults {
  const f = fixture();
  const mk = (mode: string, rep: number, pods: [number, number, number], p50: number): ModeRun => ({
    profile: 'one-slow', mode, rep, requests: 100, ok: 100, errors: 0, errorKinds: {},
    byPod: { webpod1: pods[0], webpod2: pods[1], webpod3: pods[2] },
    latencyMs: { p50, p95: p50 * 3, p99: p50 * 6, max: p50 * 8, mean: p50 * 1.2 }, durationMs: 1000,
    quantiles: [[0.5, p50 / 2], [50.5, p50], [99.5, p50 * 6]],
  });
  const runs: ModeRun[] = [];
  const base: ModeRun[] = [];
  [0, 1, 2].forEach((i) => {
    runs.push(mk('iptables', i + 1, [33 + i, 34 - i, 33], 55 + 5 * i));
    runs.push(mk('lc', i + 1, [44 + i, 46 - i, 10], 28 + 2 * i));
    base.push({ ...mk('iptables', i + 1, [33 + i, 34 - i, 33 - i + 1], 3 + i), profile: 'baseline' });
  });
  base[2]!.byPod = { webpod1: 35, webpod2: 32, webpod3: 33 };
  return {
    ...f, version: 2, reps: 3, loadgen: 'wrk', profiles: [buildProfile('one-slow', 3)], modes: ['iptables', 'nftables', 'lc'],
    runs: runs.map((x) => ({ ...x, mode: x.mode === 'iptables' && x.rep === 9 ? 'nftables' : x.mode })).concat(
      [0, 1, 2].map((i) => mk('nftables', i + 1, [33, 33, 34], 58 + i))),
    ...(withBaseline ? { baseline: { mode: 'iptables', runs: base, p50Ms: 4, unitMs: 20, dominates: true } } : {}),
  };
}

describe('rendering', () => {
  it('the table: per profile, answers per backend, percentiles, errors (one run: bare values)', () => {
    const text = renderTables(fixture());
    expect(text).toContain('201 requests per run, 8 concurrent, keep-alive off; 1 run(s) per mode and profile, interleaved; VIP 10.200.1.10:80, 3 backends');
    expect(text).toContain('profile one-slow: last backend 200 ms, others 20 ms (webpod1 20 ms, webpod2 20 ms, webpod3 200 ms)');
    const lc = text.split('\n').filter((l) => l.startsWith('lc '));
    expect(lc[1]).toMatch(/^lc\s+90\s+88\s+22\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+1$/);
    expect(text.split('\n').filter((l) => /^mode\s+webpod1\s+webpod2\s+webpod3\s+p50 ms\s+p95 ms\s+p99 ms\s+errors$/.test(l))).toHaveLength(2);
    expect(text).not.toContain('baseline');
  });

  it('the table with repetitions and a baseline: median [min-max] cells, the dominance line, callouts', () => {
    const r = repsFixture(true);
    const text = renderTables(r);
    expect(text).toContain('3 run(s) per mode and profile, interleaved');
    expect(text).toContain('each figure: median over the runs [min-max of the runs]');
    expect(text).toMatch(/^baseline\s+34 \[33-35\]\s+33 \[32-34\]\s+33 \[33-34\]\s+4 \[3-5\]\s/m); // webpod3: 34, 33, 33
    expect(text).toContain('profiles scaled to it: unit 20 ms');
    expect(text).toContain('backend times dominate: the fast backend\'s 20 ms is >= 4x the harness\'s p50');
    expect(text).toMatch(/^lc\s+45 \[44-46\]\s+45 \[44-46\]\s+10\s+30 \[28-32\]/m); // every run sent 10: a bare value
    const callouts = text.split('\n').find((l) => l.startsWith('differences larger than the spread (intervals apart): '));
    expect(callouts).toContain('lc p50 below iptables: 30 [28-32] vs 60 [55-65] ms');
    expect(callouts).toContain('lc sends webpod3 fewer requests than iptables: 10 vs 33');
    expect(callouts).not.toContain('webpod1'); // only the odd-one-out (last) backend's share is compared
    const capped = renderTables({ ...r, baseline: { ...r.baseline!, p50Ms: 80, unitMs: 250, dominates: false } });
    expect(capped).toContain('WARNING: backend times do NOT dominate');
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

  it('the chart with repetitions: whiskers over the min-max intervals, the baseline line', () => {
    const svg = renderChart(repsFixture(true));
    expect((svg.match(/class="spread"/g) ?? []).length).toBeGreaterThanOrEqual(2 * 3);
    expect(svg).toContain('baseline (0 ms backends): p50 4 ms; unit 20 ms; backend times dominate');
    expect(svg).toContain('>nftables random<');
    expect(svg.match(/<circle /g)).toHaveLength(3 + 1); // one p50 marker per mode row (iptables, nftables, lc; not per run), one in the legend
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
