// The lab API server as its own process (apiserver-main.js) over HTTPS with a self-signed
// certificate (openssl), driven by the REAL kubectl (Debian's kubernetes-client, /usr/bin/kubectl)
// as admin, then read by the operator's real KubeSource with the ipvs-operator ServiceAccount's
// token under the RBAC of manifests/. kubectl validates as it does against kube-apiserver: it
// reads the server's OpenAPI v3 documents and sends fieldValidation=Strict. Skipped (and said so)
// where no kubectl is installed.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadKubeClient } from '../../../src/kube/client.js';
import { KubeEventSink } from '../../../src/kube/events.js';
import { KubeSource } from '../../../src/kube/source.js';
import { kubeconfigYaml } from '../../../lab/cluster/apiserver.js';
import { makeSelfSignedCert } from '../../../lab/cluster/tls.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { waitFor } from '../../support/wait.js';
import { deploymentYaml } from '../../support/workloads.js';

const KUBECTL = '/usr/bin/kubectl';
const root = fileURLToPath(new URL('../../../../', import.meta.url));
const SA = 'system:serviceaccount:ipvs-operator:ipvs-operator';
let dir: string;
let proc: ChildProcess;
let url: string;

/** Runs kubectl as `who`; resolves with its exit code and output (never rejects). */
function kubectl(who: 'admin' | 'op', ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(KUBECTL, ['--cache-dir', join(dir, 'cache'), ...args], { env: { ...process.env, KUBECONFIG: join(dir, `${who}.kubeconfig`), HOME: dir }, cwd: root },
      (e, out, err) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out, err }));
  });
}

const d = existsSync(KUBECTL) ? describe : describe.skip;

d('lab API server process with the real kubectl and the operator source', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lab-apiserver-'));
    makeSelfSignedCert(dir, { ips: ['127.0.0.1'], dns: ['localhost'] }, 1);
    writeFileSync(join(dir, 'tokens.csv'), `admin-token,admin,1,"system:masters"\nop-token,${SA},2\n`);
    proc = spawn(process.execPath, [join(root, 'dist/lab/cluster/apiserver-main.js'), '--listen', '127.0.0.1:0',
      '--cert', join(dir, 'cert.pem'), '--key', join(dir, 'key.pem'), '--tokens', join(dir, 'tokens.csv'),
      '--rbac', join(root, 'manifests/clusterrole.yaml'), '--rbac', join(root, 'manifests/clusterrolebinding.yaml'),
      '--service-cidr', '10.200.1.0/24', '--node-port-range', '30000-30002'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const ready = await new Promise<{ ready: boolean; url: string }>((resolve, reject) => {
      let buf = '';
      proc.stdout!.on('data', (c: Buffer) => {
        buf += c.toString();
        if (buf.includes('\n')) resolve(JSON.parse(buf.split('\n')[0]!) as { ready: boolean; url: string });
      });
      proc.on('exit', (code) => reject(new Error(`apiserver exited ${code}`)));
    });
    expect(ready.ready).toBe(true);
    url = ready.url;
    for (const [who, token] of [['admin', 'admin-token'], ['op', 'op-token']]) {
      writeFileSync(join(dir, `${who}.kubeconfig`), kubeconfigYaml(url, token!, join(dir, 'cert.pem')));
    }
  });

  afterAll(() => {
    if (proc.exitCode === null) proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves HTTPS with a verified certificate; kubectl lists a new cluster: the kubernetes Service alone', async () => {
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const r = await kubectl('admin', 'get', 'nodes,pods,svc', '-o', 'wide');
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out.trim().split('\n').slice(1).map((l) => l.split(/\s+/).slice(0, 5).join(' '))).toEqual(['service/kubernetes ClusterIP 10.200.1.1 <none> 443/TCP']);
    expect((await kubectl('admin', 'get', 'namespaces', '-o', 'name')).out.split('\n')).toEqual(expect.arrayContaining(['namespace/default', 'namespace/kube-system']));
  });

  it('kubectl apply of examples/, create of a node and a pod; get -o wide shows allocated ClusterIPs and pod IPs', async () => {
    const a = await kubectl('admin', 'apply', '-f', 'examples/services-schedulers.yaml');
    expect(a).toMatchObject({ code: 0 });
    expect(a.out).toContain('service/webpod-rr created');
    const lab = `apiVersion: v1
kind: Node
metadata: {name: worker1, labels: {topology.kubernetes.io/zone: z1}}
status: {addresses: [{type: InternalIP, address: 192.168.10.101}], conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: webpod-1, namespace: default, labels: {app: webpod}}
spec: {nodeName: worker1, containers: [{name: whoami, image: whoami, ports: [{name: web, containerPort: 80}]}]}
status: {phase: Running, podIP: 10.10.1.3, podIPs: [{ip: 10.10.1.3}], conditions: [{type: Ready, status: "True"}]}
`;
    writeFileSync(join(dir, 'lab.yaml'), lab);
    expect(await kubectl('admin', 'create', '-f', join(dir, 'lab.yaml'))).toMatchObject({ code: 0 });
    const g = await kubectl('admin', 'get', 'nodes,pods,svc', '-o', 'wide');
    expect(g.code).toBe(0);
    expect(g.out).toMatch(/node\/worker1\s+Ready\s+<none>\s+\S+\s+192\.168\.10\.101/);
    expect(g.out).toMatch(/pod\/webpod-1\s+1\/1\s+Running\s+0\s+\S+\s+10\.10\.1\.3\s+worker1/);
    expect(g.out).toMatch(/service\/webpod-rr\s+ClusterIP\s+10\.200\.1\.\d+\s+<none>\s+9000\/TCP\s+\S+\s+app=webpod/);
    const s = await kubectl('admin', 'get', 'endpointslices', '-l', 'kubernetes.io/service-name=webpod-rr', '-o', 'jsonpath={.items[0].endpoints[0].addresses[0]} {.items[0].ports[0].port}');
    expect(s.out).toBe('10.10.1.3 80');
  });

  it('kubectl explain reads the OpenAPI documents: built-in kinds and the CRDs, field by field', async () => {
    const svc = await kubectl('admin', 'explain', 'service.spec');
    expect(svc).toMatchObject({ code: 0, err: '' });
    expect(svc.out).toMatch(/KIND:\s+Service\nVERSION:\s+v1/);
    expect(svc.out).toMatch(/FIELD: spec <ServiceSpec>/);
    expect(svc.out).toMatch(/externalTrafficPolicy\t<string>\n\s+enum: Cluster, Local/);
    const port = await kubectl('admin', 'explain', 'endpointslices.endpoints.conditions.ready');
    expect(port.out).toMatch(/FIELD: ready <boolean>/);
    const cfg = await kubectl('admin', 'explain', 'ipvsproxyconfig.spec.syncPeriod');
    expect(cfg).toMatchObject({ code: 0, err: '' });
    expect(cfg.out).toMatch(/GROUP:\s+ipvs-operator.io\nKIND:\s+IPVSProxyConfig\nVERSION:\s+v1alpha1/);
    expect((await kubectl('admin', 'explain', 'service.spec.noSuchField')).err).toContain('field "noSuchField" does not exist');
  });

  it('an unknown field is refused as with kube-apiserver (strict), warned about and dropped with --validate=warn, kept out of the store', async () => {
    const bad = `apiVersion: v1
kind: Service
metadata: {name: typo, namespace: default}
spec: {selector: {app: webpod}, ports: [{port: 80, targetPrt: 8080}], clusterIp: 10.200.1.50}
`;
    writeFileSync(join(dir, 'typo.yaml'), bad);
    for (const verb of ['apply', 'create']) {
      const r = await kubectl('admin', verb, '-f', join(dir, 'typo.yaml'));
      expect(r.code).toBe(1);
      expect(r.err).toContain('Service in version "v1" cannot be handled as a Service: strict decoding error: unknown field "spec.clusterIp", unknown field "spec.ports[0].targetPrt"');
    }
    expect((await kubectl('admin', 'get', 'svc', 'typo')).err).toContain('not found');
    const warned = await kubectl('admin', 'create', '--validate=warn', '-f', join(dir, 'typo.yaml'));
    expect(warned).toMatchObject({ code: 0, out: 'service/typo created\n' });
    expect(warned.err).toBe('Warning: unknown field "spec.clusterIp"\nWarning: unknown field "spec.ports[0].targetPrt"\n');
    expect((await kubectl('admin', 'get', 'svc', 'typo', '-o', 'jsonpath={.spec.ports[0]}')).out).toBe('{"port":80,"protocol":"TCP","targetPort":80}');
    // A CRD's object against the CRD's own schema; metadata is checked as ObjectMeta.
    writeFileSync(join(dir, 'cfg.yaml'), 'apiVersion: ipvs-operator.io/v1alpha1\nkind: IPVSProxyConfig\nmetadata: {name: default, labelz: {a: b}}\nspec: {syncPeriod: 30, sincPeriod: 3}\n');
    const cfg = await kubectl('admin', 'apply', '-f', join(dir, 'cfg.yaml'));
    expect(cfg.err).toContain('strict decoding error: unknown field "metadata.labelz", unknown field "spec.sincPeriod"');
    expect(await kubectl('admin', 'delete', 'svc', 'typo')).toMatchObject({ code: 0 });
  });

  it('kubectl annotate, label, apply again (a changed port), describe, get events', async () => {
    expect(await kubectl('admin', 'annotate', 'svc', 'webpod-lc', 'ipvs-operator.io/scheduler=sed', '--overwrite')).toMatchObject({ code: 0 });
    expect(await kubectl('admin', 'label', 'svc', 'webpod-lc', 'team=blue')).toMatchObject({ code: 0 });
    const j = await kubectl('admin', 'get', 'svc', 'webpod-lc', '-o', 'json');
    const lc = JSON.parse(j.out) as { metadata: { uid: string; annotations: Record<string, string>; labels: Record<string, string> }; spec: { clusterIP: string } };
    expect(lc.metadata.annotations['ipvs-operator.io/scheduler']).toBe('sed');
    expect(lc.metadata.labels.team).toBe('blue');
    const changed = readFileSync(join(root, 'examples/services-schedulers.yaml'), 'utf8').replace(/port: 9000/g, 'port: 9001');
    writeFileSync(join(dir, 'changed.yaml'), changed);
    expect((await kubectl('admin', 'apply', '-f', join(dir, 'changed.yaml'))).out).toContain('service/webpod-lc configured');
    const after = JSON.parse((await kubectl('admin', 'get', 'svc', 'webpod-lc', '-o', 'json')).out) as typeof lc & { spec: { ports: Array<{ port: number }> } };
    expect(after.spec.clusterIP).toBe(lc.spec.clusterIP);
    expect(after.spec.ports.map((p) => p.port)).toEqual([9001]);
    // A Warning Event as the operator posts it (its role may create events), shown by get events and describe.
    const ev = { apiVersion: 'v1', kind: 'Event', metadata: { name: 'webpod-lc.1', namespace: 'default' }, type: 'Warning', reason: 'InvalidAnnotation',
      message: 'ipvs-operator.io/scheduler: unknown scheduler', involvedObject: { apiVersion: 'v1', kind: 'Service', namespace: 'default', name: 'webpod-lc', uid: lc.metadata.uid },
      source: { component: 'ipvs-operator' }, firstTimestamp: new Date().toISOString(), lastTimestamp: new Date().toISOString(), count: 1 };
    writeFileSync(join(dir, 'event.json'), JSON.stringify(ev));
    expect(await kubectl('op', 'create', '-f', join(dir, 'event.json'))).toMatchObject({ code: 0 });
    expect((await kubectl('admin', 'get', 'events')).out).toMatch(/Warning\s+InvalidAnnotation\s+service\/webpod-lc\s+ipvs-operator.io\/scheduler: unknown scheduler/);
    const desc = await kubectl('admin', 'describe', 'service', 'webpod-lc');
    expect(desc.code).toBe(0);
    expect(desc.out).toMatch(/IP:\s+10\.200\.1\.\d+/);
    expect(desc.out).toMatch(/Endpoints:\s+10\.10\.1\.3:80/);
    expect(desc.out).toMatch(/Warning\s+InvalidAnnotation/);
  });

  it('kubectl patch of spec.type: NodePort -> ClusterIP releases the node port, LoadBalancer with eTP Local gets a healthCheckNodePort, Cluster drops it', async () => {
    const get = async (name: string, path: string) => (await kubectl('admin', 'get', 'svc', name, '-o', `jsonpath=${path}`)).out;
    const patch = (name: string, spec: object) => kubectl('admin', 'patch', 'svc', name, '-p', JSON.stringify({ spec }));
    // (kubectl create service sends protobuf, which the lab API server does not decode: files.)
    const nodePortService = (name: string, nodePort?: number) => {
      const f = join(dir, `${name}.json`);
      writeFileSync(f, JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' },
        spec: { type: 'NodePort', selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080, ...(nodePort ? { nodePort } : {}) }] } }));
      return kubectl('admin', 'create', '-f', f);
    };
    expect(await nodePortService('tt')).toMatchObject({ code: 0, err: '' });
    const first = Number(await get('tt', '{.spec.ports[0].nodePort}'));
    expect(first).toBeGreaterThanOrEqual(30000);
    expect(await patch('tt', { type: 'ClusterIP' })).toMatchObject({ code: 0 });
    expect(await get('tt', '{.spec.type} {.spec.ports[0].nodePort} {.spec.externalTrafficPolicy}')).toBe('ClusterIP  ');
    // Released: another Service can ask for it.
    expect(await nodePortService('tt2', first)).toMatchObject({ code: 0, err: '' });
    expect(await patch('tt', { type: 'LoadBalancer', externalTrafficPolicy: 'Local' })).toMatchObject({ code: 0 });
    const [np, hc] = (await get('tt', '{.spec.ports[0].nodePort} {.spec.healthCheckNodePort}')).split(' ').map(Number);
    expect(new Set([first, np, hc]).size).toBe(3);
    expect(await patch('tt', { externalTrafficPolicy: 'Cluster' })).toMatchObject({ code: 0 });
    expect(await get('tt', '{.spec.type} {.spec.ports[0].nodePort} {.spec.healthCheckNodePort}')).toBe(`LoadBalancer ${np} `);
    // A node port changed on the way to ClusterIP is refused as kube-apiserver refuses it.
    const bad = await kubectl('admin', 'patch', 'svc', 'tt2', '--type=json', '-p', JSON.stringify([{ op: 'replace', path: '/spec/type', value: 'ClusterIP' }, { op: 'replace', path: '/spec/ports/0/nodePort', value: hc }]));
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('spec.ports[0].nodePort: Forbidden');
    expect(await kubectl('admin', 'delete', 'svc', 'tt', 'tt2')).toMatchObject({ code: 0 });
  });

  it("each node's Event appears once: two nodes' operators report the same problem over three syncs", async () => {
    const kc = await loadKubeClient(join(dir, 'op.kubeconfig'));
    const uid = (await kubectl('admin', 'get', 'svc', 'webpod-rr', '-o', 'jsonpath={.metadata.uid}')).out;
    const problem = { service: 'default/webpod-rr', reason: 'UnknownScheduler', message: 'ipvs-operator.io/scheduler: unknown scheduler "nope"' };
    const refs = new Map([['default/webpod-rr', { namespace: 'default', name: 'webpod-rr', uid }]]);
    for (const node of ['worker1', 'worker2']) {
      const sink = new KubeEventSink({ client: kc, nodeName: node });
      for (let sync = 0; sync < 3; sync++) await sink.report([problem], refs);
    }
    const hosts = async (...args: string[]) => (await kubectl('admin', 'get', ...args, '--field-selector', 'reason=UnknownScheduler', '-o', 'jsonpath={.items[*].source.host}')).out.split(' ').sort();
    expect(await hosts('events')).toEqual(['worker1', 'worker2']);
    expect(await hosts('events', '-A')).toEqual(['worker1', 'worker2']);
    const desc = await kubectl('admin', 'describe', 'svc', 'webpod-rr');
    expect(desc.out.match(/Warning\s+UnknownScheduler/g)).toHaveLength(2);
  });

  it('the operator token: list/watch allowed, the rest 403 through kubectl', async () => {
    expect(await kubectl('op', 'get', 'svc', '-A')).toMatchObject({ code: 0 });
    expect((await kubectl('op', 'get', 'pods')).err).toContain(`pods is forbidden: User "${SA}" cannot list resource "pods"`);
    expect((await kubectl('op', 'delete', 'svc', 'webpod-sh')).err).toContain('cannot delete resource "services"');
    expect((await kubectl('op', 'get', 'ipvsproxyconfigs')).err).toContain('forbidden');
  });

  it("the operator's KubeSource with the ServiceAccount token sees kubectl's Services with ClusterIPs and the controller's slices", async () => {
    // The kubeconfig kubectl uses (TLS with its CA file, the ServiceAccount's token), read by the operator's own loader.
    const kc = await loadKubeClient(join(dir, 'op.kubeconfig'));
    const events: SourceEvent[] = [];
    const source = new KubeSource({ client: kc, nodeName: 'worker1', backoff: { initialMs: 20, maxMs: 200, jitter: 0 } });
    try {
      await source.start((e) => events.push(e));
      const named = (kind: string, type: string, name: string) => events.filter((e) => e.kind === kind && e.type === type && e.kind !== 'config' && e.object.metadata?.name === name);
      await waitFor(() => named('service', 'upsert', 'webpod-rr').length > 0, 'the Service webpod-rr', 10_000);
      const svc = named('service', 'upsert', 'webpod-rr')[0] as { object: { spec: { clusterIP: string } } };
      expect(svc.object.spec.clusterIP).toMatch(/^10\.200\.1\.\d+$/);
      await waitFor(() => named('endpointslice', 'upsert', 'webpod-rr-ipv4').length > 0, 'the slice webpod-rr-ipv4', 10_000);
      const slice = (named('endpointslice', 'upsert', 'webpod-rr-ipv4').at(-1) as { object: { endpoints: Array<{ addresses: string[] }> } }).object;
      expect(slice.endpoints[0]!.addresses).toEqual(['10.10.1.3']);
      // A Service deleted with kubectl goes away for the operator too.
      expect(await kubectl('admin', 'delete', 'svc', 'webpod-sh')).toMatchObject({ code: 0 });
      await waitFor(() => named('service', 'delete', 'webpod-sh').length > 0, 'the delete of webpod-sh', 10_000);
    } finally {
      await source.stop();
    }
  });

  it('kubectl apply of a Deployment without flags, get deploy,rs,pods, kubectl scale up and down, delete: the controllers follow', async () => {
    writeFileSync(join(dir, 'wl.yaml'), deploymentYaml('wl', 2, '{containers: [{name: web, image: lab/pod, ports: [{containerPort: 80}]}]}'));
    expect(await kubectl('admin', 'apply', '-f', join(dir, 'wl.yaml'))).toMatchObject({ code: 0, out: 'deployment.apps/wl created\n', err: '' });
    /** The pods of app=wl from kubectl: `<name> <node> <terminating: x or ->` each. */
    const pods = async () => (await kubectl('admin', 'get', 'pods', '-l', 'app=wl', '-o',
      'jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.deletionTimestamp}{"\\n"}{end}')).out.trim().split('\n').filter(Boolean)
      .map((l) => l.trim().split(' ')).map(([name, node, del]) => ({ name: name!, node: node!, terminating: !!del }));
    const rs = (await kubectl('admin', 'get', 'rs', '-l', 'app=wl', '-o', 'jsonpath={.items[*].metadata.name}')).out;
    expect(rs).toMatch(/^wl-[bcdfghjklmnpqrstvwxz2456789]+$/);
    const first = await pods();
    expect(first.map((p) => ({ ...p, name: p.name.replace(/-[bcdfghjklmnpqrstvwxz2456789]{5}$/, '-X') })))
      .toEqual([{ name: `${rs}-X`, node: 'worker1', terminating: false }, { name: `${rs}-X`, node: 'worker1', terminating: false }]);
    const scaled = await kubectl('admin', 'scale', 'deployment', 'wl', '--replicas=3');
    expect(scaled).toMatchObject({ code: 0, out: 'deployment.apps/wl scaled\n' });
    expect((await kubectl('admin', 'get', 'deploy', 'wl', '-o', 'jsonpath={.spec.replicas} {.metadata.generation} {.status.observedGeneration}')).out).toBe('3 2 2');
    expect((await pods()).filter((p) => !p.terminating).length).toBe(3);
    // kubectl get's columns, as the real printers have them (no kubelet here: none ready).
    const table = async (what: string) => (await kubectl('admin', 'get', what, '-o', 'wide')).out.trim().split('\n').map((l) => l.split(/\s{2,}/));
    expect((await table('deploy')).map((r) => [...r.slice(0, 4), ...r.slice(5)]))
      .toEqual([['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'CONTAINERS', 'IMAGES', 'SELECTOR'], ['wl', '0/3', '3', '0', 'web', 'lab/pod', 'app=wl']]);
    expect((await table('rs')).map((r) => r.slice(0, 4))).toEqual([['NAME', 'DESIRED', 'CURRENT', 'READY'], [rs, '3', '3', '0']]);
    expect(await kubectl('admin', 'scale', 'deployment', 'wl', '--replicas=1', '--current-replicas=3')).toMatchObject({ code: 0 });
    // Two pods terminating (bound, no kubelet here to finish them), one active.
    const down = await pods();
    expect({ terminating: down.filter((p) => p.terminating).length, active: down.filter((p) => !p.terminating).length }).toEqual({ terminating: 2, active: 1 });
    expect(await kubectl('admin', 'delete', 'deployment', 'wl')).toMatchObject({ code: 0 });
    expect((await kubectl('admin', 'get', 'deploy,rs', '-l', 'app=wl', '-o', 'name')).out).toBe('');
    expect((await pods()).map((p) => p.terminating)).toEqual([true, true, true]);
  });

  it('exits 0 on SIGTERM', async () => {
    const code = await new Promise<number | null>((resolve) => {
      proc.on('exit', (c) => resolve(c));
      proc.kill('SIGTERM');
    });
    expect(code).toBe(0);
  });
});
