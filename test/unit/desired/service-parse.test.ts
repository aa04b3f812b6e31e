// Parse, then build (desired/service-parse.ts, desired/service.ts): the Service and its slices read
// into a checked value with problems as data, and the entry mapped from that value alone.
// Address ranges: fixtures.ts (VIPs 10.200.1.0/24 + fd00:200::/64, pods 10.10.0.0/16 + fd00:10::/64,
// this node 192.168.0.10 + fd00:192::10, external/LB 203.0.113.0/24).
import { describe, expect, it } from '@jest/globals';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { type BuildEnv, parseService } from '../../../src/desired/service-parse.js';
import { nodePortAddressesOf } from '../../../src/desired/environment.js';
import { buildEntry, buildServiceEntry } from '../../../src/desired/service.js';
import { chooseDefault } from '../../../src/desired/scheduler.js';
import type { Problem } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const registry = new PluginRegistry();
const config = { ...defaultProxyConfig };
const context = { nodeName: NODE };
const env: BuildEnv = {
  config, registry, context,
  nodeAddresses: nodePortAddressesOf(makeNode(), config, []),
  fallback: chooseDefault(registry, config.defaultScheduler, context, []),
};
const slice = makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }, { ip: '10.10.2.1', node: 'node-b' }]);
const reasons = (ps: readonly Problem[]) => ps.map((p) => p.reason);

describe('parseService', () => {
  it('is undefined for a Service this operator does not handle', () => {
    expect(parseService(makeService('ns1', 'svc1', (s) => { s.spec!.clusterIP = 'None'; }), [], env)).toBeUndefined();
    expect(parseService(makeService('ns1', 'svc1', (s) => { s.spec!.type = 'ExternalName'; }), [], env)).toBeUndefined();
  });

  it('reads a plain Service: addresses, policies and each port with its endpoints', () => {
    const p = parseService(makeService('ns1', 'svc1', (s) => { s.spec!.internalTrafficPolicy = 'Local'; }), [slice], env)!;
    expect(p).toMatchObject({
      id: 'ns1/svc1', namespace: 'ns1', name: 'svc1', clusterIPs: ['10.200.1.10'], externalIPs: [], lbIPs: [],
      families: ['IPv4'], hasNodePorts: false, extLocal: false, intLocal: true, affinityTimeout: undefined,
      problems: [], rangeProblems: [], healthCheckProblems: [],
    });
    expect(p.ports).toHaveLength(1);
    const port = p.ports[0]!.port!;
    expect(port).toMatchObject({ name: 'http', protocol: 'TCP', port: 80, nodePort: undefined });
    expect(port.endpoints.map((e) => [e.family, e.cluster.map((x) => x.address), e.local.map((x) => x.address)]))
      .toEqual([['IPv4', ['10.10.1.1', '10.10.2.1'], ['10.10.1.1']]]);
  });

  it('returns every problem as data, each where it was found, and throws on none', () => {
    const svc = makeService('ns1', 'svc1', (s) => {
      s.spec!.type = 'LoadBalancer';
      s.spec!.externalIPs = ['203.0.113.9', 'not-an-ip'];
      s.spec!.loadBalancerSourceRanges = ['192.168.0.0/24', 'nope'];
      s.spec!.externalTrafficPolicy = 'Local';
      (s.spec as Record<string, unknown>).ports = [null, { name: 'x', port: 80, protocol: 'ICMP' }, { name: 'y', port: 70000 }, { name: 'z', port: 81, nodePort: 1.5 }];
    });
    const p = parseService(svc, [slice], env)!;
    expect(reasons(p.problems)).toEqual(['InvalidAddress']);
    expect(p.ports.map((x) => [reasons(x.problems), x.port?.port])).toEqual([
      [['InvalidField'], undefined], [['UnsupportedProtocol'], undefined], [['InvalidPort'], undefined], [['InvalidPort'], 81]]);
    expect(p.rangeProblems).toEqual([{ service: 'ns1/svc1', reason: 'InvalidSourceRange', message: 'spec.loadBalancerSourceRanges: "nope" is not a CIDR' }]);
    expect(p.sourceRanges.map((r) => r.text)).toEqual(['192.168.0.0/24']);
    expect(reasons(p.healthCheckProblems)).toEqual(['InvalidHealthCheckNodePort']);
    // The entry reports them in that order: the Service's, each port's, the ranges', the health check's.
    expect(reasons(buildEntry(p, env).problems)).toEqual([
      'InvalidAddress', 'InvalidField', 'UnsupportedProtocol', 'InvalidPort', 'InvalidPort', 'InvalidSourceRange', 'InvalidHealthCheckNodePort']);
  });
});

describe('buildEntry', () => {
  it('maps the parsed value alone: the Service changed after parsing changes nothing', () => {
    const svc: V1Service = makeService('ns1', 'svc1', (s) => { s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = 30080; });
    const before = buildServiceEntry(svc, [slice], env);
    const p = parseService(svc, [slice], env)!;
    svc.spec!.clusterIP = '10.200.1.99';
    svc.spec!.ports = [];
    expect(buildEntry(p, env)).toEqual(before);
    expect(before.vss.map((d) => `${d.vs.address}:${d.vs.port}`)).toEqual(['10.200.1.10:80', '192.168.0.10:30080']);
  });

  it('is the empty entry of a Service that is not handled', () => {
    expect(buildServiceEntry(makeService('ns1', 'svc1', (s) => { s.spec!.clusterIP = 'None'; }), [], env))
      .toEqual({ id: 'ns1/svc1', vss: [], vips: [], sets: [], problems: [] });
  });
});
