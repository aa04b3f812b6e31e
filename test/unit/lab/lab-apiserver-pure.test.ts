// The lab API server's pure parts: address arithmetic, Service allocation cases, the EndpointSlice
// builder, the token file and RBAC rules, path parsing, and the process's command line.
// Addresses: Services 10.200.1.0/24 (+ fd00:10:200::/108), pods 10.10.0.0/16 (fd00:10::/64).
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { type ServiceLike, allocateService, formatIp, parseCidr, parseIp } from '../../../lab/cluster/alloc.js';
import { parseApiServerArgs, resourceOfDocument } from '../../../lab/cluster/apiserver-main.js';
import { buildEndpointSlices } from '../../../lab/cluster/controllers.js';
import { authorize, parseRbac, parseTokenFile, userGroups } from '../../../lab/cluster/rbac.js';
import { parseLabelSelector, parseResourcePath } from '../../../lab/cluster/store.js';

const cfg = { serviceCIDRs: ['10.200.1.0/24', 'fd00:10:200::/108'], nodePortRange: [30000, 30001] as [number, number] };
const makeSvc = (name: string, mutate: (s: ServiceLike & { spec: Record<string, unknown> }) => void = () => undefined): ServiceLike => {
  const s = { metadata: { name, namespace: 'ns1', uid: `u-${name}` }, spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } as Record<string, unknown> };
  mutate(s);
  return s;
};

describe('addresses', () => {
  it.each([
    ['10.200.1.7', '10.200.1.7'],
    ['fd00:10:200::2', 'fd00:10:200::2'],
    ['fd00:0:0:0:0:0:0:1', 'fd00::1'],
    ['::', '::'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
  ])('%s -> %s', (text, canonical) => {
    const ip = parseIp(text)!;
    expect(formatIp(ip.family, ip.value)).toBe(canonical);
  });
  it.each(['10.200.1.256', '1.2.3', 'fd00:::1', '1::2::3', 'x', '1:2:3:4:5:6:7:8:9'])('%s is not an address', (text) => {
    expect(parseIp(text)).toBeUndefined();
  });
  it('a CIDR is its base, size and family; garbage throws', () => {
    expect(parseCidr('10.200.1.9/24')).toMatchObject({ family: 'IPv4', bits: 24, size: 256n });
    expect(() => parseCidr('10.200.1.0/33')).toThrow(/bad service CIDR/);
  });
});

describe('allocateService', () => {
  const ok = (r: ReturnType<typeof allocateService>) => {
    if (!r.ok) throw new Error(r.message);
    return r.service.spec as Record<string, unknown>;
  };
  it.each([
    ['SingleStack default', {}, { clusterIPs: ['10.200.1.2'], ipFamilies: ['IPv4'] }],
    ['IPv6 asked', { ipFamilies: ['IPv6'] }, { clusterIPs: ['fd00:10:200::2'], ipFamilies: ['IPv6'] }],
    ['RequireDualStack', { ipFamilyPolicy: 'RequireDualStack' }, { clusterIPs: ['10.200.1.2', 'fd00:10:200::2'], ipFamilies: ['IPv4', 'IPv6'] }],
    ['an IPv6 clusterIP given', { clusterIP: 'fd00:10:200::9' }, { clusterIP: 'fd00:10:200::9', ipFamilies: ['IPv6'] }],
    ['headless dual', { clusterIP: 'None', ipFamilyPolicy: 'PreferDualStack' }, { clusterIPs: ['None'], ipFamilies: ['IPv4', 'IPv6'] }],
  ])('%s', (_what, spec, want) => {
    expect(ok(allocateService(makeSvc('a', (s) => Object.assign(s.spec, spec)), undefined, [], cfg))).toMatchObject(want);
  });

  it.each([
    ['unknown policy', { ipFamilyPolicy: 'Both' }, 'spec.ipFamilyPolicy: Unsupported value: "Both"'],
    ['dual-stack on a single-stack cluster', { ipFamilyPolicy: 'RequireDualStack' }, 'not configured for dual-stack'],
    ['IPv6 on an IPv4 cluster', { ipFamilies: ['IPv6'] }, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'],
    ['the network address', { clusterIP: '10.200.1.0' }, 'provided IP is not in the valid range'],
    ['the broadcast address', { clusterIP: '10.200.1.255' }, 'provided IP is not in the valid range'],
    ['a healthCheckNodePort without LoadBalancer', { healthCheckNodePort: 30000 }, 'spec.healthCheckNodePort: Forbidden'],
  ])('refuses %s', (_what, spec, message) => {
    const r = allocateService(makeSvc('a', (s) => Object.assign(s.spec, spec)), undefined, [], { ...cfg, serviceCIDRs: ['10.200.1.0/24'] });
    expect(r).toMatchObject({ ok: false, message: expect.stringContaining(message) });
  });

  it('LoadBalancer with allocateLoadBalancerNodePorts false gets no nodePort; eTP Local a healthCheckNodePort', () => {
    const spec = ok(allocateService(makeSvc('lb', (s) => Object.assign(s.spec, { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, externalTrafficPolicy: 'Local' })), undefined, [], cfg));
    expect(spec).toMatchObject({ ports: [{ port: 80 }], healthCheckNodePort: 30000 });
    expect((spec.ports as Array<Record<string, unknown>>)[0]!.nodePort).toBeUndefined();
  });

  describe('type transitions, as a merge patch of spec.type makes them (the rest of the stored spec kept)', () => {
    const big = { ...cfg, nodePortRange: [30000, 30009] as [number, number] };
    /** Creates `svc`, then updates it to the stored spec with `patch` merged over it; the stored spec after each. */
    const transition = (spec: Record<string, unknown>, patch: Record<string, unknown>, others: ServiceLike[] = []) => {
      const created = allocateService(makeSvc('t', (s) => Object.assign(s.spec, spec)), undefined, others, big);
      if (!created.ok) throw new Error(created.message);
      const next = structuredClone(created.service);
      Object.assign(next.spec!, patch);
      return { before: created.service.spec as Record<string, unknown>, after: allocateService(next, created.service, others, big) };
    };
    const nodePorts = (spec: Record<string, unknown>) => (spec.ports as Array<{ nodePort?: number }>).map((p) => p.nodePort);

    it('NodePort -> ClusterIP releases the node ports and externalTrafficPolicy; the clusterIP stays', () => {
      const { before, after } = transition({ type: 'NodePort' }, { type: 'ClusterIP' });
      expect(nodePorts(before)).toEqual([30000]);
      const spec = ok(after);
      expect({ nodePorts: nodePorts(spec), etp: spec.externalTrafficPolicy, clusterIP: spec.clusterIP }).toEqual({ nodePorts: [undefined], etp: undefined, clusterIP: before.clusterIP });
      // Released: another Service may take the port now.
      expect(nodePorts(ok(allocateService(makeSvc('u', (s) => Object.assign(s.spec, { type: 'NodePort', ports: [{ port: 80, nodePort: 30000 }] })), undefined, [after.ok ? after.service : makeSvc('x')], big)))).toEqual([30000]);
    });

    it('ClusterIP -> NodePort allocates a node port per port and defaults externalTrafficPolicy', () => {
      const spec = ok(transition({}, { type: 'NodePort' }).after);
      expect({ nodePorts: nodePorts(spec), etp: spec.externalTrafficPolicy }).toEqual({ nodePorts: [30000], etp: 'Cluster' });
    });

    it('NodePort -> LoadBalancer keeps the node ports; eTP Local adds a healthCheckNodePort, back to Cluster releases it', () => {
      const { before, after } = transition({ type: 'NodePort' }, { type: 'LoadBalancer', externalTrafficPolicy: 'Local' });
      const lb = ok(after);
      expect({ nodePorts: nodePorts(lb), hc: lb.healthCheckNodePort, alloc: lb.allocateLoadBalancerNodePorts }).toEqual({ nodePorts: nodePorts(before), hc: 30001, alloc: true });
      const stored = (after as { service: ServiceLike }).service;
      const cluster = ok(allocateService({ ...stored, spec: { ...stored.spec, externalTrafficPolicy: 'Cluster' } }, stored, [], big));
      expect({ nodePorts: nodePorts(cluster), hc: cluster.healthCheckNodePort }).toEqual({ nodePorts: nodePorts(before), hc: undefined });
    });

    it('LoadBalancer (eTP Local) -> ClusterIP releases node ports, healthCheckNodePort and allocateLoadBalancerNodePorts', () => {
      const spec = ok(transition({ type: 'LoadBalancer', externalTrafficPolicy: 'Local' }, { type: 'ClusterIP' }).after);
      expect({ nodePorts: nodePorts(spec), hc: spec.healthCheckNodePort, etp: spec.externalTrafficPolicy, alloc: spec.allocateLoadBalancerNodePorts })
        .toEqual({ nodePorts: [undefined], hc: undefined, etp: undefined, alloc: undefined });
    });

    it('NodePort -> ClusterIP with a node port changed on the way is refused, as kube-apiserver refuses it', () => {
      const { after } = transition({ type: 'NodePort' }, { type: 'ClusterIP', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30005 }] });
      expect(after).toMatchObject({ ok: false, message: expect.stringContaining('spec.ports[0].nodePort: Forbidden') });
    });

    it('ClusterIP -> ExternalName drops the addresses; ExternalName -> ClusterIP allocates new ones', () => {
      const { after } = transition({}, { type: 'ExternalName', externalName: 'example.org' });
      const ext = ok(after);
      expect({ clusterIP: ext.clusterIP, clusterIPs: ext.clusterIPs }).toEqual({ clusterIP: undefined, clusterIPs: undefined });
      const stored = (after as { service: ServiceLike }).service;
      expect(ok(allocateService({ ...stored, spec: { ...stored.spec, type: 'ClusterIP' } }, stored, [], big))).toMatchObject({ clusterIPs: ['10.200.1.2'] });
    });
  });
});

describe('buildEndpointSlices', () => {
  const pod = (name: string, ips: string[], mutate: (p: Record<string, any>) => void = () => undefined) => { // eslint-disable-line @typescript-eslint/no-explicit-any
    const p = { metadata: { name, namespace: 'ns1', labels: { app: 'web' }, uid: `u-${name}` },
      spec: { nodeName: 'n1', containers: [{ ports: [{ name: 'http', containerPort: 8080 }] }] },
      status: { phase: 'Running', podIPs: ips.map((ip) => ({ ip })), conditions: [{ type: 'Ready', status: 'True' }] } };
    mutate(p);
    return p;
  };
  const web = makeSvc('web', (s) => Object.assign(s.spec, { selector: { app: 'web' }, ipFamilies: ['IPv4', 'IPv6'], ports: [{ name: 'h', port: 80, targetPort: 'http' }] }));

  it('one slice per family; pods without a node, an address of the family, or done are left out', () => {
    const slices = buildEndpointSlices(web as never, [
      pod('a', ['10.10.1.1', 'fd00:10::1']), pod('b', ['10.10.1.2']),
      pod('c', ['10.10.1.3'], (p) => { delete p.spec.nodeName; }), pod('d', ['10.10.1.4'], (p) => { p.status.phase = 'Succeeded'; }),
    ], []);
    expect(slices.map((s) => [s.metadata.name, s.addressType, s.endpoints.map((e) => (e as { addresses: string[] }).addresses[0])])).toEqual([
      ['web-ipv4', 'IPv4', ['10.10.1.1', '10.10.1.2']], ['web-ipv6', 'IPv6', ['fd00:10::1']],
    ]);
  });

  it('pods that name the target port differently go to different slices; an unresolved name leaves the pod in a slice without that port', () => {
    const slices = buildEndpointSlices({ ...web, spec: { ...web.spec, ipFamilies: ['IPv4'] } } as never, [
      pod('a', ['10.10.1.1']), pod('b', ['10.10.1.2'], (p) => { p.spec.containers[0].ports[0].containerPort = 9090; }),
      pod('c', ['10.10.1.3'], (p) => { p.spec.containers[0].ports[0].name = 'other'; }),
    ], []);
    expect(slices.map((s) => [s.metadata.name, s.ports.map((p) => p.port), s.endpoints.length])).toEqual([['web-ipv4', [8080], 1], ['web-ipv4-1', [9090], 1], ['web-ipv4-2', [], 1]]);
  });

  it('a named targetPort one pod does not resolve drops only that endpoint from that port, not the Service\'s other ports', () => {
    const twoPorts = makeSvc('web', (s) => Object.assign(s.spec, { selector: { app: 'web' }, ipFamilies: ['IPv4'],
      ports: [{ name: 'h', port: 80, targetPort: 'http' }, { name: 'm', port: 9100, targetPort: 9100 }] }));
    const slices = buildEndpointSlices(twoPorts as never, [
      pod('a', ['10.10.1.1']), pod('b', ['10.10.1.2'], (p) => { p.spec.containers[0].ports = []; }),
    ], []);
    const view = slices.map((s) => ({ ports: s.ports.map((p) => `${p.name}:${p.port}`), pods: s.endpoints.map((e) => (e as { targetRef: { name: string } }).targetRef.name) }));
    expect(view).toEqual([{ ports: ['h:8080', 'm:9100'], pods: ['a'] }, { ports: ['m:9100'], pods: ['b'] }]);
  });

  it('publishNotReadyAddresses keeps not-ready pods ready; no selector, no slices', () => {
    const nr = pod('a', ['10.10.1.1'], (p) => { p.status.conditions = []; });
    const [s] = buildEndpointSlices({ ...web, spec: { ...web.spec, ipFamilies: ['IPv4'], publishNotReadyAddresses: true } } as never, [nr], []);
    expect((s!.endpoints[0] as { conditions: object }).conditions).toEqual({ ready: true, serving: false, terminating: false });
    expect(buildEndpointSlices(makeSvc('x', (v) => { delete v.spec.selector; }) as never, [nr], [])).toEqual([]);
  });
});

describe('tokens and RBAC', () => {
  const manifest = (f: string) => readFileSync(new URL(`../../../../manifests/${f}`, import.meta.url), 'utf8');
  const policy = parseRbac([manifest('clusterrole.yaml'), manifest('clusterrolebinding.yaml')]);

  it('reads the token file format of kube-apiserver; a malformed line throws with its number', () => {
    const t = parseTokenFile('# comment\n\nt1,admin,1,"system:masters,x"\nt2,system:serviceaccount:ns:sa,2\n');
    expect(t.get('t1')).toEqual({ name: 'admin', groups: ['system:masters', 'x'] });
    expect(userGroups(t.get('t2')!).groups).toEqual(['system:serviceaccounts', 'system:serviceaccounts:ns', 'system:authenticated']);
    expect(() => parseTokenFile('ok,u,1\nbroken\n')).toThrow(/line 2/);
  });

  it('binds the ServiceAccount of the manifests to the ClusterRole, and nobody else', () => {
    const op = userGroups({ name: 'system:serviceaccount:ipvs-operator:ipvs-operator', groups: [] });
    const other = userGroups({ name: 'system:serviceaccount:default:ipvs-operator', groups: [] });
    const a = { verb: 'watch', group: 'discovery.k8s.io', resource: 'endpointslices' };
    expect(authorize(policy, op, a)).toBe(true);
    expect(authorize(policy, other, a)).toBe(false);
    expect(authorize(policy, op, { verb: 'update', group: 'ipvs-operator.io', resource: 'ipvsnodestates', subresource: 'status', name: 'n1' })).toBe(true);
    expect(authorize(policy, op, { verb: 'patch', group: 'ipvs-operator.io', resource: 'ipvsnodestates', subresource: 'status', name: 'n1' })).toBe(false);
  });
});

describe('paths, selectors and the command line', () => {
  it.each([
    ['/api/v1/namespaces/ns1/services/x/status', { group: '', version: 'v1', plural: 'services', namespace: 'ns1', name: 'x', subresource: 'status' }],
    ['/api/v1/namespaces/ns1', { plural: 'namespaces', name: 'ns1' }],
    ['/api/v1/namespaces/ns1/status', { plural: 'namespaces', name: 'ns1', subresource: 'status' }],
    ['/apis/discovery.k8s.io/v1/endpointslices', { group: 'discovery.k8s.io', plural: 'endpointslices' }],
    ['/apis/ipvs-operator.io/v1alpha1/ipvsnodestates/n1/status', { group: 'ipvs-operator.io', name: 'n1', subresource: 'status' }],
  ])('%s', (path, want) => {
    expect(parseResourcePath(path)).toMatchObject(want);
  });
  it.each(['/version', '/api', '/apis/x', '/api/v1/a/b/c/d'])('%s is not a resource path', (path) => {
    expect(parseResourcePath(path)).toBeUndefined();
  });

  it('parses set-based label selectors and refuses garbage', () => {
    expect(parseLabelSelector('a=b,c!=d,e in (f, g),!h,i')).toEqual([
      { key: 'a', op: '=', values: ['b'] }, { key: 'c', op: '!=', values: ['d'] }, { key: 'e', op: 'in', values: ['f', 'g'] },
      { key: 'h', op: '!', values: [] }, { key: 'i', op: 'exists', values: [] },
    ]);
    expect(() => parseLabelSelector('a=(')).toThrow();
  });

  it('reads the command line; bad flags throw', () => {
    expect(parseApiServerArgs(['--listen', '0.0.0.0:6443', '--cert', 'c', '--key', 'k', '--rbac', 'a', '--rbac', 'b', '--service-cidr', '10.96.0.0/16', '--node-port-range', '30000-30002']))
      .toMatchObject({ host: '0.0.0.0', port: 6443, cert: 'c', key: 'k', rbac: ['a', 'b'], serviceCIDRs: ['10.96.0.0/16'], nodePortRange: [30000, 30002] });
    expect(parseApiServerArgs(['--listen', '[::1]:6443'])).toMatchObject({ host: '::1', port: 6443 });
    expect(() => parseApiServerArgs(['--cert', 'c'])).toThrow(/go together/);
    expect(() => parseApiServerArgs(['--node-port-range', '5-1'])).toThrow(/LO-HI/);
    expect(() => parseApiServerArgs(['--bogus', 'x'])).toThrow(/unknown flag/);
    expect(parseApiServerArgs(['--etcd-servers', 'http://127.0.0.1:2379'])).toMatchObject({ etcd: 'http://127.0.0.1:2379' });
    expect(() => parseApiServerArgs(['--etcd-servers', 'https://a:1,http://b:2'])).toThrow(/one http:\/\/host:port/);
    expect(parseApiServerArgs(['--exec', 'netns'])).toMatchObject({ exec: 'netns' });
    expect(() => parseApiServerArgs(['--exec', 'docker'])).toThrow(/--exec: expected netns/);
    expect(resourceOfDocument('apps/v1', 'DaemonSet')).toBe('daemonsets');
    expect(resourceOfDocument('v1', 'Secret')).toBeUndefined();
  });
});
