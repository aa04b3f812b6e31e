// What the informers keep of Services and EndpointSlices (src/source/trim.ts): every field the
// desired state reads survives, dropped fields change nothing it builds, typed list items and
// watch JSON end up as the same plain object, and end-to-end through KubeSource the objects
// handed on carry no managedFields.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { afterEach, describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { buildDesired } from '../../../src/desired/state.js';
import { KubeSource } from '../../../src/kube/source.js';
import { plain, trimEndpointSlice, trimService } from '../../../src/source/trim.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { FakeApiServer, clientFor } from '../../support/fake-apiserver.js';
import { waitFor } from '../../support/wait.js';

const managedFields = [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { 'f:ports': {} } } }];

const service = {
  apiVersion: 'v1', kind: 'Service',
  metadata: {
    name: 'web', namespace: 'ns1', uid: 'u1', resourceVersion: '7', creationTimestamp: '2026-01-01T00:00:00Z', managedFields,
    labels: { app: 'web' },
    annotations: { 'ipvs-operator.io/scheduler': 'wrr', 'kubectl.kubernetes.io/last-applied-configuration': '{"big":"json"}' },
  },
  spec: {
    type: 'LoadBalancer', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ipFamilies: ['IPv4'], externalTrafficPolicy: 'Local',
    healthCheckNodePort: 31000, sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30080 }],
  },
  status: { loadBalancer: { ingress: [{ ip: '192.0.2.1' }] }, conditions: [{ type: 'x', status: 'True' }] },
};

const slice = {
  apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
  metadata: { name: 'web-1', namespace: 'ns1', resourceVersion: '8', managedFields, labels: { 'kubernetes.io/service-name': 'web', extra: 'x' } },
  addressType: 'IPv4',
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  endpoints: [
    { addresses: ['10.1.0.1'], nodeName: 'node-a', zone: 'z1', hints: { forZones: [{ name: 'z1' }] },
      conditions: { ready: true, serving: true, terminating: false },
      targetRef: { kind: 'Pod', name: 'web-a', namespace: 'ns1', uid: 'p1', resourceVersion: '3' }, deprecatedTopology: { a: 'b' } },
    { addresses: ['10.1.0.2'], nodeName: 'node-b', hostname: 'h2', conditions: { ready: false, serving: true, terminating: true } },
    { addresses: ['10.1.0.3'], conditions: { ready: true, serving: true, terminating: false } },
  ],
};

const node = { metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'z1' } }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.1' }] } };

describe('trimService / trimEndpointSlice', () => {
  it('keep what the desired state reads: the same table, VIPs, sets, health checks and problems', () => {
    const build = (s: object, e: object) => buildDesired({ nodeName: 'node-a', node, services: [s as never], endpointSlices: [e as never] }, defaultProxyConfig, new PluginRegistry());
    const full = build(service, slice);
    const trimmed = build(trimService(structuredClone(service) as never), trimEndpointSlice(structuredClone(slice) as never));
    expect(trimmed).toEqual(full);
    expect(full.table.size).toBeGreaterThan(0);
  });

  it.each([
    ['managedFields', (o: Record<string, any>) => o.metadata.managedFields],
    ['creationTimestamp', (o: Record<string, any>) => o.metadata.creationTimestamp],
    ['the last-applied annotation', (o: Record<string, any>) => o.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']],
    ['status.conditions', (o: Record<string, any>) => o.status.conditions],
  ])('drop %s of a Service', (_what, get) => {
    expect(get(trimService(structuredClone(service) as never) as Record<string, any>)).toBeUndefined();
  });

  it('keep a Service identity, labels, the scheduler annotation, spec and status.loadBalancer', () => {
    const t = trimService(structuredClone(service) as never) as Record<string, any>;
    expect(t.metadata).toEqual({ name: 'web', namespace: 'ns1', uid: 'u1', resourceVersion: '7', labels: { app: 'web' }, annotations: { 'ipvs-operator.io/scheduler': 'wrr' } });
    expect(t.spec).toEqual(service.spec);
    expect(t.status).toEqual({ loadBalancer: service.status.loadBalancer });
  });

  it('keep each endpoint\'s addresses, conditions, node, zone, hostname, hints and targetRef kind/name; share common conditions', () => {
    const t = trimEndpointSlice(structuredClone(slice) as never) as Record<string, any>;
    expect(t.metadata).toEqual({ name: 'web-1', namespace: 'ns1', resourceVersion: '8', labels: slice.metadata.labels });
    expect(t.endpoints[0]).toEqual({ addresses: ['10.1.0.1'], nodeName: 'node-a', zone: 'z1', hints: { forZones: [{ name: 'z1' }] },
      conditions: { ready: true, serving: true, terminating: false }, targetRef: { kind: 'Pod', name: 'web-a' } });
    expect(t.endpoints[1]).toEqual({ addresses: ['10.1.0.2'], nodeName: 'node-b', hostname: 'h2', conditions: { ready: false, serving: true, terminating: true } });
    expect(t.endpoints[0].conditions).toBe(t.endpoints[2].conditions);
    expect(Object.isFrozen(t.endpoints[0].conditions)).toBe(true);
  });

  it('build the usual endpoint (node, conditions, targetRef, with or without a zone) with exactly the fields the general path keeps', () => {
    const ref = { kind: 'Pod', name: 'web-c', namespace: 'ns1', uid: 'p3' };
    const ready = { ready: true, serving: true, terminating: false };
    const t = trimEndpointSlice({ ...structuredClone(slice), endpoints: [
      { addresses: ['10.1.0.4'], nodeName: 'node-a', conditions: ready, targetRef: ref },
      { addresses: ['10.1.0.5'], nodeName: 'node-a', zone: 'z1', conditions: ready, targetRef: ref, deprecatedTopology: { a: 'b' } },
      { addresses: ['10.1.0.6'], nodeName: 7, conditions: 'yes', targetRef: { kind: 'Pod' } },
    ] } as never) as Record<string, any>;
    expect(t.endpoints).toEqual([
      { addresses: ['10.1.0.4'], nodeName: 'node-a', conditions: ready, targetRef: { kind: 'Pod', name: 'web-c' } },
      { addresses: ['10.1.0.5'], nodeName: 'node-a', zone: 'z1', conditions: ready, targetRef: { kind: 'Pod', name: 'web-c' } },
      { addresses: ['10.1.0.6'], nodeName: 7, conditions: 'yes', targetRef: { kind: 'Pod' } },
    ]);
    expect(t.endpoints.map((e: object) => Object.keys(e).sort())).toEqual([
      ['addresses', 'conditions', 'nodeName', 'targetRef'],
      ['addresses', 'conditions', 'nodeName', 'targetRef', 'zone'],
      ['addresses', 'conditions', 'nodeName', 'targetRef'],
    ]);
    expect(Object.keys(t.endpoints[2].targetRef)).toEqual(['kind']);
  });

  it.each([
    ['a wrong-typed clusterIP', { ...service, spec: { ...service.spec, clusterIP: 10 } }],
    ['ports that are not a list', { ...service, spec: { ...service.spec, ports: 'http' } }],
    ['a scheduler annotation that is not a string', { ...service, metadata: { ...service.metadata, annotations: { 'ipvs-operator.io/scheduler': 5 } } }],
  ])('keep %s as it came (it stays the Service\'s Problem)', (_what, s) => {
    const build = (x: object) => buildDesired({ nodeName: 'node-a', node, services: [x as never], endpointSlices: [slice as never] }, defaultProxyConfig, new PluginRegistry());
    expect(build(trimService(structuredClone(s) as never)).problems).toEqual(build(s).problems);
    expect(build(s).problems.length).toBeGreaterThan(0);
  });

  it('turn a typed list item (class instances, Dates, undefined attributes) into the watch\'s JSON form', () => {
    // As client-node's ObjectSerializer builds them: every attribute of the class set, Dates for timestamps.
    class Meta { name = 'web-1'; namespace = 'ns1'; resourceVersion = '8'; labels = slice.metadata.labels; uid = undefined; creationTimestamp = new Date(); }
    class Conditions { ready = true; serving = true; terminating = false; }
    class Endpoint { addresses = ['10.1.0.3']; conditions = new Conditions(); nodeName = undefined; zone = undefined; targetRef = undefined; }
    const typed = { metadata: new Meta(), addressType: 'IPv4', ports: slice.ports, endpoints: [new Endpoint()] };
    const json = { metadata: { name: 'web-1', namespace: 'ns1', resourceVersion: '8', labels: slice.metadata.labels, creationTimestamp: '2026-01-01T00:00:00Z' },
      addressType: 'IPv4', ports: slice.ports, endpoints: [{ addresses: ['10.1.0.3'], conditions: { ready: true, serving: true, terminating: false } }] };
    expect(trimEndpointSlice(typed as never)).toEqual(trimEndpointSlice(json as never));
    expect(plain({ a: new Date('2026-01-01T00:00:00.000Z'), b: undefined, c: [1, { d: undefined }] })).toEqual({ a: '2026-01-01T00:00:00Z', c: [1, {}] });
  });

  it('keep a "__proto__" key as data, never as the copy\'s prototype', () => {
    const s = JSON.parse('{"metadata": {"name": "web", "namespace": "ns1", "labels": {"__proto__": {"app": "x"}}}, "spec": {"__proto__": {"clusterIP": "10.96.0.99"}}}');
    const t = trimService(s) as any;
    expect(Object.getPrototypeOf(t.spec)).toBe(Object.prototype);
    expect(t.spec.clusterIP).toBeUndefined();
    expect(Object.hasOwn(t.spec, '__proto__')).toBe(true);
    expect(t.metadata.labels.app).toBeUndefined();
    expect(JSON.stringify(t)).toBe(JSON.stringify(s));
  });
});

describe('KubeSource trims', () => {
  let api: FakeApiServer | undefined;
  let source: KubeSource | undefined;
  afterEach(async () => {
    await source?.stop();
    await api?.close();
  });

  it('listed and watched Services and EndpointSlices', async () => {
    api = await FakeApiServer.start();
    api.put('services', service);
    api.put('endpointslices', slice);
    const events: SourceEvent[] = [];
    source = new KubeSource({ client: clientFor(api), nodeName: 'node-a', relistMs: 0 });
    await source.start((e) => events.push(e));
    api.put('services', { ...service, metadata: { ...service.metadata, name: 'web2' } });
    api.put('endpointslices', { ...slice, metadata: { ...slice.metadata, name: 'web-2' } });
    await waitFor(() => events.filter((e) => e.kind === 'service' || e.kind === 'endpointslice').length >= 4, 'the watched objects');
    const objects = events.flatMap((e) => (e.kind === 'service' || e.kind === 'endpointslice') ? [e.object as Record<string, any>] : []);
    expect(objects).toHaveLength(4);
    for (const o of objects) {
      expect(o.metadata.managedFields).toBeUndefined();
      expect(o.metadata.creationTimestamp).toBeUndefined();
      expect(o.metadata.resourceVersion).toEqual(expect.any(String));
      expect(o.apiVersion).toBeUndefined();
    }
    const slices = objects.filter((o) => o.endpoints);
    expect(slices.map((s) => s.endpoints[0].targetRef)).toEqual([{ kind: 'Pod', name: 'web-a' }, { kind: 'Pod', name: 'web-a' }]);
  });
});
