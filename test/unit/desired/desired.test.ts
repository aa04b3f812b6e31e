// Desired state, mirroring kube-proxy's pkg/proxy/ipvs/proxier_test.go cases. Address ranges: see
// fixtures.ts (VIPs 10.200.1.0/24 + fd00:200::/64, pods 10.10.0.0/16 + fd00:10::/64, nodes
// 192.168.0.0/24 + fd00:192::/64, external/LB 203.0.113.0/24 + 2001:db8::/64).
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState, buildDesired } from '../../../src/desired/state.js';
import { formatSetEntry } from '../../../src/desired/compare.js';
import { type KernelContext } from '../../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice, render } from '../../support/fixtures.js';

const registry = new PluginRegistry();

function build(services: V1Service[], slices: V1EndpointSlice[], config: Partial<ProxyConfig> = {}, kernel: KernelContext = {}) {
  return buildDesired({ services, endpointSlices: slices, node: makeNode(), nodeName: NODE }, { ...defaultProxyConfig, ...config }, registry, kernel);
}

const twoEndpoints = () => makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }, { ip: '10.10.2.1', node: 'node-b' }]);
const nodePort = (s: V1Service) => { s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 30080; };
const v6 = (s: V1Service) => { s.spec!.clusterIP = 'fd00:200::10'; s.spec!.clusterIPs = ['fd00:200::10']; s.spec!.ipFamilies = ['IPv6']; };
const dests = (vs: string, ...ips: string[]) => ips.map((ip) => `add-dest ${vs} -> ${ip} w=1 masq`);

describe('buildDesired: virtual servers like kube-proxy', () => {
  it.each<[string, V1Service[], V1EndpointSlice[], Partial<ProxyConfig>, string[]]>([
    ['ClusterIP', [makeService('ns1', 'svc1')], [twoEndpoints()], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')]],
    ['ClusterIP without endpoints: an empty virtual server', [makeService('ns1', 'svc1')], [], {}, [
      'add-service TCP 10.200.1.10:80 rr']],
    ['NodePort IPv4 on the node address', [makeService('ns1', 'svc1', nodePort)], [twoEndpoints()], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080'),
      'add-service TCP 192.168.0.10:30080 rr', ...dests('TCP 192.168.0.10:30080', '10.10.1.1:8080', '10.10.2.1:8080')]],
    ['NodePort IPv6', [makeService('ns1', 'svc1', (s) => { nodePort(s); v6(s); })],
      [makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: 'fd00:10::1:1' }])], {}, [
        'add-service TCP [fd00:192::10]:30080 rr', ...dests('TCP [fd00:192::10]:30080', '[fd00:10::1:1]:8080'),
        'add-service TCP [fd00:200::10]:80 rr', ...dests('TCP [fd00:200::10]:80', '[fd00:10::1:1]:8080')]],
    ['NodePort filtered out by nodePortAddresses', [makeService('ns1', 'svc1', nodePort)], [twoEndpoints()],
      { nodePortAddresses: ['10.0.0.0/8'] }, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')]],
    ['LoadBalancer ingress IPs (not hostnames, not ipMode Proxy)', [makeService('ns1', 'svc1', (s) => {
      nodePort(s); s.spec!.type = 'LoadBalancer';
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.5' }, { hostname: 'lb.example' }, { ip: '203.0.113.6', ipMode: 'Proxy' }] } };
    })], [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }])], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080'),
      'add-service TCP 192.168.0.10:30080 rr', ...dests('TCP 192.168.0.10:30080', '10.10.1.1:8080'),
      'add-service TCP 203.0.113.5:80 rr', ...dests('TCP 203.0.113.5:80', '10.10.1.1:8080')]],
    ['externalIPs', [makeService('ns1', 'svc1', (s) => { s.spec!.externalIPs = ['203.0.113.7']; })],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080'),
        'add-service TCP 203.0.113.7:80 rr', ...dests('TCP 203.0.113.7:80', '10.10.1.1:8080')]],
    ['sessionAffinity ClientIP with a timeout', [makeService('ns1', 'svc1', (s) => {
      s.spec!.sessionAffinity = 'ClientIP'; s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 600 } };
    })], [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }])], {}, [
      'add-service TCP 10.200.1.10:80 rr persistent=600/32', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080')]],
    ['sessionAffinity ClientIP, default timeout 10800', [makeService('ns1', 'svc1', (s) => { s.spec!.sessionAffinity = 'ClientIP'; })],
      [], {}, ['add-service TCP 10.200.1.10:80 rr persistent=10800/32']],
    ['externalTrafficPolicy Local with a local endpoint: NodePort gets only local ones',
      [makeService('ns1', 'svc1', (s) => { nodePort(s); s.spec!.externalTrafficPolicy = 'Local'; })], [twoEndpoints()], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080'),
        'add-service TCP 192.168.0.10:30080 rr', ...dests('TCP 192.168.0.10:30080', '10.10.1.1:8080')]],
    ['externalTrafficPolicy Local without a local endpoint: NodePort empty (dropped), ClusterIP all',
      [makeService('ns1', 'svc1', (s) => { nodePort(s); s.spec!.externalTrafficPolicy = 'Local'; })],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.2.1', node: 'node-b' }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.2.1:8080'),
        'add-service TCP 192.168.0.10:30080 rr']],
    ['externalTrafficPolicy Local applies to external IPs of a ClusterIP Service (kube-proxy: ExternallyAccessible)',
      [makeService('ns1', 'svc1', (s) => { s.spec!.externalIPs = ['203.0.113.7']; s.spec!.externalTrafficPolicy = 'Local'; })],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.2.1', node: 'node-b' }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.2.1:8080'),
        'add-service TCP 203.0.113.7:80 rr']],
    ['internalTrafficPolicy Local with a local endpoint', [makeService('ns1', 'svc1', (s) => { s.spec!.internalTrafficPolicy = 'Local'; })],
      [twoEndpoints()], {}, ['add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080')]],
    ['internalTrafficPolicy Local without a local endpoint: empty', [makeService('ns1', 'svc1', (s) => { s.spec!.internalTrafficPolicy = 'Local'; })],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.2.1', node: 'node-b' }])], {}, ['add-service TCP 10.200.1.10:80 rr']],
    ['internalTrafficPolicy Local, NodePort with Cluster external policy: NodePort uses all',
      [makeService('ns1', 'svc1', (s) => { nodePort(s); s.spec!.internalTrafficPolicy = 'Local'; })],
      [twoEndpoints()], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080'),
        'add-service TCP 192.168.0.10:30080 rr', ...dests('TCP 192.168.0.10:30080', '10.10.1.1:8080', '10.10.2.1:8080')]],
    ['terminating endpoints are not used while a ready one exists', [makeService('ns1', 'svc1')],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.2', ready: false, serving: true, terminating: true }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080')]],
    ['serving terminating endpoints are used when no endpoint is ready', [makeService('ns1', 'svc1')],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.2', ready: false, serving: true, terminating: true },
        { ip: '10.10.1.3', ready: false, serving: false, terminating: true }, { ip: '10.10.1.4', ready: false, serving: false }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.2:8080')]],
    ['Local policy falls back to local serving terminating endpoints, not to remote ready ones',
      [makeService('ns1', 'svc1', (s) => { s.spec!.internalTrafficPolicy = 'Local'; })],
      [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.2', ready: false, serving: true, terminating: true }, { ip: '10.10.2.1', node: 'node-b' }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.2:8080')]],
    ['named ports resolve through the slice port of the same name', [makeService('ns1', 'svc1', (s) => {
      s.spec!.ports = [{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'metrics', port: 9100, protocol: 'TCP' }];
    })], [makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }], (sl) => {
      sl.ports = [{ name: 'metrics', port: 9090, protocol: 'TCP' }, { name: 'http', port: 8080, protocol: 'TCP' }];
    })], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080'),
      'add-service TCP 10.200.1.10:9100 rr', ...dests('TCP 10.200.1.10:9100', '10.10.1.1:9090')]],
    ['dual-stack: every clusterIPs entry with the slices of its family', [makeService('ns1', 'svc1', (s) => {
      s.spec!.clusterIPs = ['10.200.1.10', 'fd00:200::10']; s.spec!.ipFamilies = ['IPv4', 'IPv6'];
    })], [makeSlice('ns1', 'svc1', 'v4', [{ ip: '10.10.1.1' }]), makeSlice('ns1', 'svc1', 'v6', [{ ip: 'FD00:10::1:1' }])], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080'),
      'add-service TCP [fd00:200::10]:80 rr', ...dests('TCP [fd00:200::10]:80', '[fd00:10::1:1]:8080')]],
    ['multiple slices merge; a duplicate endpoint keeps its ready copy', [makeService('ns1', 'svc1')], [
      makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.5', ready: false }]),
      makeSlice('ns1', 'svc1', 'b', [{ ip: '10.10.3.1', node: 'node-c' }, { ip: '10.10.1.5' }]),
      makeSlice('ns1', 'other', 'c', [{ ip: '10.10.9.9' }])], {}, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.1.5:8080', '10.10.3.1:8080')]],
    ['one address on two target ports across slices (a port change rolling out): both, each its readiest copy',
      [makeService('ns1', 'svc1')], [
        makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.5', ready: false }]),
        makeSlice('ns1', 'svc1', 'b', [{ ip: '10.10.1.1', ready: false }], (sl) => { sl.ports![0]!.port = 9090; }),
        makeSlice('ns1', 'svc1', 'c', [{ ip: '10.10.1.5' }]),
        makeSlice('ns1', 'svc1', 'd', [{ ip: '10.10.1.1' }], (sl) => { sl.ports![0]!.port = 9090; })], {}, [
        'add-service TCP 10.200.1.10:80 rr',
        ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.1.1:9090', '10.10.1.5:8080')]],
    ['UDP and SCTP', [makeService('ns1', 'dns', (s) => {
      s.spec!.ports = [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'sig', port: 3868, protocol: 'SCTP' }];
    })], [makeSlice('ns1', 'dns', 'a', [{ ip: '10.10.1.1' }], (sl) => {
      sl.ports = [{ name: 'dns', port: 5353, protocol: 'UDP' }, { name: 'sig', port: 3868, protocol: 'SCTP' }];
    })], {}, [
      'add-service SCTP 10.200.1.10:3868 rr', ...dests('SCTP 10.200.1.10:3868', '10.10.1.1:3868'),
      'add-service UDP 10.200.1.10:53 rr', ...dests('UDP 10.200.1.10:53', '10.10.1.1:5353')]],
    ['headless and ExternalName Services are skipped', [
      makeService('ns1', 'headless', (s) => { s.spec!.clusterIP = 'None'; s.spec!.clusterIPs = ['None']; }),
      makeService('ns1', 'ext', (s) => { s.spec = { type: 'ExternalName', externalName: 'example.com' }; })],
    [makeSlice('ns1', 'headless', 'a', [{ ip: '10.10.1.1' }])], {}, []],
    ['a selector-less Service without slices gets an empty virtual server (kube-proxy)', [
      makeService('ns1', 'manual', (s) => { delete s.spec!.selector; })], [], {}, ['add-service TCP 10.200.1.10:80 rr']],
    ['a selector-less Service with a hand-made slice is served', [makeService('ns1', 'manual', (s) => { delete s.spec!.selector; })],
      [makeSlice('ns1', 'manual', 'm', [{ ip: '10.10.1.1' }])], {}, [
        'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080')]],
    ['no proxy name configured: a Service labelled for another proxy is left alone', [
      makeService('ns1', 'svc1', (s) => { s.metadata!.labels = { 'service.kubernetes.io/service-proxy-name': 'ipvs-operator' }; })],
    [twoEndpoints()], {}, []],
    ['proxy name configured: only Services carrying it', [
      makeService('ns1', 'svc1', (s) => { s.metadata!.labels = { 'service.kubernetes.io/service-proxy-name': 'ipvs-operator' }; }),
      makeService('ns1', 'svc2', (s) => { s.spec!.clusterIPs = ['10.200.1.11']; }),
      makeService('ns1', 'svc3', (s) => { s.spec!.clusterIPs = ['10.200.1.12']; s.metadata!.labels = { 'service.kubernetes.io/service-proxy-name': 'other' }; })],
    [twoEndpoints()], { serviceProxyName: 'ipvs-operator' }, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')]],
  ])('%s', (_name, services, slices, config, expected) => {
    const d = build(services, slices, config);
    expect(render(d.table)).toBe(expected.join('\n'));
    expect(d.problems).toEqual([]);
  });

  it('binds cluster, external and LB IPs but not node addresses; origins name the Service port', () => {
    const d = build([makeService('ns1', 'svc1', (s) => {
      nodePort(s); s.spec!.type = 'LoadBalancer'; s.spec!.externalIPs = ['203.0.113.7'];
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.5' }] } };
    })], []);
    expect([...d.vips].sort()).toEqual(['10.200.1.10', '203.0.113.5', '203.0.113.7']);
    expect([...d.nodePortAddresses]).toEqual(['192.168.0.10', 'fd00:192::10']);
    expect(d.table.get('TCP 192.168.0.10:30080')?.origin).toEqual({ namespace: 'ns1', name: 'svc1', portName: 'http', kind: 'node-port', plugin: 'rr' });
  });

  it('lists iptables-path set entries like kube-proxy ipsets', () => {
    const d = build([makeService('ns1', 'svc1', (s) => {
      nodePort(s); s.spec!.type = 'LoadBalancer'; s.spec!.externalTrafficPolicy = 'Local';
      s.spec!.loadBalancerSourceRanges = ['198.51.100.0/24'];
      s.status = { loadBalancer: { ingress: [{ ip: '203.0.113.5' }] } };
    })], []);
    expect(d.sets.map(formatSetEntry)).toEqual([
      'KUBE-CLUSTER-IP IPv4 TCP 10.200.1.10:80',
      'KUBE-LOAD-BALANCER IPv4 TCP 203.0.113.5:80',
      'KUBE-LOAD-BALANCER-FW IPv4 TCP 203.0.113.5:80',
      'KUBE-LOAD-BALANCER-LOCAL IPv4 TCP 203.0.113.5:80',
      'KUBE-LOAD-BALANCER-SOURCE-CIDR IPv4 TCP 203.0.113.5:80 from 198.51.100.0/24',
      'KUBE-NODE-PORT-LOCAL-TCP IPv4 TCP 30080',
      'KUBE-NODE-PORT-TCP IPv4 TCP 30080',
    ]);
  });
});

describe('buildDesired: scheduler annotations', () => {
  const annotated = (a: Record<string, string>) => makeService('ns1', 'svc1', (s) => { s.metadata!.annotations = a; });
  const slice = makeSlice('ns1', 'svc1', 'a', [{ ip: '10.10.1.1', pod: 'web-v2-x' }, { ip: '10.10.2.1', node: 'node-b', zone: 'zone-b' }]);

  it.each<[string, Record<string, string>, string[]]>([
    ['wrr with weights per node', { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': '{"weights":{"byNode":{"node-b":3}}}' }, [
      'add-service TCP 10.200.1.10:80 wrr', 'add-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=1 masq', 'add-dest TCP 10.200.1.10:80 -> 10.10.2.1:8080 w=3 masq']],
    ['sh with both flags', { 'ipvs-operator.io/scheduler': 'sh', 'ipvs-operator.io/scheduler-options': '{"sh-fallback":true,"sh-port":true}' }, [
      'add-service TCP 10.200.1.10:80 sh flag-1 flag-2', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')]],
    ['fo preferring pods named web-v2', { 'ipvs-operator.io/scheduler': 'fo', 'ipvs-operator.io/scheduler-options': '{"prefer":[{"podPrefix":"web-v2-"}]}' }, [
      'add-service TCP 10.200.1.10:80 fo', 'add-dest TCP 10.200.1.10:80 -> 10.10.1.1:8080 w=2 masq', 'add-dest TCP 10.200.1.10:80 -> 10.10.2.1:8080 w=1 masq']],
    ['options without a scheduler apply to the default', { 'ipvs-operator.io/scheduler-options': '{"affinityNetmask":{"ipv4":24}}' }, [
      'add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')]],
  ])('%s', (_name, annotations, expected) => {
    const d = build([annotated(annotations)], [slice]);
    expect(render(d.table)).toBe(expected.join('\n'));
  });

  it('applies the affinity netmask from options to a ClientIP Service', () => {
    const d = build([makeService('ns1', 'svc1', (s) => {
      s.spec!.sessionAffinity = 'ClientIP';
      s.metadata!.annotations = { 'ipvs-operator.io/scheduler': 'wlc', 'ipvs-operator.io/scheduler-options': '{"affinityNetmask":{"ipv4":24}}' };
    })], []);
    expect(render(d.table)).toBe('add-service TCP 10.200.1.10:80 wlc persistent=10800/24');
    expect(d.problems).toEqual([]);
  });

  it.each<[string, Record<string, string>, KernelContext, string, string[]]>([
    ['unknown scheduler', { 'ipvs-operator.io/scheduler': 'fastest' }, {}, 'UnknownScheduler', ['"fastest"', 'allowed: dh, fo, lblc']],
    ['invalid JSON', { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': '{weights:' }, {}, 'InvalidSchedulerOptions', ['not JSON', '{weights:']],
    ['options failing the schema', { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': '{"weight":{"node-b":3}}' }, {},
      'InvalidSchedulerOptions', ['unknown property "weight"', 'allowed: affinityNetmask, weights']],
    ['twos on a 6.1 kernel', { 'ipvs-operator.io/scheduler': 'twos' }, { kernelVersion: '6.1.0-18-amd64' }, 'SchedulerUnavailable', ['needs kernel >= 6.2']],
    ['a scheduler the kernel lacks', { 'ipvs-operator.io/scheduler': 'mh' }, { availableSchedulers: new Set(['rr', 'wrr']) }, 'SchedulerUnavailable', ['ip_vs_mh']],
  ])('%s: default scheduler and a problem', (_name, annotations, kernel, reason, fragments) => {
    const d = build([annotated(annotations)], [slice], {}, kernel);
    expect(render(d.table)).toBe(['add-service TCP 10.200.1.10:80 rr', ...dests('TCP 10.200.1.10:80', '10.10.1.1:8080', '10.10.2.1:8080')].join('\n'));
    expect(d.problems).toHaveLength(1);
    expect(d.problems[0]).toMatchObject({ service: 'ns1/svc1', reason });
    for (const f of fragments) expect(d.problems[0]!.message).toContain(f);
    expect(d.problems[0]!.message).toContain('using the default scheduler "rr"');
  });

  it('uses the configured default scheduler, and rr with a problem when it is unknown', () => {
    expect(render(build([makeService('ns1', 'svc1')], [], { defaultScheduler: 'lc' }).table)).toBe('add-service TCP 10.200.1.10:80 lc');
    const d = build([makeService('ns1', 'svc1')], [], { defaultScheduler: 'bogus' });
    expect(render(d.table)).toBe('add-service TCP 10.200.1.10:80 rr');
    expect(d.problems).toMatchObject([{ service: '', reason: 'InvalidDefaultScheduler' }]);
  });

  it('reports a broken extra plugin and serves with the default', () => {
    const r = new PluginRegistry();
    r.register({ name: 'broken', description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr', optionsSchema: { type: 'object' },
      resolve: () => { throw new Error('kaboom'); } }, 'test');
    r.register({ name: 'short', description: 'x', kernelScheduler: 'rr', kernelModule: 'ip_vs_rr', optionsSchema: { type: 'object' },
      resolve: () => ({ scheduler: 'rr', flags: 0, weights: [] }) }, 'test');
    for (const name of ['broken', 'short']) {
      const d = buildDesired({ services: [annotated({ 'ipvs-operator.io/scheduler': name })], endpointSlices: [slice], node: makeNode(), nodeName: NODE },
        defaultProxyConfig, r);
      expect(render(d.table)).toContain('add-service TCP 10.200.1.10:80 rr');
      expect(render(d.table)).toContain('10.10.2.1:8080 w=1');
      expect(d.problems).toMatchObject([{ service: 'ns1/svc1', reason: 'SchedulerPluginFailed' }]);
    }
  });

  it('reports two Services claiming one virtual server; the first by name wins', () => {
    const d = build([
      makeService('ns1', 'b', (s) => { s.spec!.clusterIPs = ['10.200.1.11']; s.spec!.externalIPs = ['203.0.113.7']; }),
      makeService('ns1', 'a', (s) => { s.spec!.externalIPs = ['203.0.113.7']; }),
    ], []);
    expect(d.table.get('TCP 203.0.113.7:80')?.origin.name).toBe('a');
    expect(d.problems).toMatchObject([{ service: 'ns1/b', reason: 'VirtualServerConflict' }]);
  });
});

describe('DesiredState: incremental', () => {
  function cluster(n: number) {
    const state = new DesiredState(defaultProxyConfig, registry, NODE);
    state.setNode(makeNode());
    for (let i = 0; i < n; i++) {
      state.setService(makeService('ns1', `svc${i}`, (s) => { s.spec!.clusterIPs = [`10.200.1.${i}`]; }));
      state.setSlice(makeSlice('ns1', `svc${i}`, `svc${i}-a`, [{ ip: `10.10.1.${i}` }]));
    }
    return state;
  }

  it('builds a Service from each of its slices as slices come and go', () => {
    const state = cluster(1);
    state.sync();
    const dests = () => state.desiredTable.get('TCP 10.200.1.0:80')?.dests.map((d) => d.address).sort();
    const slice = (name: string, ip: string, rv = '1') =>
      makeSlice('ns1', 'svc0', name, [{ ip }], (x) => { x.metadata!.resourceVersion = rv; });
    state.setSlice(slice('svc0-b', '10.10.2.1'));
    state.setSlice(slice('svc0-c', '10.10.3.1'));
    expect(state.sync().recomputed).toBe(1);
    expect(dests()).toEqual(['10.10.1.0', '10.10.2.1', '10.10.3.1']);
    state.setSlice(slice('svc0-b', '10.10.2.1')); // the same resourceVersion: nothing to rebuild
    state.deleteSlice(slice('svc0-x', '10.10.9.9')); // a slice it never had
    expect(state.sync().recomputed).toBe(0);
    state.deleteSlice(slice('svc0-a', ''));
    state.deleteSlice(slice('svc0-c', ''));
    state.sync();
    expect(dests()).toEqual(['10.10.2.1']);
    state.setSlice(slice('svc0-b', '10.10.2.2', '2'));
    state.sync();
    expect(dests()).toEqual(['10.10.2.2']);
    state.deleteSlice(slice('svc0-b', ''));
    state.sync();
    expect(dests()).toEqual([]);
  });

  it('hands a contested virtual server to the next Service by name as claims come and go', () => {
    const state = cluster(0);
    const claim = (name: string) => state.setService(makeService('ns1', name, (s) => {
      s.spec!.clusterIPs = [`10.200.2.${name.charCodeAt(0)}`]; s.spec!.externalIPs = ['203.0.113.7'];
    }));
    const owner = () => state.desiredTable.get('TCP 203.0.113.7:80')?.origin.name;
    const losers = () => state.problems().filter((p) => p.reason === 'VirtualServerConflict').map((p) => p.service).sort();
    for (const name of ['c', 'b', 'a']) claim(name);
    state.sync();
    expect([owner(), losers()]).toEqual(['a', ['ns1/b', 'ns1/c']]);
    state.deleteService('ns1', 'a');
    expect([...state.sync().changed]).toContain('TCP 203.0.113.7:80');
    expect([owner(), losers()]).toEqual(['b', ['ns1/c']]);
    state.deleteService('ns1', 'b');
    state.sync();
    expect([owner(), losers()]).toEqual(['c', []]);
    claim('b');
    state.sync();
    expect([owner(), losers()]).toEqual(['b', ['ns1/c']]);
    state.deleteService('ns1', 'b');
    state.deleteService('ns1', 'c');
    state.sync();
    expect([owner(), losers()]).toEqual([undefined, []]);
  });

  it('rebuilds only the Service whose slice changed and reports only its virtual server', () => {
    const state = cluster(20);
    expect(state.sync()).toMatchObject({ recomputed: 20 });
    expect(state.desiredTable.size).toBe(20);
    state.setSlice(makeSlice('ns1', 'svc7', 'svc7-a', [{ ip: '10.10.1.7' }, { ip: '10.10.2.7' }], (s) => { s.metadata!.resourceVersion = '2'; }));
    const r = state.sync();
    expect(r.recomputed).toBe(1);
    expect([...r.changed]).toEqual(['TCP 10.200.1.7:80']);
    expect(state.desiredTable.get('TCP 10.200.1.7:80')?.dests).toHaveLength(2);
  });

  it('ignores a resync with the same resourceVersion and a node update that changes nothing it reads', () => {
    const state = cluster(5);
    state.sync();
    state.setSlice(makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]));
    state.setNode(makeNode((n) => { n.metadata!.labels!.extra = 'x'; }));
    expect(state.sync()).toEqual({ recomputed: 0, changed: new Set() });
  });

  it('reports no change when a rebuilt Service yields the same virtual servers', () => {
    const state = cluster(3);
    state.sync();
    state.setService(makeService('ns1', 'svc1', (s) => { s.spec!.clusterIPs = ['10.200.1.1']; s.metadata!.resourceVersion = '9'; s.metadata!.labels = { team: 'x' }; }));
    expect(state.sync()).toEqual({ recomputed: 1, changed: new Set() });
  });

  it('removes a deleted Service and its VIP; a node address change rebuilds NodePorts', () => {
    const state = cluster(3);
    state.setService(makeService('ns1', 'np', (s) => { nodePort(s); s.spec!.clusterIPs = ['10.200.1.50']; }));
    state.sync();
    state.deleteService('ns1', 'svc2');
    expect([...state.sync().changed]).toEqual(['TCP 10.200.1.2:80']);
    expect(state.desired().vips.has('10.200.1.2')).toBe(false);
    state.setNode(makeNode((n) => { n.status!.addresses = [{ type: 'InternalIP', address: '192.168.0.11' }]; }));
    const r = state.sync();
    expect(r.recomputed).toBe(3);
    expect([...r.changed].sort()).toEqual(['TCP 192.168.0.10:30080', 'TCP 192.168.0.11:30080']);
  });

  it('matches buildDesired from scratch after a series of changes', () => {
    const state = cluster(6);
    state.sync();
    state.deleteSlice({ metadata: { namespace: 'ns1', name: 'svc3-a', labels: { 'kubernetes.io/service-name': 'svc3' } } });
    state.setService(makeService('ns1', 'svc4', (s) => { s.spec!.clusterIPs = ['10.200.1.4']; s.spec!.sessionAffinity = 'ClientIP'; s.metadata!.resourceVersion = '2'; }));
    state.sync();
    const services = [0, 1, 2, 3, 5].map((i) => makeService('ns1', `svc${i}`, (s) => { s.spec!.clusterIPs = [`10.200.1.${i}`]; }));
    services.push(makeService('ns1', 'svc4', (s) => { s.spec!.clusterIPs = ['10.200.1.4']; s.spec!.sessionAffinity = 'ClientIP'; }));
    const slices = [0, 1, 2, 4, 5].map((i) => makeSlice('ns1', `svc${i}`, `svc${i}-a`, [{ ip: `10.10.1.${i}` }]));
    expect(render(state.desiredTable)).toBe(render(build(services, slices).table));
  });
});
