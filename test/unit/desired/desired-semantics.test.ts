// The semantic rules where kube-proxy is the reference (docs/semantics.md), one table
// each. Address ranges: fixtures.ts (this node 192.168.0.10 + fd00:192::10; external 203.0.113.0/24).
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { buildDesired } from '../../../src/desired/state.js';
import { nodePortAddressesOf } from '../../../src/desired/environment.js';
import type { Problem } from '../../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice, render } from '../../support/fixtures.js';

const registry = new PluginRegistry();
const build = (services: V1Service[], slices: V1EndpointSlice[], config: Partial<ProxyConfig> = {}) =>
  buildDesired({ services, endpointSlices: slices, node: makeNode(), nodeName: NODE }, { ...defaultProxyConfig, ...config }, registry);

describe('nodePortAddresses per IP family (kube-proxy: a family without a CIDR in the list uses all its addresses)', () => {
  const dualNode = makeNode((n) => { n.status!.addresses!.push({ type: 'ExternalIP', address: '198.51.100.10' }, { type: 'ExternalIP', address: '2001:db8::10' }); });
  it.each<[string, string[], string[]]>([
    ['empty: every address of both families', [], ['192.168.0.10', '198.51.100.10', '2001:db8::10', 'fd00:192::10']],
    ['IPv4-only list: IPv4 filtered, every IPv6 address kept', ['192.168.0.0/24'], ['192.168.0.10', '2001:db8::10', 'fd00:192::10']],
    ['IPv6-only list: IPv6 filtered, every IPv4 address kept', ['fd00:192::/64'], ['192.168.0.10', '198.51.100.10', 'fd00:192::10']],
    ['both families listed: both filtered', ['198.51.100.0/24', '2001:db8::/64'], ['198.51.100.10', '2001:db8::10']],
    ['a CIDR of a family matching nothing: that family has no NodePort address', ['10.0.0.0/8'], ['2001:db8::10', 'fd00:192::10']],
  ])('%s', (_name, list, expected) => {
    const problems: Problem[] = [];
    expect(nodePortAddressesOf(dualNode, { ...defaultProxyConfig, nodePortAddresses: list }, problems)).toEqual(expected);
    expect(problems).toEqual([]);
  });

  it('an IPv4-only list keeps the IPv6 NodePort of a dual-stack Service', () => {
    const d = build([makeService('ns1', 'svc1', (s) => {
      s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 30080;
      s.spec!.clusterIPs = ['10.200.1.10', 'fd00:200::10']; s.spec!.ipFamilies = ['IPv4', 'IPv6'];
    })], [], { nodePortAddresses: ['10.0.0.0/8'] });
    expect([...d.table.keys()].filter((k) => k.includes('30080'))).toEqual(['TCP [fd00:192::10]:30080']);
  });
});

describe('externalTrafficPolicy Local on every externally reachable Service (kube-proxy: ExternallyAccessible)', () => {
  const remoteOnly = () => [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.2.1', node: 'node-b' }])];
  const ext = (s: V1Service) => { s.spec!.externalIPs = ['203.0.113.7']; s.spec!.externalTrafficPolicy = 'Local'; };
  it.each<[string, (s: V1Service) => void, string[]]>([
    ['ClusterIP with externalIPs: the external IP uses local endpoints (none here: empty)', ext,
      ['add-service TCP 10.200.1.10:80 rr', 'add-dest TCP 10.200.1.10:80 -> 10.10.2.1:8080 w=1 masq', 'add-service TCP 203.0.113.7:80 rr']],
    ['NodePort with externalIPs: external IP and NodePort local', (s) => { ext(s); s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 30080; },
      ['add-service TCP 10.200.1.10:80 rr', 'add-dest TCP 10.200.1.10:80 -> 10.10.2.1:8080 w=1 masq',
        'add-service TCP 192.168.0.10:30080 rr', 'add-service TCP 203.0.113.7:80 rr']],
    ['ClusterIP without externalIPs: the policy has nothing to apply to', (s) => { s.spec!.externalTrafficPolicy = 'Local'; },
      ['add-service TCP 10.200.1.10:80 rr', 'add-dest TCP 10.200.1.10:80 -> 10.10.2.1:8080 w=1 masq']],
  ])('%s', (_name, mutate, expected) => {
    const d = build([makeService('ns1', 'svc1', mutate)], remoteOnly());
    expect(render(d.table)).toBe(expected.join('\n'));
    expect(d.problems).toEqual([]);
  });

  it('lists the external IP in KUBE-EXTERNAL-IP-LOCAL for a ClusterIP Service', () => {
    const d = build([makeService('ns1', 'svc1', ext)], remoteOnly());
    expect(d.sets.map((e) => `${e.set} ${e.address ?? ''}`)).toContain('KUBE-EXTERNAL-IP-LOCAL 203.0.113.7');
  });
});

describe('endpoint conditions as kube-proxy reads them (unset serving = true)', () => {
  const slice = (conditions: Record<string, boolean>) => makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.2' }], (sl) => {
    sl.endpoints[0]!.conditions = conditions;
  });
  it.each<[string, Record<string, boolean>, boolean]>([
    ['no conditions: ready', {}, true],
    ['terminating, serving unset, not ready: serving (used when nothing is ready)', { ready: false, terminating: true }, true],
    ['terminating, serving false: not used', { ready: false, serving: false, terminating: true }, false],
    ['not ready, not terminating, serving unset: not used', { ready: false }, false],
  ])('%s', (_name, conditions, used) => {
    const d = build([makeService('ns1', 'svc1')], [slice(conditions)]);
    expect(d.table.get('TCP 10.200.1.10:80')?.dests.map((r) => r.address)).toEqual(used ? ['10.10.1.2'] : []);
  });
});

describe('Services without selector', () => {
  it.each<[string, V1EndpointSlice[], string[]]>([
    ['no slice: an empty virtual server (kube-proxy programs it; traffic is dropped, not leaked)', [], ['add-service TCP 10.200.1.10:80 rr']],
    ['a hand-made slice: served', [makeSlice('ns1', 'svc1', 'm', [{ ip: '10.10.1.1' }])],
      ['add-service TCP 10.200.1.10:80 rr', 'add-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq']],
  ])('%s', (_name, slices, expected) => {
    const d = build([makeService('ns1', 'svc1', (s) => { delete s.spec!.selector; })], slices);
    expect(render(d.table)).toBe(expected.join('\n'));
    expect([...d.vips]).toEqual(['10.200.1.10']);
  });
});
