// Health-check NodePorts, the pure half: which Services get one and with what local endpoint count
// (kube-proxy: NeedsHealthCheck, EndpointsMap.LocalReadyEndpoints), and the wanted server set.
// Address ranges: fixtures.ts (this node node-a; pods 10.10.<node>.<n>; VIPs 10.200.1.0/24).
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState } from '../../../src/desired/state.js';
import { type HealthCheck, wantedHealthServers } from '../../../src/desired/health-checks.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const lbLocal = (port: unknown = 32000) => (s: V1Service) => {
  s.spec!.type = 'LoadBalancer'; s.spec!.externalTrafficPolicy = 'Local'; s.spec!.ports![0]!.nodePort = 30080;
  if (port === 'absent') delete (s.spec as Record<string, unknown>).healthCheckNodePort;
  else (s.spec as Record<string, unknown>).healthCheckNodePort = port;
};

function checks(services: V1Service[], slices: V1EndpointSlice[]) {
  const state = new DesiredState(defaultProxyConfig, new PluginRegistry(), NODE);
  state.setNode(makeNode());
  services.forEach((s) => state.setService(s));
  slices.forEach((s) => state.setSlice(s));
  state.sync();
  return { checks: state.healthChecks(), problems: state.problems().map((p) => p.reason) };
}

describe('health checks from the desired state', () => {
  it.each<[string, V1Service, V1EndpointSlice[], Array<[number, number]>, string[]]>([
    ['LoadBalancer + Local: two local ready pods', makeService('ns1', 'svc1', lbLocal()),
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.2' }, { ip: '10.10.2.1', node: 'node-b' }])], [[32000, 2]], []],
    ['LoadBalancer + Local: only remote pods -> 0', makeService('ns1', 'svc1', lbLocal()),
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.2.1', node: 'node-b' }])], [[32000, 0]], []],
    ['no slices -> 0', makeService('ns1', 'svc1', lbLocal()), [], [[32000, 0]], []],
    ['a local terminating (serving) pod does not count', makeService('ns1', 'svc1', lbLocal()),
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1', ready: false, serving: true, terminating: true }, { ip: '10.10.1.2' }])], [[32000, 1]], []],
    ['a pod on two ports counts once', makeService('ns1', 'svc1', (s) => {
      lbLocal()(s); s.spec!.ports!.push({ name: 'admin', port: 81, protocol: 'TCP', nodePort: 30081 });
    }), [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }], (sl) => { sl.ports!.push({ name: 'admin', port: 9000, protocol: 'TCP' }); })], [[32000, 1]], []],
    ['LoadBalancer + Cluster: none', makeService('ns1', 'svc1', (s) => { lbLocal()(s); s.spec!.externalTrafficPolicy = 'Cluster'; }),
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }])], [], []],
    ['NodePort + Local: none (kube-proxy: LoadBalancer only)', makeService('ns1', 'svc1', (s) => { lbLocal()(s); s.spec!.type = 'NodePort'; }),
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }])], [], []],
    ['missing healthCheckNodePort: a problem, none served', makeService('ns1', 'svc1', lbLocal('absent')), [], [], ['InvalidHealthCheckNodePort']],
    ['healthCheckNodePort 70000: a problem', makeService('ns1', 'svc1', lbLocal(70000)), [], [], ['InvalidHealthCheckNodePort']],
    ['healthCheckNodePort "32000" (a string): a problem', makeService('ns1', 'svc1', lbLocal('32000')), [], [], ['InvalidHealthCheckNodePort']],
  ])('%s', (_name, service, slices, expected, problems) => {
    const got = checks([service], slices);
    expect(got.checks.map((c) => [c.port, c.localEndpoints])).toEqual(expected);
    expect(got.checks.every((c) => c.namespace === 'ns1' && c.name === 'svc1')).toBe(true);
    expect(got.problems).toEqual(problems);
  });

  it('follows endpoint changes incrementally', () => {
    const state = new DesiredState(defaultProxyConfig, new PluginRegistry(), NODE);
    state.setService(makeService('ns1', 'svc1', lbLocal()));
    state.setSlice(makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.2' }]));
    state.sync();
    expect(state.healthChecks().map((c) => c.localEndpoints)).toEqual([2]);
    state.setSlice(makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1', node: 'node-b' }], (sl) => { sl.metadata!.resourceVersion = '2'; }));
    state.sync();
    expect(state.healthChecks().map((c) => c.localEndpoints)).toEqual([0]);
    state.deleteService('ns1', 'svc1');
    state.sync();
    expect(state.healthChecks()).toEqual([]);
  });
});

describe('wantedHealthServers', () => {
  const hc = (name: string, port: number, localEndpoints: number): HealthCheck => ({ namespace: 'ns1', name, port, localEndpoints });
  it.each<[string, HealthCheck[], Array<[number, string, number]>, string[]]>([
    ['none', [], [], []],
    ['one per port', [hc('b', 32001, 0), hc('a', 32000, 3)], [[32000, 'a', 3], [32001, 'b', 0]], []],
    ['two Services on one port: the first name keeps it', [hc('b', 32000, 1), hc('a', 32000, 0)], [[32000, 'a', 0]], ['ns1/b HealthCheckNodePortConflict']],
  ])('%s', (_name, input, expected, problems) => {
    const w = wantedHealthServers(input);
    expect([...w.servers].map(([port, s]) => [port, s.name, s.localEndpoints])).toEqual(expected);
    expect(w.problems.map((p) => `${p.service} ${p.reason}`)).toEqual(problems);
  });
});
