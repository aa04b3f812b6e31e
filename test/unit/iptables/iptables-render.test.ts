// The iptables + ipset renderer: whole payloads compared as text with dedented literals.
// Addresses as in fixtures.ts: VIPs 10.200.1.0/24 + fd00:200::/64, pods 10.10.0.0/16 +
// fd00:10::/64, this node 192.168.0.10 + fd00:192::10, external/LB 203.0.113.0/24 + 2001:db8::/64,
// allowed LB clients 198.51.100.0/24.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { buildDesired } from '../../../src/desired/state.js';
import { formatSetEntry } from '../../../src/desired/compare.js';
import { type Desired } from '../../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { checkPrefix, makeNames } from '../../../src/iptables/names.js';
import { markOf, renderCleanup, renderIpsetCleanup, renderIpsets, renderIptables } from '../../../src/iptables/render.js';
import { findJumps, jumpKey, parseSave, ruleTarget, splitRule } from '../../../src/iptables/save.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';
import { dedent } from '../../support/iptables-text.js';

const registry = new PluginRegistry();
const config: ProxyConfig = { ...defaultProxyConfig, clusterCIDRs: ['10.10.0.0/16', 'fd00:10::/64'] };

function build(services: V1Service[], slices: V1EndpointSlice[] = []): Desired {
  return buildDesired({ services, endpointSlices: slices, node: makeNode(), nodeName: NODE }, config, registry);
}

const nodePort = (port: number) => (s: V1Service) => { s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = port; };
/** The `add` lines of an ipset payload (what the sets will hold). */
const adds = (payload: string) => payload.split('\n').filter((l) => l.startsWith('add ')).join('\n');
const ALL_V4 = new Set(makeNames().allSets().filter((n) => !n.endsWith('-tmp')));

describe('renderIptables', () => {
  it('IPv4: our chains, hook jumps, kube-proxy IPVS-mode rules', () => {
    expect(renderIptables(config).v4).toBe(dedent(`
      *nat
      :IPVSOP-SERVICES - [0:0]
      :IPVSOP-CLUSTER - [0:0]
      :IPVSOP-EXTERNAL - [0:0]
      :IPVSOP-NODE-PORT - [0:0]
      :IPVSOP-MARK-MASQ - [0:0]
      :IPVSOP-POSTROUTING - [0:0]
      -I PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
      -I OUTPUT -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
      -I POSTROUTING -m comment --comment "ipvs-operator postrouting rules" -j IPVSOP-POSTROUTING
      -A IPVSOP-SERVICES -m set --match-set IPVSOP-CLUSTER-IP dst,dst -j IPVSOP-CLUSTER
      -A IPVSOP-SERVICES -m set --match-set IPVSOP-EXTERNAL-IP dst,dst -j IPVSOP-EXTERNAL
      -A IPVSOP-SERVICES -m set --match-set IPVSOP-LB dst,dst -j IPVSOP-EXTERNAL
      -A IPVSOP-SERVICES -m addrtype --dst-type LOCAL -m set ! --match-set IPVSOP-VIPS dst -j IPVSOP-NODE-PORT
      -A IPVSOP-CLUSTER -s 10.10.0.0/16 -j RETURN
      -A IPVSOP-CLUSTER -j IPVSOP-MARK-MASQ
      -A IPVSOP-EXTERNAL -m set --match-set IPVSOP-EXTERNAL-IP-LOCAL dst,dst -j RETURN
      -A IPVSOP-EXTERNAL -m set --match-set IPVSOP-LB-LOCAL dst,dst -j RETURN
      -A IPVSOP-EXTERNAL -j IPVSOP-MARK-MASQ
      -A IPVSOP-NODE-PORT -p tcp -m set --match-set IPVSOP-NP-LOCAL-TCP dst -j RETURN
      -A IPVSOP-NODE-PORT -p tcp -m set --match-set IPVSOP-NP-TCP dst -j IPVSOP-MARK-MASQ
      -A IPVSOP-NODE-PORT -p udp -m set --match-set IPVSOP-NP-LOCAL-UDP dst -j RETURN
      -A IPVSOP-NODE-PORT -p udp -m set --match-set IPVSOP-NP-UDP dst -j IPVSOP-MARK-MASQ
      -A IPVSOP-NODE-PORT -p sctp -m set --match-set IPVSOP-NP-LOCAL-SCTP dst,dst -j RETURN
      -A IPVSOP-NODE-PORT -p sctp -m set --match-set IPVSOP-NP-SCTP dst,dst -j IPVSOP-MARK-MASQ
      -A IPVSOP-MARK-MASQ -j MARK --or-mark 0x4000
      -A IPVSOP-POSTROUTING -m set --match-set IPVSOP-LOOP-BACK dst,dst,src -j MASQUERADE
      -A IPVSOP-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
      -A IPVSOP-POSTROUTING -j MARK --xor-mark 0x4000
      -A IPVSOP-POSTROUTING -j MASQUERADE --random-fully
      COMMIT
      *filter
      :IPVSOP-INPUT - [0:0]
      :IPVSOP-SOURCE-RANGES - [0:0]
      :IPVSOP-FORWARD - [0:0]
      -I INPUT -m comment --comment "ipvs-operator VIP filter and source ranges" -j IPVSOP-INPUT
      -I FORWARD -m comment --comment "ipvs-operator forwarding rules" -j IPVSOP-FORWARD
      -A IPVSOP-INPUT -m set --match-set IPVSOP-LB-FW dst,dst -j IPVSOP-SOURCE-RANGES
      -A IPVSOP-INPUT -m set --match-set IPVSOP-CLUSTER-IP dst,dst -j RETURN
      -A IPVSOP-INPUT -m set --match-set IPVSOP-EXTERNAL-IP dst,dst -j RETURN
      -A IPVSOP-INPUT -m set --match-set IPVSOP-LB dst,dst -j RETURN
      -A IPVSOP-INPUT -m conntrack --ctstate NEW -m set --match-set IPVSOP-VIPS dst -j REJECT
      -A IPVSOP-SOURCE-RANGES -m set --match-set IPVSOP-LB-SRC-CIDR dst,dst,src -j RETURN
      -A IPVSOP-SOURCE-RANGES -m set --match-set IPVSOP-LB-SRC-IP dst,dst,src -j RETURN
      -A IPVSOP-SOURCE-RANGES -j DROP
      -A IPVSOP-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
      -A IPVSOP-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
      COMMIT
      *mangle
      :IPVSOP-HOLD - [0:0]
      -I PREROUTING -m comment --comment "ipvs-operator SYN hold" -j IPVSOP-HOLD
      -I OUTPUT -m comment --comment "ipvs-operator SYN hold" -j IPVSOP-HOLD
      -A IPVSOP-HOLD -p tcp -m tcp --syn -m set --match-set IPVSOP-HOLD dst,dst -j DROP
      COMMIT
    `));
  });

  it('IPv6: the same chains over the IPVSOP6- sets and the IPv6 cluster CIDR', () => {
    const v4 = renderIptables(config).v4;
    const expected = v4.replace(/IPVSOP-(?=[A-Z-]+ (dst|src))/g, 'IPVSOP6-').replace('10.10.0.0/16', 'fd00:10::/64');
    expect(renderIptables(config).v6).toBe(expected);
    expect(renderIptables(config).v6).toContain('-A IPVSOP-SERVICES -m set --match-set IPVSOP6-CLUSTER-IP dst,dst -j IPVSOP-CLUSTER\n');
    expect(renderIptables(config).v6).toContain('-A IPVSOP-CLUSTER -s fd00:10::/64 -j RETURN\n');
  });

  const natOf = (text: string, chain: string) => text.split('\n').filter((l) => l.startsWith(`-A ${chain} `)).join('\n');

  it('masqueradeAll: every ClusterIP connection is marked, whatever its source', () => {
    expect(natOf(renderIptables({ ...config, masqueradeAll: true }).v4, 'IPVSOP-CLUSTER')).toBe(
      '-A IPVSOP-CLUSTER -j IPVSOP-MARK-MASQ');
  });

  it('several cluster CIDRs: each one returns; without any (and no masqueradeAll) ClusterIP traffic is never marked', () => {
    expect(natOf(renderIptables({ ...config, clusterCIDRs: ['10.10.0.0/16', '10.20.0.0/16'] }).v4, 'IPVSOP-CLUSTER')).toBe(dedent(`
      -A IPVSOP-CLUSTER -s 10.10.0.0/16 -j RETURN
      -A IPVSOP-CLUSTER -s 10.20.0.0/16 -j RETURN
      -A IPVSOP-CLUSTER -j IPVSOP-MARK-MASQ
    `).trimEnd());
    expect(natOf(renderIptables({ ...config, clusterCIDRs: [] }).v4, 'IPVSOP-CLUSTER')).toBe('');
    expect(natOf(renderIptables({ ...config, clusterCIDRs: ['fd00:10::/64'] }).v4, 'IPVSOP-CLUSTER')).toBe('');
  });

  it('another masquerade bit, no --random-fully, another prefix', () => {
    const text = renderIptables({ ...config, masqueradeBit: 13 }, { randomFully: false, prefix: 'LAB' }).v4;
    expect(natOf(text, 'LAB-MARK-MASQ')).toBe('-A LAB-MARK-MASQ -j MARK --or-mark 0x2000');
    expect(natOf(text, 'LAB-POSTROUTING')).toBe(dedent(`
      -A LAB-POSTROUTING -m set --match-set LAB-LOOP-BACK dst,dst,src -j MASQUERADE
      -A LAB-POSTROUTING -m mark ! --mark 0x2000/0x2000 -j RETURN
      -A LAB-POSTROUTING -j MARK --xor-mark 0x2000
      -A LAB-POSTROUTING -j MASQUERADE
    `).trimEnd());
    expect(text).not.toContain('IPVSOP');
  });

  it('inserts only the hook jumps that are missing', () => {
    const present = new Set([jumpKey('nat', 'PREROUTING', 'IPVSOP-SERVICES'), jumpKey('filter', 'FORWARD', 'IPVSOP-FORWARD')]);
    const text = renderIptables(config, { presentJumps: { v4: present } }).v4;
    expect(text.split('\n').filter((l) => l.startsWith('-I '))).toEqual([
      '-I OUTPUT -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES',
      '-I POSTROUTING -m comment --comment "ipvs-operator postrouting rules" -j IPVSOP-POSTROUTING',
      '-I INPUT -m comment --comment "ipvs-operator VIP filter and source ranges" -j IPVSOP-INPUT',
      '-I PREROUTING -m comment --comment "ipvs-operator SYN hold" -j IPVSOP-HOLD',
      '-I OUTPUT -m comment --comment "ipvs-operator SYN hold" -j IPVSOP-HOLD',
    ]);
  });

  it('the rule text does not depend on the Services (only the sets do)', () => {
    // renderIptables takes no desired state at all: the sets carry every Service.
    const one = build([makeService('ns', 's0', nodePort(30000))]);
    const many = build(Array.from({ length: 5000 }, (_, i) => makeService('ns', `s${i}`, (s) => {
      nodePort(30000 + i)(s);
      s.spec!.clusterIP = `10.200.${(i >> 8) & 0xff}.${i & 0xff}`; s.spec!.clusterIPs = [s.spec!.clusterIP];
    })));
    const count = (t: string) => t.split('\n').filter((l) => /^-[AI] /.test(l)).length;
    expect(count(renderIptables(config).v4)).toBe(38);
    expect(adds(renderIpsets(one, { families: ['IPv4'] })).split('\n')).toHaveLength(3);
    expect(adds(renderIpsets(many, { families: ['IPv4'] })).split('\n')).toHaveLength(15000);
  });

  it('refuses a masquerade bit outside 0..31 and a bad prefix', () => {
    expect(markOf(0)).toBe('0x1');
    expect(markOf(31)).toBe('0x80000000');
    expect(() => renderIptables({ ...config, masqueradeBit: 32 })).toThrow('masqueradeBit 32');
    expect(() => renderIptables(config, { prefix: 'ipvsop' })).toThrow('bad chain/set prefix');
    expect(() => checkPrefix('TOOLONGPX')).toThrow();
    // The longest names still fit the kernel limits: ipset 31, iptables chains 28.
    const names = makeNames('ABCDEFGH');
    expect(Math.max(...names.allSets().map((n) => n.length))).toBeLessThanOrEqual(31);
    expect(names.chain('SOURCE-RANGES').length).toBeLessThanOrEqual(28);
  });
});

describe('renderIpsets', () => {
  it('creates missing live sets, fills <name>-tmp, swaps it in and destroys it (whole IPv4 payload)', () => {
    const d = build([makeService('ns1', 'web', nodePort(30080))], [makeSlice('ns1', 'web', 'a', [{ ip: '10.10.1.2' }])]);
    expect(renderIpsets(d, { families: ['IPv4'] })).toBe(dedent(`
      create IPVSOP-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-CLUSTER-IP-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.10,tcp:80
      swap IPVSOP-CLUSTER-IP-tmp IPVSOP-CLUSTER-IP
      destroy IPVSOP-CLUSTER-IP-tmp
      create IPVSOP-EXTERNAL-IP hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-EXTERNAL-IP-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-EXTERNAL-IP-tmp IPVSOP-EXTERNAL-IP
      destroy IPVSOP-EXTERNAL-IP-tmp
      create IPVSOP-EXTERNAL-IP-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-EXTERNAL-IP-LOCAL-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-EXTERNAL-IP-LOCAL-tmp IPVSOP-EXTERNAL-IP-LOCAL
      destroy IPVSOP-EXTERNAL-IP-LOCAL-tmp
      create IPVSOP-LB hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-LB-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-LB-tmp IPVSOP-LB
      destroy IPVSOP-LB-tmp
      create IPVSOP-LB-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-LB-LOCAL-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-LB-LOCAL-tmp IPVSOP-LB-LOCAL
      destroy IPVSOP-LB-LOCAL-tmp
      create IPVSOP-LB-FW hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-LB-FW-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-LB-FW-tmp IPVSOP-LB-FW
      destroy IPVSOP-LB-FW-tmp
      create IPVSOP-LB-SRC-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
      create IPVSOP-LB-SRC-CIDR-tmp hash:ip,port,net family inet hashsize 1024 maxelem 65536
      swap IPVSOP-LB-SRC-CIDR-tmp IPVSOP-LB-SRC-CIDR
      destroy IPVSOP-LB-SRC-CIDR-tmp
      create IPVSOP-LB-SRC-IP hash:ip,port,ip family inet hashsize 1024 maxelem 65536
      create IPVSOP-LB-SRC-IP-tmp hash:ip,port,ip family inet hashsize 1024 maxelem 65536
      swap IPVSOP-LB-SRC-IP-tmp IPVSOP-LB-SRC-IP
      destroy IPVSOP-LB-SRC-IP-tmp
      create IPVSOP-NP-TCP bitmap:port range 0-65535
      create IPVSOP-NP-TCP-tmp bitmap:port range 0-65535
      add IPVSOP-NP-TCP-tmp 30080
      swap IPVSOP-NP-TCP-tmp IPVSOP-NP-TCP
      destroy IPVSOP-NP-TCP-tmp
      create IPVSOP-NP-UDP bitmap:port range 0-65535
      create IPVSOP-NP-UDP-tmp bitmap:port range 0-65535
      swap IPVSOP-NP-UDP-tmp IPVSOP-NP-UDP
      destroy IPVSOP-NP-UDP-tmp
      create IPVSOP-NP-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-NP-SCTP-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-NP-SCTP-tmp IPVSOP-NP-SCTP
      destroy IPVSOP-NP-SCTP-tmp
      create IPVSOP-NP-LOCAL-TCP bitmap:port range 0-65535
      create IPVSOP-NP-LOCAL-TCP-tmp bitmap:port range 0-65535
      swap IPVSOP-NP-LOCAL-TCP-tmp IPVSOP-NP-LOCAL-TCP
      destroy IPVSOP-NP-LOCAL-TCP-tmp
      create IPVSOP-NP-LOCAL-UDP bitmap:port range 0-65535
      create IPVSOP-NP-LOCAL-UDP-tmp bitmap:port range 0-65535
      swap IPVSOP-NP-LOCAL-UDP-tmp IPVSOP-NP-LOCAL-UDP
      destroy IPVSOP-NP-LOCAL-UDP-tmp
      create IPVSOP-NP-LOCAL-SCTP hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-NP-LOCAL-SCTP-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-NP-LOCAL-SCTP-tmp IPVSOP-NP-LOCAL-SCTP
      destroy IPVSOP-NP-LOCAL-SCTP-tmp
      create IPVSOP-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
      create IPVSOP-LOOP-BACK-tmp hash:ip,port,ip family inet hashsize 1024 maxelem 65536
      add IPVSOP-LOOP-BACK-tmp 10.10.1.2,tcp:8080,10.10.1.2
      swap IPVSOP-LOOP-BACK-tmp IPVSOP-LOOP-BACK
      destroy IPVSOP-LOOP-BACK-tmp
      create IPVSOP-VIPS hash:ip family inet hashsize 1024 maxelem 65536
      create IPVSOP-VIPS-tmp hash:ip family inet hashsize 1024 maxelem 65536
      add IPVSOP-VIPS-tmp 10.200.1.10
      swap IPVSOP-VIPS-tmp IPVSOP-VIPS
      destroy IPVSOP-VIPS-tmp
      create IPVSOP-HOLD hash:ip,port family inet hashsize 1024 maxelem 65536
      create IPVSOP-HOLD-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
      swap IPVSOP-HOLD-tmp IPVSOP-HOLD
      destroy IPVSOP-HOLD-tmp
    `));
  });

  it('existing live sets are not re-created; a stale -tmp set from a crash is destroyed first', () => {
    const d = build([makeService('ns1', 'web')]);
    const text = renderIpsets(d, { families: ['IPv4'], existing: new Set([...ALL_V4, 'IPVSOP-VIPS-tmp']) });
    expect(text).not.toMatch(/^create IPVSOP-[A-Z-]+(?<!-tmp) /m);
    expect(text.split('\n').filter((l) => l.includes('IPVSOP-VIPS'))).toEqual([
      'destroy IPVSOP-VIPS-tmp',
      'create IPVSOP-VIPS-tmp hash:ip family inet hashsize 1024 maxelem 65536',
      'add IPVSOP-VIPS-tmp 10.200.1.10',
      'swap IPVSOP-VIPS-tmp IPVSOP-VIPS',
      'destroy IPVSOP-VIPS-tmp',
    ]);
  });

  it('NodePort: bitmap:port members per protocol; Local ones also in NP-LOCAL-*; SCTP as node ip,port', () => {
    const d = build([
      makeService('ns1', 'cluster', nodePort(30080)),
      makeService('ns1', 'local', (s) => {
        nodePort(30081)(s); s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11'];
        s.spec!.externalTrafficPolicy = 'Local'; s.spec!.ports![0]!.protocol = 'UDP';
      }),
      makeService('ns1', 'sctp', (s) => {
        nodePort(30082)(s); s.spec!.clusterIP = '10.200.1.12'; s.spec!.clusterIPs = ['10.200.1.12'];
        s.spec!.externalTrafficPolicy = 'Local'; s.spec!.ports![0]!.protocol = 'SCTP';
      }),
    ]);
    expect(adds(renderIpsets(d, { families: ['IPv4'], existing: ALL_V4 }))).toBe(dedent(`
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.12,sctp:80
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.10,tcp:80
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.11,udp:80
      add IPVSOP-NP-TCP-tmp 30080
      add IPVSOP-NP-UDP-tmp 30081
      add IPVSOP-NP-SCTP-tmp 192.168.0.10,sctp:30082
      add IPVSOP-NP-LOCAL-UDP-tmp 30081
      add IPVSOP-NP-LOCAL-SCTP-tmp 192.168.0.10,sctp:30082
      add IPVSOP-VIPS-tmp 10.200.1.10
      add IPVSOP-VIPS-tmp 10.200.1.11
      add IPVSOP-VIPS-tmp 10.200.1.12
    `).trimEnd());
  });

  it('LoadBalancer: Local policy, source ranges (a /0 split in halves), the node admitted by a range (and by /0)', () => {
    const d = build([makeService('ns1', 'lb', (s) => {
      nodePort(30080)(s); s.spec!.type = 'LoadBalancer'; s.spec!.externalTrafficPolicy = 'Local';
      s.spec!.loadBalancerSourceRanges = ['198.51.100.0/24', '192.168.0.0/24'];
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.5' }] } };
    }), makeService('ns1', 'open', (s) => {
      s.spec!.type = 'LoadBalancer'; s.spec!.clusterIP = '10.200.1.11'; s.spec!.clusterIPs = ['10.200.1.11'];
      s.spec!.loadBalancerSourceRanges = ['0.0.0.0/0'];
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.6' }] } };
    })]);
    expect(d.sets.map(formatSetEntry)).toContain('KUBE-LOAD-BALANCER-SOURCE-IP IPv4 TCP 203.0.113.5:80 from 203.0.113.5');
    expect(adds(renderIpsets(d, { families: ['IPv4'], existing: ALL_V4 }))).toBe(dedent(`
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.10,tcp:80
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.11,tcp:80
      add IPVSOP-LB-tmp 203.0.113.5,tcp:80
      add IPVSOP-LB-tmp 203.0.113.6,tcp:80
      add IPVSOP-LB-LOCAL-tmp 203.0.113.5,tcp:80
      add IPVSOP-LB-FW-tmp 203.0.113.5,tcp:80
      add IPVSOP-LB-FW-tmp 203.0.113.6,tcp:80
      add IPVSOP-LB-SRC-CIDR-tmp 203.0.113.5,tcp:80,192.168.0.0/24
      add IPVSOP-LB-SRC-CIDR-tmp 203.0.113.5,tcp:80,198.51.100.0/24
      add IPVSOP-LB-SRC-CIDR-tmp 203.0.113.6,tcp:80,0.0.0.0/1
      add IPVSOP-LB-SRC-CIDR-tmp 203.0.113.6,tcp:80,128.0.0.0/1
      add IPVSOP-LB-SRC-IP-tmp 203.0.113.5,tcp:80,203.0.113.5
      add IPVSOP-LB-SRC-IP-tmp 203.0.113.6,tcp:80,203.0.113.6
      add IPVSOP-NP-TCP-tmp 30080
      add IPVSOP-NP-LOCAL-TCP-tmp 30080
      add IPVSOP-VIPS-tmp 10.200.1.10
      add IPVSOP-VIPS-tmp 10.200.1.11
      add IPVSOP-VIPS-tmp 203.0.113.5
      add IPVSOP-VIPS-tmp 203.0.113.6
    `).trimEnd());
  });

  it('externalIPs (Cluster and Local) and hairpin entries for local endpoints only', () => {
    const d = build([makeService('ns1', 'ext', (s) => {
      nodePort(30080)(s); s.spec!.externalIPs = ['203.0.113.7']; s.spec!.externalTrafficPolicy = 'Local';
    })], [makeSlice('ns1', 'ext', 'a', [{ ip: '10.10.1.2' }, { ip: '10.10.1.3' }, { ip: '10.10.2.2', node: 'node-b' }])]);
    expect(adds(renderIpsets(d, { families: ['IPv4'], existing: ALL_V4 }))).toBe(dedent(`
      add IPVSOP-CLUSTER-IP-tmp 10.200.1.10,tcp:80
      add IPVSOP-EXTERNAL-IP-tmp 203.0.113.7,tcp:80
      add IPVSOP-EXTERNAL-IP-LOCAL-tmp 203.0.113.7,tcp:80
      add IPVSOP-NP-TCP-tmp 30080
      add IPVSOP-NP-LOCAL-TCP-tmp 30080
      add IPVSOP-LOOP-BACK-tmp 10.10.1.2,tcp:8080,10.10.1.2
      add IPVSOP-LOOP-BACK-tmp 10.10.1.3,tcp:8080,10.10.1.3
      add IPVSOP-VIPS-tmp 10.200.1.10
      add IPVSOP-VIPS-tmp 203.0.113.7
    `).trimEnd());
  });

  it('IPv6 goes to the IPVSOP6- sets with family inet6', () => {
    const d = build([makeService('ns1', 'v6', (s) => {
      nodePort(30080)(s); s.spec!.clusterIP = 'fd00:200::10'; s.spec!.clusterIPs = ['fd00:200::10']; s.spec!.ipFamilies = ['IPv6'];
    })], [makeSlice('ns1', 'v6', 'a', [{ ip: 'fd00:10::1:2' }])]);
    const text = renderIpsets(d, { existing: new Set(makeNames().allSets().filter((n) => !n.endsWith('-tmp'))) });
    expect(adds(text)).toBe(dedent(`
      add IPVSOP6-CLUSTER-IP-tmp fd00:200::10,tcp:80
      add IPVSOP6-NP-TCP-tmp 30080
      add IPVSOP6-LOOP-BACK-tmp fd00:10::1:2,tcp:8080,fd00:10::1:2
      add IPVSOP6-VIPS-tmp fd00:200::10
    `).trimEnd());
    expect(text).toContain('create IPVSOP6-CLUSTER-IP-tmp hash:ip,port family inet6 hashsize 1024 maxelem 65536\n');
  });

  it('grows maxelem past 65536 when a set needs it', () => {
    const sets = Array.from({ length: 70000 }, (_, i) => ({
      set: 'KUBE-CLUSTER-IP' as const, family: 'IPv4' as const, protocol: 'TCP' as const, port: 80 + (i % 60000), address: `10.200.${i >> 16}.${(i >> 8) & 0xff}`,
    }));
    const text = renderIpsets({ sets, vips: new Set() }, { families: ['IPv4'], existing: ALL_V4 });
    expect(text).toContain('create IPVSOP-CLUSTER-IP-tmp hash:ip,port family inet hashsize 1024 maxelem 70000\n');
  });
});

describe('iptables-save parsing and cleanup', () => {
  const saved = dedent(`
    # Generated by iptables-nft-save v1.8.9 on Sat Nov 21 10:00:00 2026
    *filter
    :INPUT ACCEPT [0:0]
    :FORWARD DROP [0:0]
    :OUTPUT ACCEPT [0:0]
    :FOREIGN - [0:0]
    :IPVSOP-INPUT - [0:0]
    :IPVSOP-SOURCE-RANGES - [0:0]
    :IPVSOP-FORWARD - [0:0]
    :IPVSOP-MINE-NOT - [0:0]
    -A INPUT -m comment --comment "ipvs-operator VIP filter and source ranges" -j IPVSOP-INPUT
    -A INPUT -m comment --comment "looks like -j IPVSOP-INPUT but is not" -j FOREIGN
    -A INPUT -s 10.1.0.0/16 -j ACCEPT
    -A FORWARD -m comment --comment "ipvs-operator forwarding rules" -j IPVSOP-FORWARD
    -A FOREIGN -j IPVSOP-MINE-NOT
    -A IPVSOP-INPUT -m set --match-set IPVSOP-LB-FW dst,dst -j IPVSOP-SOURCE-RANGES
    COMMIT
    *nat
    :PREROUTING ACCEPT [0:0]
    :POSTROUTING ACCEPT [0:0]
    :IPVSOP-SERVICES - [0:0]
    -A PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
    -A PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
    COMMIT
  `);

  it('splits rules like a shell and finds their target', () => {
    expect(splitRule('-A INPUT -m comment --comment "a -j B \\"q\\"" -j C')).toEqual(['-A', 'INPUT', '-m', 'comment', '--comment', 'a -j B "q"', '-j', 'C']);
    expect(ruleTarget('-A INPUT -m comment --comment "x -j IPVSOP-INPUT" -j FOREIGN')).toBe('FOREIGN');
    expect(ruleTarget('-A INPUT -s 10.0.0.0/8')).toBeUndefined();
  });

  it('finds our hook jumps, and only ours', () => {
    const jumps = findJumps(parseSave(saved), makeNames());
    expect([...jumps.keys()].sort()).toEqual([
      'filter FORWARD IPVSOP-FORWARD', 'filter INPUT IPVSOP-INPUT', 'nat PREROUTING IPVSOP-SERVICES']);
    expect(jumps.get('nat PREROUTING IPVSOP-SERVICES')).toHaveLength(2);
  });

  it('cleanup deletes each of our jumps and chains, leaves foreign chains and look-alikes', () => {
    expect(renderCleanup(parseSave(saved))).toBe(dedent(`
      *nat
      -D PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
      -D PREROUTING -m comment --comment "ipvs-operator service portals" -j IPVSOP-SERVICES
      :IPVSOP-SERVICES - [0:0]
      -X IPVSOP-SERVICES
      COMMIT
      *filter
      -D INPUT -m comment --comment "ipvs-operator VIP filter and source ranges" -j IPVSOP-INPUT
      -D FORWARD -m comment --comment "ipvs-operator forwarding rules" -j IPVSOP-FORWARD
      :IPVSOP-INPUT - [0:0]
      :IPVSOP-SOURCE-RANGES - [0:0]
      :IPVSOP-FORWARD - [0:0]
      -X IPVSOP-INPUT
      -X IPVSOP-SOURCE-RANGES
      -X IPVSOP-FORWARD
      COMMIT
    `));
    expect(renderCleanup(parseSave('*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n'))).toBe('');
  });

  it('set cleanup destroys only our set names', () => {
    const existing = new Set(['IPVSOP-VIPS', 'IPVSOP6-NP-TCP', 'IPVSOP-LB-tmp', 'IPVSOP-FOREIGN', 'KUBE-CLUSTER-IP']);
    expect(renderIpsetCleanup(existing)).toBe('destroy IPVSOP-LB-tmp\ndestroy IPVSOP-VIPS\ndestroy IPVSOP6-NP-TCP\n');
    expect(renderIpsetCleanup(new Set(['OTHER']))).toBe('');
  });
});
