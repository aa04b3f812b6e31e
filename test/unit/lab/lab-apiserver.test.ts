// The lab API server over real HTTP with its lab behaviour on: bearer tokens and RBAC from
// manifests/clusterrole.yaml + clusterrolebinding.yaml (403 as a Status), Service allocation
// (422 Invalid like the real API), the EndpointSlice controller following Pods, graceful Pod
// deletion, patches, selectors, pods/log from the kubelet's files (`kubectl logs`), and garbage
// requests answered with a Status, never a crash.
// Addresses: Services 10.200.1.0/24 (+ fd00:10:200::/108), pods 10.10.0.0/16, nodes 192.168.10.0/24.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { request } from 'node:http';
import { LabApiServer } from '../../../lab/cluster/apiserver.js';
import { scratchDir } from '../../support/scratch.js';
import { podLogPath } from '../../../lab/cluster/podlog.js';
import { parseTokenFile } from '../../../lab/cluster/rbac.js';

const manifest = (f: string) => readFileSync(new URL(`../../../../manifests/${f}`, import.meta.url), 'utf8');
const SA = 'system:serviceaccount:ipvs-operator:ipvs-operator';
let api: LabApiServer;
const podLogDir = scratchDir('lab-pod-logs-');

beforeAll(async () => {
  api = await LabApiServer.start({
    auth: { tokens: parseTokenFile(`admin-t,admin,1,"system:masters"\nop-t,${SA},2\nnobody-t,someone,3\n`), rbacYaml: [manifest('clusterrole.yaml'), manifest('clusterrolebinding.yaml')] },
    lab: { alloc: { serviceCIDRs: ['10.200.1.0/24', 'fd00:10:200::/108'], nodePortRange: [30000, 30003] }, defaultGraceSeconds: 30, advertiseAddress: '172.18.0.2',
      loadBalancerPool: '172.18.255.200/30' },
    podLogDir,
  });
});
afterAll(() => api.close());

type Reply = { code: number; json: Record<string, unknown> };
async function call(token: string | undefined, method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Reply> {
  const r = await fetch(`${api.url}${path}`, {
    method, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': contentType },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await r.text();
  return { code: r.status, json: (text.trim() ? JSON.parse(text.split('\n')[0]!) : {}) as Record<string, unknown> };
}
const admin = (method: string, path: string, body?: unknown, contentType?: string) => call('admin-t', method, path, body, contentType);
const svc = (name: string, spec: object) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name }, spec });
const spec = (r: Reply) => r.json.spec as Record<string, unknown> & { ports: Array<Record<string, unknown>> };

describe('lab API server: the kubernetes Service', () => {
  it('exists in default on the first address of the service CIDR, https 443 to the server, with its EndpointSlice', async () => {
    const port = Number(new URL(api.url).port);
    const s = await admin('GET', '/api/v1/namespaces/default/services/kubernetes');
    expect({ code: s.code, clusterIPs: spec(s).clusterIPs, ports: spec(s).ports, selector: spec(s).selector })
      .toEqual({ code: 200, clusterIPs: ['10.200.1.1'], ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: port }], selector: undefined });
    const slice = await admin('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes');
    expect(slice.json).toMatchObject({ addressType: 'IPv4', endpoints: [{ addresses: ['172.18.0.2'] }], ports: [{ name: 'https', port }] });
  });
});

describe('lab API server: the LoadBalancer controller (a four-address pool, 172.18.255.200/30)', () => {
  const ingress = async (name: string) => ((await admin('GET', `/api/v1/namespaces/default/services/${name}`)).json.status as
    { loadBalancer?: { ingress?: Array<{ ip: string; ipMode?: string }> } } | undefined)?.loadBalancer?.ingress;
  // No NodePorts (allocateLoadBalancerNodePorts: false): this server's range has four, for the tests below.
  const lb = (name: string) => svc(name, { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, ports: [{ port: 80, targetPort: 8080 }], selector: { app: 'web' } });

  it('gives each LoadBalancer an ingress IP from the pool, leaves the third pending, and reuses a released one', async () => {
    const names = ['lb-1', 'lb-2', 'lb-3', 'lb-4', 'lb-5'];
    for (const name of names) expect((await admin('POST', '/api/v1/namespaces/default/services', lb(name))).code).toBe(201);
    expect(await Promise.all(names.map(ingress))).toEqual([
      ...['200', '201', '202', '203'].map((x) => [{ ip: `172.18.255.${x}`, ipMode: 'VIP' }]),
      undefined, // the pool is used up: pending, as MetalLB leaves it
    ]);
    // lb-1 becomes a ClusterIP Service (kubectl patch): its IP goes back, and the pending one gets it.
    const patched = await admin('PATCH', '/api/v1/namespaces/default/services/lb-1', { spec: { type: 'ClusterIP', ports: [{ port: 80, targetPort: 8080 }] } },
      'application/strategic-merge-patch+json');
    expect(patched.code).toBe(200);
    expect(await ingress('lb-1')).toBeUndefined();
    expect(await ingress('lb-5')).toEqual([{ ip: '172.18.255.200', ipMode: 'VIP' }]);
    // Deleting a LoadBalancer frees its IP; an ingress written by someone else is left alone.
    expect((await admin('DELETE', '/api/v1/namespaces/default/services/lb-2')).code).toBe(200);
    const other = { ...lb('lb-6'), status: { loadBalancer: { ingress: [{ ip: '192.0.2.7' }] } } };
    expect((await admin('POST', '/api/v1/namespaces/default/services', other)).code).toBe(201);
    expect(await ingress('lb-6')).toEqual([{ ip: '192.0.2.7' }]);
    expect((await admin('POST', '/api/v1/namespaces/default/services', lb('lb-7'))).code).toBe(201);
    expect(await ingress('lb-7')).toEqual([{ ip: '172.18.255.201', ipMode: 'VIP' }]);
    for (const name of ['lb-1', 'lb-3', 'lb-4', 'lb-5', 'lb-6', 'lb-7']) await admin('DELETE', `/api/v1/namespaces/default/services/${name}`);
  });
});

describe('lab API server: Events expire an hour after their last write, as with --event-ttl=1h', () => {
  it('an Event is listed until its TTL runs out, an update starts it again, then it is gone with DELETED to a watch', async () => {
    let t = Date.parse('2026-11-25T00:00:00Z');
    const own = await LabApiServer.start({ lab: { clock: () => t } });
    try {
      const path = '/api/v1/namespaces/default/events';
      const at = (p: string, init?: RequestInit) => fetch(`${own.url}${p}`, { ...init, headers: { 'content-type': 'application/json' } });
      const names = async () => ((await (await at(path)).json()) as { items: Array<{ metadata: { name: string } }> }).items.map((i) => i.metadata.name).sort();
      const ev = (name: string, count: number) => ({ apiVersion: 'v1', kind: 'Event', metadata: { name, namespace: 'default' }, reason: 'Test', message: 'm', count,
        involvedObject: { kind: 'Node', name: 'n1' } });
      expect((await at(path, { method: 'POST', body: JSON.stringify(ev('a.1', 1)) })).status).toBe(201);
      expect((await at(path, { method: 'POST', body: JSON.stringify(ev('b.1', 1)) })).status).toBe(201);
      t += 59 * 60_000;
      expect(await names()).toEqual(['a.1', 'b.1']);
      const cur = (await (await at(`${path}/a.1`)).json()) as { metadata: object };
      expect((await at(`${path}/a.1`, { method: 'PUT', body: JSON.stringify({ ...ev('a.1', 2), metadata: cur.metadata }) })).status).toBe(200);
      const rv = own.resourceVersion;
      t += 2 * 60_000; // 61 min after both writes of b, 2 min after a's update
      expect(await names()).toEqual(['a.1']);
      const watch = await at(`${path}?watch=true&resourceVersion=${rv}`);
      const reader = watch.body!.getReader();
      const { value } = await reader.read();
      expect(new TextDecoder().decode(value)).toMatch(/^\{"type":"DELETED","object":\{.*"name":"b\.1"/);
      await reader.cancel();
      t += 58 * 60_000;
      expect(await names()).toEqual([]);
      expect((await at(`${path}/a.1`)).status).toBe(404);
    } finally {
      await own.close();
    }
  });
});

describe('lab API server: authentication and RBAC from manifests/', () => {
  it.each([
    ['no token', undefined, 'GET', '/api/v1/services', 401],
    ['unknown token', 'nope', 'GET', '/api/v1/services', 401],
    ['operator lists services', 'op-t', 'GET', '/api/v1/services', 200],
    ['operator lists endpointslices', 'op-t', 'GET', '/apis/discovery.k8s.io/v1/endpointslices', 200],
    ['operator watches its node', 'op-t', 'GET', '/api/v1/nodes?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dn1', 200],
    ['operator lists secrets (not even served)', 'op-t', 'GET', '/api/v1/secrets', 403],
    ['operator lists pods', 'op-t', 'GET', '/api/v1/pods', 403],
    ['operator gets one service', 'op-t', 'GET', '/api/v1/namespaces/default/services/x', 403],
    ['operator creates a service', 'op-t', 'POST', '/api/v1/namespaces/default/services', 403],
    ['operator deletes a service', 'op-t', 'DELETE', '/api/v1/namespaces/default/services/x', 403],
    ['operator updates a service status', 'op-t', 'PUT', '/api/v1/namespaces/default/services/x/status', 403],
    ['operator lists every config', 'op-t', 'GET', '/apis/ipvs-operator.io/v1alpha1/ipvsproxyconfigs', 403],
    ['operator lists config "default"', 'op-t', 'GET', '/apis/ipvs-operator.io/v1alpha1/ipvsproxyconfigs?fieldSelector=metadata.name%3Ddefault', 200],
    ['operator updates a node state (not status)', 'op-t', 'PUT', '/apis/ipvs-operator.io/v1alpha1/ipvsnodestates/n1', 403],
    ['operator updates node state status: allowed, object missing', 'op-t', 'PUT', '/apis/ipvs-operator.io/v1alpha1/ipvsnodestates/n1/status', 404],
    ['operator creates an event', 'op-t', 'POST', '/api/v1/namespaces/default/events', 201],
    ['operator reads discovery', 'op-t', 'GET', '/apis', 200],
    ['a user without a binding', 'nobody-t', 'GET', '/api/v1/services', 403],
    ['admin gets a missing service', 'admin-t', 'GET', '/api/v1/namespaces/default/services/x', 404],
    ['version needs no token', undefined, 'GET', '/version', 200],
  ] as const)('%s -> %i', async (_what, token, method, path, code) => {
    const r = await call(token, method, path, ['PUT', 'POST'].includes(method) ? { metadata: { name: 'n1' } } : undefined);
    expect(r.code).toBe(code);
    if (code >= 400) expect(r.json).toMatchObject({ kind: 'Status', status: 'Failure', code });
  });

  it('a 403 names the user, verb, resource, group and namespace as the real server does', async () => {
    const r = await call('op-t', 'DELETE', '/api/v1/namespaces/default/services/x');
    expect(r.json).toMatchObject({ reason: 'Forbidden', message: `services "x" is forbidden: User "${SA}" cannot delete resource "services" in API group "" in the namespace "default"` });
  });

  it('a ClusterRoleBinding created through the API takes effect', async () => {
    expect((await call('nobody-t', 'GET', '/api/v1/nodes')).code).toBe(403);
    await admin('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'someone-op' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ipvs-operator' }, subjects: [{ kind: 'User', name: 'someone' }],
    });
    expect((await call('nobody-t', 'GET', '/api/v1/nodes')).code).toBe(200);
    await admin('DELETE', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/someone-op');
    expect((await call('nobody-t', 'GET', '/api/v1/nodes')).code).toBe(403);
  });
});

describe('lab API server: Service allocation', () => {
  const create = (name: string, s: object, ns = 'alloc') => admin('POST', `/api/v1/namespaces/${ns}/services`, svc(name, s));

  it('allocates ClusterIPs from .2 and NodePorts from the range; refuses taken, out-of-range and exhausted ones with 422', async () => {
    const a = await create('a', { type: 'NodePort', ports: [{ port: 80 }] });
    expect(a.code).toBe(201);
    expect(spec(a)).toMatchObject({ clusterIP: '10.200.1.2', clusterIPs: ['10.200.1.2'], ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack',
      sessionAffinity: 'None', externalTrafficPolicy: 'Cluster', ports: [{ port: 80, protocol: 'TCP', targetPort: 80, nodePort: 30000 }] });
    const b = await create('b', { clusterIP: '10.200.1.2', ports: [{ port: 80 }] });
    expect(b).toMatchObject({ code: 422, json: { kind: 'Status', reason: 'Invalid', message: 'Service "b" is invalid: spec.clusterIPs[0]: Invalid value: "10.200.1.2": provided IP is already allocated' } });
    expect((await create('c', { clusterIP: '10.9.9.9', ports: [{ port: 80 }] })).json.message).toContain('provided IP is not in the valid range. The range of valid IPs is 10.200.1.0/24');
    expect((await create('c', { type: 'NodePort', ports: [{ port: 80, nodePort: 30000 }] })).json.message).toContain('spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated');
    expect((await create('c', { type: 'NodePort', ports: [{ port: 80, nodePort: 31000 }] })).json.message).toContain('not in the valid range. The range of valid ports is 30000-30003');
    expect((await create('c', { ports: [{ port: 80, nodePort: 30001 }] })).json.message).toContain("Forbidden: may not be used when `type` is 'ClusterIP'");
    const lb = await create('lb', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ port: 1, nodePort: 30002 }, { port: 2 }] });
    expect(spec(lb)).toMatchObject({ clusterIP: '10.200.1.3', ports: [{ nodePort: 30002 }, { nodePort: 30001 }], healthCheckNodePort: 30003 });
    const full = await create('full', { type: 'NodePort', ports: [{ port: 1 }] });
    expect(full).toMatchObject({ code: 422, json: { reason: 'Invalid' } });
    expect(String(full.json.message)).toContain('is full');
    // Deleting a Service frees its ports.
    expect((await admin('DELETE', '/api/v1/namespaces/alloc/services/a')).code).toBe(200);
    expect(spec(await create('again', { type: 'NodePort', ports: [{ port: 1 }] })).ports[0]!.nodePort).toBe(30000);
  });

  it('dual-stack: families as asked, IPv6 from its range; headless and ExternalName get no address', async () => {
    const d = await create('dual', { ipFamilyPolicy: 'PreferDualStack', ipFamilies: ['IPv6'], ports: [{ port: 80 }] }, 'dual');
    expect(spec(d)).toMatchObject({ ipFamilies: ['IPv6', 'IPv4'], clusterIPs: ['fd00:10:200::2', expect.stringMatching(/^10\.200\.1\./)] });
    expect(spec(d).clusterIP).toBe('fd00:10:200::2');
    expect(spec(await create('h', { clusterIP: 'None', ports: [{ port: 80 }] }, 'dual'))).toMatchObject({ clusterIP: 'None', clusterIPs: ['None'] });
    const en = await create('en', { type: 'ExternalName', externalName: 'example.org' }, 'dual');
    expect(spec(en).clusterIP).toBeUndefined();
  });

  it('keeps clusterIPs and nodePorts over updates and refuses changing the clusterIP', async () => {
    await admin('DELETE', '/api/v1/namespaces/alloc/services/lb'); // frees NodePorts of the small range
    const a = await create('keep', { type: 'NodePort', ports: [{ port: 80 }] }, 'upd');
    const { clusterIP, ports } = spec(a);
    const put = await admin('PUT', '/api/v1/namespaces/upd/services/keep', svc('keep', { type: 'NodePort', ports: [{ port: 80 }], selector: { app: 'x' } }));
    expect(spec(put)).toMatchObject({ clusterIP, ports: [{ nodePort: ports[0]!.nodePort }], selector: { app: 'x' } });
    const bad = await admin('PATCH', '/api/v1/namespaces/upd/services/keep', { spec: { clusterIP: '10.200.1.250', clusterIPs: ['10.200.1.250'] } }, 'application/merge-patch+json');
    expect(bad).toMatchObject({ code: 422, json: { reason: 'Invalid' } });
    expect(String(bad.json.message)).toContain('may not change once set');
  });
});

describe('lab API server: EndpointSlice controller and Pods', () => {
  const pod = (name: string, node: string, ip: string, ready: boolean, labels = { app: 'web' }) => ({
    metadata: { name, labels }, spec: { nodeName: node, terminationGracePeriodSeconds: 30, containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 8080 }] }] },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  });
  const slices = async (ns: string, service: string) =>
    ((await admin('GET', `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${service}`)).json.items as Array<{
      metadata: { name: string }; addressType: string; ports: unknown[]; endpoints: Array<{ addresses: string[]; conditions: Record<string, boolean>; nodeName: string; zone?: string }>;
    }>);

  it('keeps slices in step with pods: ready, not ready, terminating, gone; named ports; zone; the Service deleted', async () => {
    await admin('POST', '/api/v1/nodes', { metadata: { name: 'w1', labels: { 'topology.kubernetes.io/zone': 'z1' } } });
    await admin('POST', '/api/v1/namespaces/eps/services', svc('web', { selector: { app: 'web' }, ports: [{ name: 'h', port: 80, targetPort: 'http' }] }));
    expect(await slices('eps', 'web')).toMatchObject([{ metadata: { name: 'web-ipv4' }, addressType: 'IPv4', endpoints: [] }]);
    await admin('POST', '/api/v1/namespaces/eps/pods', pod('p1', 'w1', '10.10.1.1', true));
    await admin('POST', '/api/v1/namespaces/eps/pods', pod('p2', 'w1', '10.10.1.2', false));
    await admin('POST', '/api/v1/namespaces/eps/pods', pod('other', 'w1', '10.10.1.3', true, { app: 'other' }));
    expect(await slices('eps', 'web')).toMatchObject([{ ports: [{ name: 'h', port: 8080, protocol: 'TCP' }], endpoints: [
      { addresses: ['10.10.1.1'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'w1', zone: 'z1' },
      { addresses: ['10.10.1.2'], conditions: { ready: false, serving: false, terminating: false } },
    ] }]);
    // A delete with the pod's grace period: terminating (serving, not ready) until a grace-0 delete, the kubelet's.
    const del = await admin('DELETE', '/api/v1/namespaces/eps/pods/p1');
    expect(del.code).toBe(200);
    expect((del.json.metadata as Record<string, unknown>).deletionTimestamp).toEqual(expect.any(String));
    expect((await slices('eps', 'web'))[0]!.endpoints[0]).toMatchObject({ addresses: ['10.10.1.1'], conditions: { ready: false, serving: true, terminating: true } });
    // A client's update cannot clear the deletion.
    const relabel = await admin('PUT', '/api/v1/namespaces/eps/pods/p1', { ...pod('p1', 'w1', '10.10.1.1', true), metadata: { name: 'p1', labels: { app: 'web', x: 'y' } } });
    expect(relabel.json.metadata).toMatchObject({ labels: { x: 'y' }, deletionTimestamp: expect.any(String), deletionGracePeriodSeconds: 30 });
    await admin('DELETE', '/api/v1/namespaces/eps/pods/p1?gracePeriodSeconds=0');
    expect((await admin('GET', '/api/v1/namespaces/eps/pods/p1')).code).toBe(404);
    expect((await slices('eps', 'web'))[0]!.endpoints.map((e) => e.addresses[0])).toEqual(['10.10.1.2']);
    // The pod becomes ready through the status subresource.
    await admin('PATCH', '/api/v1/namespaces/eps/pods/p2/status', { status: { conditions: [{ type: 'Ready', status: 'True' }] } }, 'application/merge-patch+json');
    expect((await slices('eps', 'web'))[0]!.endpoints[0]!.conditions).toEqual({ ready: true, serving: true, terminating: false });
    await admin('DELETE', '/api/v1/namespaces/eps/services/web');
    expect(await slices('eps', 'web')).toEqual([]);
  });

  it('deleting a namespace removes what is in it', async () => {
    await admin('POST', '/api/v1/namespaces', { metadata: { name: 'gone' } });
    await admin('POST', '/api/v1/namespaces/gone/configmaps', { metadata: { name: 'c' }, data: { a: '1' } });
    await admin('DELETE', '/api/v1/namespaces/gone');
    expect((await admin('GET', '/api/v1/namespaces/gone/configmaps/c')).code).toBe(404);
  });
});

describe('lab API server: pods/log, as kubectl logs reads it', () => {
  const logOf = async (token: string, path: string) => {
    const r = await fetch(`${api.url}/api/v1/namespaces/logs/pods/${path}`, { headers: { authorization: `Bearer ${token}` } });
    const text = await r.text();
    return { code: r.status, type: r.headers.get('content-type'), text: r.headers.get('content-type') === 'text/plain' ? text : (JSON.parse(text) as { message: string }).message };
  };
  const op = (restartCount: number, containers = ['op']) => ({
    metadata: { name: 'op' }, spec: { nodeName: 'w1', containers: containers.map((name) => ({ name })) },
    status: { phase: 'Running', containerStatuses: [{ name: 'op', restartCount }] },
  });

  it('answers the current run\'s file as plain text, the previous one with previous=true, the tail with tailLines', async () => {
    const created = await admin('POST', '/api/v1/namespaces/logs/pods', op(1));
    const uid = String((created.json.metadata as { uid: string }).uid);
    for (const [run, text] of [[0, 'first run\nkilled\n'], [1, 'a\nb\nc\n']] as const) {
      const f = podLogPath(podLogDir, { namespace: 'logs', name: 'op', uid }, 'op', run);
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, text);
    }
    expect(await logOf('admin-t', 'op/log')).toEqual({ code: 200, type: 'text/plain', text: 'a\nb\nc\n' });
    expect(await logOf('admin-t', 'op/log?container=op&tailLines=2')).toEqual({ code: 200, type: 'text/plain', text: 'b\nc\n' });
    expect(await logOf('admin-t', 'op/log?previous=true')).toEqual({ code: 200, type: 'text/plain', text: 'first run\nkilled\n' });
    // Another pod of the same name (a new UID) has no log yet.
    await admin('DELETE', '/api/v1/namespaces/logs/pods/op?gracePeriodSeconds=0');
    await admin('POST', '/api/v1/namespaces/logs/pods', op(0));
    expect(await logOf('admin-t', 'op/log')).toMatchObject({ code: 400, text: 'container "op" in pod "op" is waiting to start: ContainerCreating' });
    expect(await logOf('admin-t', 'op/log?previous=true')).toMatchObject({ code: 400, text: 'previous terminated container "op" in pod "op" not found' });
  });

  it('refuses what kube-apiserver refuses: no container named among several, a wrong one, a bad tail, no pod, no RBAC grant', async () => {
    await admin('POST', '/api/v1/namespaces/logs/pods', { ...op(0, ['op', 'side']), metadata: { name: 'two' } });
    expect(await logOf('admin-t', 'two/log')).toMatchObject({ code: 400, text: 'a container name must be specified for pod two, choose one of: [op side]' });
    expect(await logOf('admin-t', 'two/log?container=nope')).toMatchObject({ code: 400, text: 'container nope is not valid for pod two' });
    expect(await logOf('admin-t', 'two/log?container=op&tailLines=x')).toMatchObject({ code: 400 });
    expect(await logOf('admin-t', 'missing/log')).toMatchObject({ code: 404, text: 'pods "missing" not found' });
    // manifests/clusterrole.yaml grants the operator no pods/log.
    expect(await logOf('op-t', 'two/log?container=op')).toMatchObject({ code: 403 });
  });

  it('shows restarts and a crash-looping container in kubectl get pods\' table', async () => {
    await admin('POST', '/api/v1/namespaces/logs/pods', {
      ...op(3), metadata: { name: 'looping' },
      status: { phase: 'Running', containerStatuses: [{ name: 'op', restartCount: 3, state: { waiting: { reason: 'CrashLoopBackOff' } } }] },
    });
    const r = await fetch(`${api.url}/api/v1/namespaces/logs/pods/looping`, { headers: { authorization: 'Bearer admin-t', accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } });
    const table = await r.json() as { columnDefinitions: Array<{ name: string }>; rows: Array<{ cells: unknown[] }> };
    const row = Object.fromEntries(table.columnDefinitions.map((c, i) => [c.name, table.rows[0]!.cells[i]]));
    expect(row).toMatchObject({ Name: 'looping', Status: 'CrashLoopBackOff', Restarts: 3 });
  });
});

describe('lab API server: patches and selectors', () => {
  const cm = '/api/v1/namespaces/p/configmaps';
  it.each([
    ['merge patch', 'application/merge-patch+json', { metadata: { labels: { b: '2', a: null } } }, { a: undefined, b: '2' }],
    ['JSON patch', 'application/json-patch+json', [{ op: 'add', path: '/metadata/labels/c', value: '3' }, { op: 'remove', path: '/metadata/labels/a' }], { a: undefined, c: '3' }],
    ['strategic merge patch', 'application/strategic-merge-patch+json', { metadata: { labels: { d: '4' } } }, { a: '1', d: '4' }],
    ['server-side apply (YAML)', 'application/apply-patch+yaml', 'metadata:\n  labels:\n    e: "5"\n', { a: '1', e: '5' }],
  ])('%s', async (_what, type, patch, labels) => {
    await admin('DELETE', `${cm}/x`);
    await admin('POST', cm, { metadata: { name: 'x', labels: { a: '1' } } });
    const r = await admin('PATCH', `${cm}/x`, patch, type);
    expect(r.code).toBe(200);
    const got = (r.json.metadata as { labels: Record<string, string> }).labels;
    for (const [k, v] of Object.entries(labels)) expect(got[k]).toBe(v);
  });

  it('server-side apply creates a missing object; a strategic patch merges list elements by key', async () => {
    const r = await admin('PATCH', '/api/v1/namespaces/p/services/ssa', 'apiVersion: v1\nkind: Service\nmetadata:\n  name: ssa\nspec:\n  ports:\n  - name: a\n    port: 80\n  - name: b\n    port: 81\n', 'application/apply-patch+yaml');
    expect(r.code).toBe(201);
    const p = await admin('PATCH', '/api/v1/namespaces/p/services/ssa', {
      spec: { '$setElementOrder/ports': [{ port: 81 }, { port: 82 }], ports: [{ port: 82, name: 'c' }, { $patch: 'delete', port: 80 }] },
    }, 'application/strategic-merge-patch+json');
    expect(spec(p).ports.map((x) => `${x.name}:${x.port}`)).toEqual(['b:81', 'c:82']);
  });

  it('label and field selectors filter lists', async () => {
    for (const [name, tier] of [['s1', 'a'], ['s2', 'b'], ['s3', 'a']]) await admin('POST', `${cm.replace('/p/', '/sel/')}`, { metadata: { name, labels: { tier: tier! } } });
    const names = async (q: string) => ((await admin('GET', `/api/v1/namespaces/sel/configmaps?${q}`)).json.items as Array<{ metadata: { name: string } }>).map((o) => o.metadata.name);
    expect(await names('labelSelector=tier%3Da')).toEqual(['s1', 's3']);
    expect(await names('labelSelector=tier+notin+(a)')).toEqual(['s2']);
    expect(await names('labelSelector=!tier')).toEqual([]);
    expect(await names('fieldSelector=metadata.name!%3Ds1')).toEqual(['s2', 's3']);
  });
});

describe('lab API server: Tables for kubectl get (-w)', () => {
  it('answers a list and a watch asking for Tables with Table objects (one row per watch event)', async () => {
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const get = async (q: string) => (await fetch(`${api.url}/api/v1/namespaces?fieldSelector=metadata.name%3Ddefault${q}`, { headers: { authorization: 'Bearer admin-t', accept } })).text();
    expect(JSON.parse(await get(''))).toMatchObject({ kind: 'Table', columnDefinitions: [{ name: 'Name' }, { name: 'Age' }], rows: [{ cells: ['default', expect.any(String)] }] });
    const lines = (await get('&watch=true&timeoutSeconds=1')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; object: { kind: string; rows: unknown[] } });
    expect(lines).toMatchObject([{ type: 'ADDED', object: { kind: 'Table', rows: [{ cells: ['default', expect.any(String)] }] } }]);
  });
});

describe('lab API server: garbage requests get a Status, never a crash', () => {
  it.each([
    ['bad JSON body', 'POST', '/api/v1/namespaces/g/configmaps', '{"metadata":', 'application/json', 400],
    ['a JSON array as object', 'POST', '/api/v1/namespaces/g/configmaps', '[1,2]', 'application/json', 400],
    ['metadata not an object', 'POST', '/api/v1/namespaces/g/configmaps', '{"metadata":"x"}', 'application/json', 400],
    ['no name', 'POST', '/api/v1/namespaces/g/configmaps', '{"metadata":{}}', 'application/json', 422],
    ['namespace mismatch', 'POST', '/api/v1/namespaces/g/configmaps', '{"metadata":{"name":"a","namespace":"h"}}', 'application/json', 400],
    ['unknown resource', 'GET', '/api/v1/widgets', undefined, 'application/json', 404],
    ['unknown group', 'GET', '/apis/nope.io/v1/things', undefined, 'application/json', 404],
    ['unknown subresource', 'GET', '/api/v1/namespaces/g/configmaps/a/scale', undefined, 'application/json', 404],
    ['too deep a path', 'GET', '/api/v1/namespaces/g/configmaps/a/b/c/d', undefined, 'application/json', 404],
    ['not an API path', 'GET', '/etc/passwd', undefined, 'application/json', 404],
    ['bad label selector', 'GET', '/api/v1/configmaps?labelSelector=a%3D%3D%3Db(', undefined, 'application/json', 400],
    ['bad field selector', 'GET', '/api/v1/configmaps?fieldSelector=nonsense', undefined, 'application/json', 400],
    ['bad continue token', 'GET', '/api/v1/configmaps?limit=1&continue=%%%', undefined, 'application/json', 400],
    ['unknown patch type', 'PATCH', '/api/v1/namespaces/default', '{}', 'text/plain', 415],
    ['JSON patch not a list', 'PATCH', '/api/v1/namespaces/default', '{}', 'application/json-patch+json', 400],
    ['failing JSON patch test', 'PATCH', '/api/v1/namespaces/default', '[{"op":"test","path":"/metadata/name","value":"x"}]', 'application/json-patch+json', 422],
    ['protobuf body', 'POST', '/api/v1/namespaces/g/configmaps', 'k8s\0garbage', 'application/vnd.kubernetes.protobuf', 415],
    ['bad YAML apply', 'PATCH', '/api/v1/namespaces/g/configmaps/a', 'a: [1', 'application/apply-patch+yaml', 400],
    ['stale resourceVersion', 'PUT', '/api/v1/namespaces/default', '{"metadata":{"name":"default","resourceVersion":"1"}}', 'application/json', 409],
    ['existing object', 'POST', '/api/v1/namespaces', '{"metadata":{"name":"default"}}', 'application/json', 409],
    ['delete collection', 'DELETE', '/api/v1/namespaces/g/configmaps', undefined, 'application/json', 405],
    ['unknown method', 'OPTIONS', '/api/v1/namespaces', undefined, 'application/json', 405],
  ] as const)('%s -> %i', async (_what, method, path, body, type, code) => {
    const r = await admin(method, path, body, type);
    expect(r.code).toBe(code);
    expect(r.json).toMatchObject({ kind: 'Status', status: 'Failure', code });
    expect((await admin('GET', '/api/v1/namespaces/default')).code).toBe(200);
  });

  it('survives a connection that sends half a request and goes away', async () => {
    const u = new URL(api.url);
    await new Promise<void>((resolve) => {
      const req = request({ host: u.hostname, port: u.port, method: 'POST', path: '/api/v1/namespaces/g/configmaps', headers: { 'content-length': '1000', authorization: 'Bearer admin-t' } });
      req.on('error', () => resolve());
      req.write('{"metadata":');
      setTimeout(() => { req.destroy(); resolve(); }, 50);
    });
    expect((await admin('GET', '/api/v1/namespaces/default')).code).toBe(200);
  });
});
