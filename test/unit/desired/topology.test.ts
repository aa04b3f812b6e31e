// Topology-aware routing: kube-proxy's rule for when EndpointSlice hints are used
// (pkg/proxy/topology.go topologyModeFromHints, availableForTopology). This node: node-a in zone-a
// (fixtures.ts makeNode); pods 10.10.<node>.<n>.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { buildDesired } from '../../../src/desired/state.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

/** An endpoint: address, its node, zone hints and node hints (undefined = no hints field). */
type Hinted = [ip: string, node: string, zones?: string[], nodes?: string[], ready?: boolean];

function slice(eps: Hinted[]): V1EndpointSlice {
  return makeSlice('ns1', 'svc1', 'a', eps.map(([ip, node, , , ready]) => ({ ip, node, ...(ready === false ? { ready: false, serving: true, terminating: true } : {}) })), (sl) => {
    sl.endpoints.forEach((e, i) => {
      const [, , zones, nodes] = eps[i]!;
      if (zones || nodes) {
        e.hints = { ...(zones ? { forZones: zones.map((name) => ({ name })) } : {}), ...(nodes ? { forNodes: nodes.map((name) => ({ name })) } : {}) } as never;
      }
    });
  });
}

function clusterDests(eps: Hinted[], mutate?: (s: V1Service) => void, node: V1Node = makeNode()): string[] {
  const d = buildDesired({ services: [makeService('ns1', 'svc1', mutate)], endpointSlices: [slice(eps)], node, nodeName: NODE },
    defaultProxyConfig, new PluginRegistry());
  return d.table.get('TCP 10.200.1.10:80')!.dests.map((r) => r.address).sort(); // membership; the order is node-seeded
}

describe('topology hints (kube-proxy topologyModeFromHints)', () => {
  it.each<[string, Hinted[], string[]]>([
    ['no hints: every ready endpoint', [['10.10.1.1', 'node-a'], ['10.10.2.1', 'node-b']], ['10.10.1.1', '10.10.2.1']],
    ['zone hints, one for this zone: only those', [['10.10.1.1', 'node-a', ['zone-a']], ['10.10.2.1', 'node-b', ['zone-b']], ['10.10.3.1', 'node-c', ['zone-a']]],
      ['10.10.1.1', '10.10.3.1']],
    ['one ready endpoint without a zone hint: hints ignored', [['10.10.1.1', 'node-a', ['zone-a']], ['10.10.2.1', 'node-b']], ['10.10.1.1', '10.10.2.1']],
    ['a terminating endpoint without hints does not count (only ready ones are checked)',
      [['10.10.1.1', 'node-a', ['zone-a']], ['10.10.2.1', 'node-b', ['zone-b']], ['10.10.3.1', 'node-c', undefined, undefined, false]], ['10.10.1.1']],
    ['no endpoint hinted for this zone: hints ignored', [['10.10.2.1', 'node-b', ['zone-b']], ['10.10.3.1', 'node-c', ['zone-c']]], ['10.10.2.1', '10.10.3.1']],
    ['an endpoint hinted for several zones', [['10.10.2.1', 'node-b', ['zone-b', 'zone-a']], ['10.10.3.1', 'node-c', ['zone-c']]], ['10.10.2.1']],
    ['node hints, one for this node: PreferSameNode', [['10.10.1.1', 'node-a', ['zone-a'], ['node-a']], ['10.10.1.2', 'node-x', ['zone-a'], ['node-x']]],
      ['10.10.1.1']],
    ['node hints none for this node: falls back to zone hints', [['10.10.1.1', 'node-x', ['zone-a'], ['node-x']], ['10.10.2.1', 'node-b', ['zone-b'], ['node-b']]],
      ['10.10.1.1']],
    ['node hints on only some endpoints: zone hints decide', [['10.10.1.1', 'node-a', ['zone-a'], ['node-a']], ['10.10.1.2', 'node-x', ['zone-a']], ['10.10.2.1', 'node-b', ['zone-b']]],
      ['10.10.1.1', '10.10.1.2']],
  ])('%s', (_name, eps, expected) => {
    expect(clusterDests(eps)).toEqual(expected);
  });

  it('a node without a zone label ignores zone hints', () => {
    const node = makeNode((n) => { n.metadata!.labels = {}; });
    expect(clusterDests([['10.10.1.1', 'node-a', ['zone-a']], ['10.10.2.1', 'node-b', ['zone-b']]], undefined, node)).toEqual(['10.10.1.1', '10.10.2.1']);
  });

  it('Local traffic policy ignores hints (kube-proxy: only Cluster endpoints are filtered)', () => {
    expect(clusterDests([['10.10.1.1', 'node-a', ['zone-b']], ['10.10.2.1', 'node-b', ['zone-a']]], (s) => { s.spec!.internalTrafficPolicy = 'Local'; }))
      .toEqual(['10.10.1.1']);
  });

  it('trafficDistribution on the Service changes nothing by itself: the slice hints decide', () => {
    const eps: Hinted[] = [['10.10.1.1', 'node-a'], ['10.10.2.1', 'node-b']];
    expect(clusterDests(eps, (s) => { (s.spec as Record<string, unknown>).trafficDistribution = 'PreferClose'; })).toEqual(['10.10.1.1', '10.10.2.1']);
  });
});
