// The ClusterRole grants exactly what the code uses. The code's API calls are collected by running
// it: KubeSource (every informer, an invalid config and its Event), listOnce, KubeEventSink and
// KubeStatusSink (create, update, the 404 and 409 paths) against the recording fake API server,
// each request mapped to an RBAC verb and resource the way the API server's authorizer does. A
// static scan keeps that honest: every API request written anywhere in src/ (KubeClient.request,
// pager, a Watch) is in the files the run exercises, and each of them made it during the run.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KubeClient } from '../../../src/kube/client.js';
import { parse } from 'yaml';
import { KubeEventSink } from '../../../src/kube/events.js';
import { listOnce } from '../../../src/kube/list-once.js';
import { KubeSource } from '../../../src/kube/source.js';
import { KubeStatusSink } from '../../../src/kube/status.js';
import { ClusterView } from '../../../src/kube/cluster-view.js';
import { ClusterWeights } from '../../../src/balance/cluster-view.js';
import { BACKENDS, KEY, VIEW, kernelStub, table } from '../../support/cluster-view.js';
import type { NodeStatus } from '../../../src/source/types.js';
import { FakeApiServer, type RecordedRequest, clientFor } from '../../support/fake-apiserver.js';
import { waitFor } from '../../support/wait.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

interface Rule { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }

/** One authorization check: `verb group/resource[/subresource]`, and the object name when the request names one. */
interface Access { verb: string; group: string; resource: string; name?: string }

/** The authorizer's view of a request (k8s.io/apiserver RequestInfo): verb, group, resource, name. */
function accessOf(r: RecordedRequest): Access {
  const parts = r.path.split('/').filter(Boolean);
  const [group, rest] = parts[0] === 'api' ? ['', parts.slice(2)] : [parts[1]!, parts.slice(3)];
  if (rest[0] === 'namespaces' && rest.length > 2) rest.splice(0, 2);
  const [resource, name, sub] = rest;
  const query = new URLSearchParams(r.query);
  // A list or watch with a metadata.name field selector is authorized against that name (RBAC resourceNames).
  const selected = /(?:^|,)metadata\.name=([^,]+)/.exec(query.get('fieldSelector') ?? '')?.[1];
  const verb = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: name ? 'delete' : 'deletecollection' }[r.method]
    ?? (name ? 'get' : query.get('watch') === 'true' ? 'watch' : 'list');
  const n = name ?? selected;
  return { verb, group, resource: sub ? `${resource!}/${sub}` : resource!, ...(n ? { name: n } : {}) };
}

const key = (a: Pick<Access, 'verb' | 'group' | 'resource'>) => `${a.verb} ${a.group || 'core'}/${a.resource}`;

/** Whether a rule allows an access (resourceNames: only accesses naming one of them). */
const allows = (rule: Rule, a: Access) => rule.apiGroups.includes(a.group) && rule.resources.includes(a.resource) &&
  rule.verbs.includes(a.verb) && (!rule.resourceNames || (a.name !== undefined && rule.resourceNames.includes(a.name)));

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** A request as written in the code: `<file> <HTTP method>` (a `pager` is a GET). */
const REQUEST = /\bclient\.request(?:<.*?>)?\(\s*'([A-Z]+)'|\bpager\s*[<(]/g;

/** Every API request written in src/ (outside the client itself), as `<file> <method>`. */
/**
 * The operator's source files: src/ without the client itself (the lab's own programs, such as
 * its kube-proxy stand-in, live in lab/: they are not the operator and do not run with its role).
 */
function operatorFiles(): string[] {
  return tsFiles('src').filter((f) => f !== join('src', 'kube', 'client.ts'));
}

function staticRequests(): string[] {
  const found = new Set<string>();
  for (const f of operatorFiles()) {
    for (const m of readFileSync(f, 'utf8').matchAll(REQUEST)) found.add(`${f} ${m[1] ?? 'GET'}`);
  }
  return [...found].sort();
}

const status = (n: number): NodeStatus => ({
  kernelIPVSVersion: '1.2.1', schedulersAvailable: ['rr'], virtualServers: n, realServers: n,
  lastSyncTime: '2025-01-02T03:04:05.000Z', lastSyncDurationSeconds: 0.01, lastError: '', problems: 0,
  consecutiveFailedSyncs: 0, healthy: true, healthReason: '',
});

let server: FakeApiServer;
/** Requests made during the run, as `<file> <method>`: the first caller outside client.ts and informer.ts (listAllPages). */
const called = new Set<string>();
const restore: Array<() => void> = [];

/** Wraps KubeClient.request to record who calls it; restored in afterAll. */
function recordApiCalls(): void {
  const proto = KubeClient.prototype as unknown as { request: (...a: unknown[]) => unknown };
  const original = proto.request;
  proto.request = function (this: unknown, ...args: unknown[]) {
    // Frames name src/*.ts (jest applies the source maps) or dist/src/*.js.
    const frame = (new Error().stack ?? '').split('\n').map((l) => /\/(src\/kube\/[\w-]+)\.[jt]s:/.exec(l)?.[1])
      .find((f) => f !== undefined && f !== 'src/kube/client' && f !== 'src/kube/informer');
    if (frame) called.add(`${frame}.ts ${String(args[0])}`);
    return original.apply(this, args);
  };
  restore.push(() => { proto.request = original; });
}

/** Runs every Kubernetes-facing component of the operator against the fake server. */
async function exerciseTheCode(): Promise<void> {
  server.put('services', makeService('ns1', 'svc1'));
  server.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]));
  server.put('nodes', makeNode());
  server.put('ipvsproxyconfigs', { metadata: { name: 'default' }, spec: { defaultScheduler: 'lc' } });
  const client = clientFor(server);
  const source = new KubeSource({ client, nodeName: NODE, backoff: { initialMs: 20, maxMs: 100, jitter: 0 } });
  await source.start(() => undefined);
  // An invalid config: the source posts a Warning Event on the IPVSProxyConfig itself.
  server.put('ipvsproxyconfigs', { metadata: { name: 'default' }, spec: { syncPeriod: -1 } });
  await waitFor(() => server.list('events').length > 0, 'the invalid-config Event');
  await source.stop();
  await listOnce(client, NODE); // what `explain`/`status --source kube` read

  const events = new KubeEventSink({ client, nodeName: NODE });
  await events.report([{ service: 'ns1/svc1', reason: 'UnknownScheduler', message: 'no plugin "x"' }], new Map());
  const sink = new KubeStatusSink({ client, nodeName: NODE });
  await sink.write(status(1)); // get (404), create, update status
  await sink.write(status(2));
  const o = server.get('ipvsnodestates', NODE)!;
  server.put('ipvsnodestates', { ...o, metadata: { ...o.metadata, labels: { changed: 'yes' } } });
  await sink.write(status(3)); // 409: get again, update status
  server.remove('ipvsnodestates', NODE);
  await sink.write(status(4)); // 404: get, create, update status

  // The cluster load view, leading: the Lease (get 404, create, get, update), this node's report
  // (get 404, create, then update), the reports and weights watched, weights written twice (get
  // 404, create; get, update) as the slow backend's weight comes down in steps.
  const weights = new ClusterWeights(3000);
  weights.apply(table, new Set([KEY]), Date.now());
  const view = new ClusterView({
    client, nodeName: NODE, namespace: 'ipvs-operator', ipvs: kernelStub(), weights,
    backends: () => new Map([[VIEW, BACKENDS.map((a) => `${a}:8080`)]]), poke: () => undefined, log: () => undefined,
    periodMs: 200, leaseDurationMs: 1000, renewDeadlineMs: 800, retryPeriodMs: 100,
    healing: { backoff: { initialMs: 20, maxMs: 100, jitter: 0 }, relistMs: 0, idleMs: 0, watchTimeoutSeconds: 30, maxRetryAfterMs: 1000 },
  });
  view.start();
  const written = () => server.requests.filter((r) => r.method === 'PUT' && r.path.includes('/ipvsserviceweights/')).length;
  await waitFor(() => written() >= 1 && server.requests.some((r) => r.method === 'PUT' && r.path.includes('/ipvsloadreports/')), 'weights and report updated', 20_000);
  await view.stop();
}

beforeAll(async () => {
  recordApiCalls();
  server = await FakeApiServer.start();
  await exerciseTheCode();
});

afterAll(async () => {
  for (const r of restore) r();
  await server.close();
});

const role = parse(readFileSync('manifests/clusterrole.yaml', 'utf8')) as { kind: string; rules: Rule[] };

describe('the ClusterRole against the API calls the code makes', () => {
  it('the run made every API request written in src/', () => {
    const written = staticRequests();
    expect(written).toEqual(['src/kube/cluster-view.ts GET', 'src/kube/cluster-view.ts POST', 'src/kube/cluster-view.ts PUT',
      'src/kube/events.ts POST', 'src/kube/lease.ts GET', 'src/kube/lease.ts POST', 'src/kube/lease.ts PUT', 'src/kube/list-once.ts GET', 'src/kube/reflector.ts GET',
      'src/kube/status.ts GET', 'src/kube/status.ts POST', 'src/kube/status.ts PUT']);
    expect(written.filter((r) => !called.has(r))).toEqual([]);
  });

  it('only the files the run exercises make API requests or watches', () => {
    const clients = operatorFiles()
      .filter((f) => new RegExp(REQUEST.source).test(readFileSync(f, 'utf8')) || /\.watchStream\(/.test(readFileSync(f, 'utf8'))).sort();
    expect(clients).toEqual(['src/kube/cluster-view.ts', 'src/kube/events.ts', 'src/kube/lease.ts', 'src/kube/list-once.ts', 'src/kube/reflector.ts', 'src/kube/status.ts']);
  });

  it('grants every access the code made', () => {
    const denied = server.requests.map(accessOf).filter((a) => !role.rules.some((r) => allows(r, a)));
    expect(denied.map((a) => `${key(a)}${a.name ? ` ${a.name}` : ''}`)).toEqual([]);
  });

  it('grants nothing the code did not use', () => {
    const used = new Set(server.requests.map((r) => key(accessOf(r))));
    const granted = role.rules.flatMap((r) => r.apiGroups.flatMap((group) => r.resources.flatMap((resource) => r.verbs.map((verb) => key({ verb, group, resource })))));
    expect(granted.filter((g) => !used.has(g))).toEqual([]);
    expect(new Set(granted).size).toBe(granted.length); // no grant twice
    expect([...used].sort()).toEqual([
      'create coordination.k8s.io/leases',
      'create core/events',
      'create ipvs-operator.io/ipvsloadreports',
      'create ipvs-operator.io/ipvsnodestates',
      'create ipvs-operator.io/ipvsserviceweights',
      'get coordination.k8s.io/leases',
      'get ipvs-operator.io/ipvsloadreports',
      'get ipvs-operator.io/ipvsnodestates',
      'get ipvs-operator.io/ipvsserviceweights',
      'list coordination.k8s.io/leases',
      'list core/nodes', 'list core/services',
      'list discovery.k8s.io/endpointslices',
      'list ipvs-operator.io/ipvsloadreports',
      'list ipvs-operator.io/ipvsproxyconfigs',
      'list ipvs-operator.io/ipvsserviceweights',
      'update coordination.k8s.io/leases',
      'update ipvs-operator.io/ipvsloadreports',
      'update ipvs-operator.io/ipvsnodestates/status',
      'update ipvs-operator.io/ipvsserviceweights',
      'watch coordination.k8s.io/leases',
      'watch core/nodes', 'watch core/services',
      'watch discovery.k8s.io/endpointslices',
      'watch ipvs-operator.io/ipvsloadreports',
      'watch ipvs-operator.io/ipvsproxyconfigs',
      'watch ipvs-operator.io/ipvsserviceweights',
    ]);
  });

  it('has no wildcards, and restricts the configuration to the object "default"', () => {
    for (const r of role.rules) expect([...r.apiGroups, ...r.resources, ...r.verbs]).not.toContain('*');
    expect(role.rules.filter((r) => r.resourceNames)).toEqual([
      { apiGroups: ['ipvs-operator.io'], resources: ['ipvsproxyconfigs'], resourceNames: ['default'], verbs: ['list', 'watch'] },
    ]);
  });

  it('maps requests to accesses as the API server does', () => {
    const a = (method: string, path: string, query = '') => accessOf({ method, path, query });
    expect(a('GET', '/api/v1/services', '?watch=true&resourceVersion=5')).toEqual({ verb: 'watch', group: '', resource: 'services' });
    expect(a('GET', '/api/v1/nodes', '?fieldSelector=metadata.name%3Dn1')).toEqual({ verb: 'list', group: '', resource: 'nodes', name: 'n1' });
    expect(a('POST', '/api/v1/namespaces/ns1/events')).toEqual({ verb: 'create', group: '', resource: 'events' });
    expect(a('PUT', '/apis/ipvs-operator.io/v1alpha1/ipvsnodestates/n1/status')).toEqual({ verb: 'update', group: 'ipvs-operator.io', resource: 'ipvsnodestates/status', name: 'n1' });
    expect(a('PATCH', '/apis/discovery.k8s.io/v1/namespaces/a/endpointslices/s')).toEqual({ verb: 'patch', group: 'discovery.k8s.io', resource: 'endpointslices', name: 's' });
    expect(a('GET', '/apis/ipvs-operator.io/v1alpha1/ipvsnodestates/n1')).toEqual({ verb: 'get', group: 'ipvs-operator.io', resource: 'ipvsnodestates', name: 'n1' });
  });
});

describe('the ClusterRole is bound to the DaemonSet\'s service account', () => {
  it('ClusterRoleBinding -> ClusterRole ipvs-operator, subject the ServiceAccount the DaemonSet runs as', () => {
    const binding = parse(readFileSync('manifests/clusterrolebinding.yaml', 'utf8'));
    const sa = parse(readFileSync('manifests/serviceaccount.yaml', 'utf8'));
    const ds = parse(readFileSync('manifests/daemonset.yaml', 'utf8'));
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: (role as unknown as { metadata: { name: string } }).metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
    expect(ds.spec.template.spec.serviceAccountName).toBe(sa.metadata.name);
    expect(ds.metadata.namespace).toBe(sa.metadata.namespace);
  });
});
