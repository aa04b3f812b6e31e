// Every YAML document of crds/, manifests/ and examples/ against the Kubernetes API schemas
// (kubernetes-models, unknown fields included: test/support/k8s-validate.ts) and our custom
// resources against our CRDs' schemas; the Kustomization files against the tree; the examples'
// scheduler annotations against the plugins' option schemas.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { validateConfig } from '../../../src/config/load.js';
import { handlesService } from '../../../src/desired/service-parse.js';
import { SCHEDULER_ANNOTATION, SCHEDULER_OPTIONS_ANNOTATION } from '../../../src/desired/scheduler.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { type K8sDoc, readDocs, validateDoc, yamlFiles } from '../../support/k8s-validate.js';
import { IMAGE_NODE_FLAGS } from '../../../lab/cluster/cluster.js';

const files = ['crds', 'manifests', 'examples'].flatMap((d) => yamlFiles(d));
const docs = (prefix: string): K8sDoc[] => files.filter((f) => f.startsWith(prefix)).flatMap((f) => readDocs(f));
const ofKind = (list: K8sDoc[], kind: string) => list.filter((d) => d.object.kind === kind);
const kustomization = (path: string) => parse(readFileSync(path, 'utf8')) as {
  apiVersion: string; kind: string; resources?: string[]; patches?: { path: string; target: Record<string, string> }[];
};

describe('YAML documents against the Kubernetes API schemas', () => {
  it('finds the files: both CRDs, every manifest, the examples', () => {
    expect(files).toEqual(expect.arrayContaining(['crds/ipvsproxyconfigs.yaml', 'crds/ipvsnodestates.yaml',
      'manifests/daemonset.yaml', 'manifests/clusterrole.yaml', 'examples/services-schedulers.yaml']));
  });

  it.each(files)('%s: every document is valid', async (file) => {
    const found = readDocs(file);
    expect(found.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const d of found) {
      for (const p of await validateDoc(d.object)) problems.push(`document ${d.index} (${String(d.object.kind)}): ${p}`);
    }
    expect(problems).toEqual([]);
  });

  it('the checker itself rejects what the API server would: wrong types, missing fields, unknown fields, unknown kinds', async () => {
    const ds = structuredClone(readDocs('manifests/daemonset.yaml')[0]!.object) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const c = ds.spec.template.spec.containers[0];
    c.securityContext.readOnlyRootFilesytem = true;
    c.ports[0].containerPort = '10262';
    delete ds.spec.selector;
    const errors = (await validateDoc(ds)).join('\n');
    expect(errors).toMatch(/spec must have required property selector/);
    expect(errors).toMatch(/containerPort must be integer/);
    expect(errors).toMatch(/securityContext\.readOnlyRootFilesytem: unknown field/);
    expect(await validateDoc({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'x' }, spec: { ports: [{ port: 80 }] }, extra: 1 }))
      .toEqual(['extra: unknown field']);
    expect(await validateDoc({ apiVersion: 'example.com/v1', kind: 'Thing' })).toEqual(['no Kubernetes schema for example.com/v1 Thing']);
    expect((await validateDoc({ apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
      spec: { defaultScheduler: 'rr', syncPeriod: -1 } })).join()).toMatch(/syncPeriod/);
  });
});

describe('CRDs', () => {
  const crds = ofKind(docs('crds/'), 'CustomResourceDefinition').map((d) => d.object as any); // eslint-disable-line @typescript-eslint/no-explicit-any

  it('are apiextensions.k8s.io/v1 with a status subresource where status is written, printer columns and short names', () => {
    expect(crds.map((c) => c.metadata.name).sort()).toEqual(['ipvsloadreports.ipvs-operator.io', 'ipvsnodestates.ipvs-operator.io', 'ipvsproxyconfigs.ipvs-operator.io', 'ipvsserviceweights.ipvs-operator.io']);
    for (const c of crds) {
      expect(c.apiVersion).toBe('apiextensions.k8s.io/v1');
      expect(c.spec.names.shortNames.length).toBeGreaterThan(0);
      const [v] = c.spec.versions;
      expect(v.additionalPrinterColumns.length).toBeGreaterThan(0);
      expect(v.schema.openAPIV3Schema.type).toBe('object');
    }
    expect(crds.find((c) => c.spec.names.kind === 'IPVSNodeState').spec.versions[0].subresources).toEqual({ status: {} });
  });

  it('have structural schemas: every property has a type (or says why it has none)', () => {
    const untyped: string[] = [];
    const walk = (s: any, path: string) => { // eslint-disable-line @typescript-eslint/no-explicit-any
      if (!s.type && !s['x-kubernetes-int-or-string'] && !s['x-kubernetes-preserve-unknown-fields']) untyped.push(path);
      for (const [k, p] of Object.entries(s.properties ?? {})) walk(p, `${path}.${k}`);
      if (s.items) walk(s.items, `${path}[]`);
    };
    for (const c of crds) walk(c.spec.versions[0].schema.openAPIV3Schema, c.spec.names.kind);
    expect(untyped).toEqual([]);
  });
});

describe('manifests/', () => {
  it('the default IPVSProxyConfig states exactly the defaults the operator uses', () => {
    const [cfg] = ofKind(docs('manifests/'), 'IPVSProxyConfig');
    const r = validateConfig(cfg!.object);
    expect(r).toEqual({ ok: true, config: defaultProxyConfig });
    expect(Object.keys((cfg!.object as { spec: object }).spec).sort()).toEqual(Object.keys(defaultProxyConfig).filter((k) => k !== 'serviceProxyName').sort());
  });

  it('Kustomization lists every manifest and the CRDs (its name keeps it out of `kubectl apply -f manifests/`)', () => {
    const k = kustomization('manifests/Kustomization');
    expect(k).toMatchObject({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization' });
    expect([...k.resources!].sort()).toEqual(['../crds', ...readdirSync('manifests').filter((f) => f.endsWith('.yaml'))].sort());
    const c = kustomization('crds/Kustomization');
    expect([...c.resources!].sort()).toEqual(readdirSync('crds').filter((f) => f.endsWith('.yaml')).sort());
    // kubectl -f reads .json, .yaml and .yml files of a directory: nothing else may be an object there.
    for (const dir of ['manifests', 'crds']) {
      expect(readdirSync(dir).filter((f) => /^kustomization\.ya?ml$/i.test(f))).toEqual([]);
    }
  });

  it('every namespaced object is in the operator namespace, which the manifests create', () => {
    const all = docs('manifests/');
    const [ns] = ofKind(all, 'Namespace');
    const name = (ns!.object.metadata as { name: string }).name;
    for (const d of all.filter((x) => ['ServiceAccount', 'DaemonSet'].includes(String(x.object.kind)))) {
      expect((d.object.metadata as { namespace?: string }).namespace).toBe(name);
    }
  });
});

describe('how the shipped artifacts start node', () => {
  // Node refuses some flags in NODE_OPTIONS and exits 9 before any code runs (it did with
  // --optimize-for-size in the DaemonSet, which would have crash-looped every node).
  it('every NODE_OPTIONS a manifest or example sets is accepted by node', () => {
    const containers = files.flatMap((f) => readDocs(f)).map((d) => d.object as { spec?: { template?: { spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> } } } })
      .flatMap((o) => o.spec?.template?.spec?.containers ?? []);
    expect(containers.length).toBeGreaterThan(0);
    for (const value of containers.flatMap((c) => c.env ?? []).filter((e) => e.name === 'NODE_OPTIONS').map((e) => e.value ?? '')) {
      const r = spawnSync(process.execPath, ['-e', '0'], { env: { ...process.env, NODE_OPTIONS: value }, encoding: 'utf8' });
      expect({ value, status: r.status, stderr: r.stderr }).toEqual({ value, status: 0, stderr: '' });
    }
  });

  it("the image's ipvs-operator wrapper runs node with the flags the lab nodes use, and node accepts them", () => {
    const line = readFileSync('Dockerfile', 'utf8').split('\n').find((l) => l.includes('> /usr/local/bin/ipvs-operator'))!;
    const flags = /exec node ((?:--\S+ )*)\/app\/dist\/src\/cli\/main\.js/.exec(line)?.[1]?.trim().split(' ').filter(Boolean);
    expect(flags).toEqual(IMAGE_NODE_FLAGS);
    const r = spawnSync(process.execPath, [...IMAGE_NODE_FLAGS, '-e', '0'], { encoding: 'utf8' });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });
});

describe('the coexistence variant (examples/coexist/)', () => {
  const k = kustomization('examples/coexist/Kustomization');
  const merge = (t: any, p: any): any => { // eslint-disable-line @typescript-eslint/no-explicit-any
    if (typeof p !== 'object' || p === null || Array.isArray(p)) return p;
    const out = { ...(typeof t === 'object' && t !== null ? t : {}) };
    for (const [key, v] of Object.entries(p)) out[key] = v === null ? undefined : merge(out[key], v);
    return out;
  };

  it('builds on manifests/ and patches the IPVSProxyConfig "default" to serviceProxyName ipvs-operator, health server off kube-proxy\'s 10256', () => {
    expect(k.resources).toEqual(['../../manifests']);
    expect(k.patches).toHaveLength(1);
    const patch = k.patches![0]!;
    expect(patch.target).toEqual({ group: 'ipvs-operator.io', version: 'v1alpha1', kind: 'IPVSProxyConfig', name: 'default' });
    const patchFile = join('examples/coexist', patch.path);
    expect(existsSync(patchFile)).toBe(true);
    const [base] = ofKind(docs('manifests/'), 'IPVSProxyConfig');
    const patched = merge(base!.object, readDocs(patchFile)[0]!.object);
    const r = validateConfig(patched);
    expect(r).toEqual({ ok: true, config: { ...defaultProxyConfig, serviceProxyName: 'ipvs-operator', healthzBindAddress: '0.0.0.0:10266' } });
  });

  it('the labelled example Services go to the operator only in this variant; the kube-proxy one never', () => {
    const coexist: ProxyConfig = { ...defaultProxyConfig, serviceProxyName: 'ipvs-operator' };
    const services = ofKind(docs('examples/').filter((d) => !d.file.startsWith('examples/lab/')), 'Service')
      .map((d) => ({ ...(d.object as unknown as V1Service), spec: { ...(d.object as unknown as V1Service).spec, clusterIP: '10.200.1.50' } }));
    const names = (cfg: ProxyConfig) => services.filter((s) => handlesService(s, cfg)).map((s) => s.metadata!.name).sort();
    expect(names(coexist)).toEqual(['webpod-affinity', 'webpod-lc', 'webpod-local', 'webpod-rr', 'webpod-sed', 'webpod-sh', 'webpod-wrr']);
    expect(names(defaultProxyConfig)).toEqual(['webpod']);
  });
});

describe('examples/', () => {
  const ex = docs('examples/').filter((d) => !d.file.startsWith('examples/lab/') && !d.file.startsWith('examples/compare/'));
  const services = ofKind(ex, 'Service').map((d) => d.object as unknown as V1Service);
  const registry = new PluginRegistry();

  it('cover rr, lc, sed, wrr with weights, sh with flags, ClientIP affinity and a Local NodePort', () => {
    const sched = (s: V1Service) => s.metadata?.annotations?.[SCHEDULER_ANNOTATION];
    const opts = (s: V1Service) => JSON.parse(s.metadata?.annotations?.[SCHEDULER_OPTIONS_ANNOTATION] ?? '{}') as Record<string, unknown>;
    expect(new Set(services.map(sched))).toEqual(new Set([undefined, 'rr', 'lc', 'sed', 'wrr', 'sh']));
    expect(opts(services.find((s) => sched(s) === 'wrr')!).weights).toBeDefined();
    expect(Object.keys(opts(services.find((s) => sched(s) === 'sh')!))).toEqual(['sh-fallback', 'sh-port']);
    expect(services.some((s) => s.spec?.sessionAffinity === 'ClientIP')).toBe(true);
    expect(services.some((s) => s.spec?.type === 'NodePort' && s.spec.externalTrafficPolicy === 'Local')).toBe(true);
  });

  it("every scheduler annotation names a built-in plugin and its options pass the plugin's schema", () => {
    for (const s of services) {
      const name = s.metadata?.annotations?.[SCHEDULER_ANNOTATION];
      if (!name) continue;
      expect(registry.get(name)?.name).toBe(name);
      const raw = s.metadata?.annotations?.[SCHEDULER_OPTIONS_ANNOTATION] ?? '{}';
      expect([s.metadata?.name, registry.validateOptions(name, JSON.parse(raw))]).toEqual([s.metadata?.name, expect.objectContaining({ ok: true })]);
    }
  });

  it("every Service selects the webpod Deployment's pods and targets a port its container names", () => {
    const [deploy] = ofKind(ex, 'Deployment');
    const template = (deploy!.object as any).spec.template; // eslint-disable-line @typescript-eslint/no-explicit-any
    const portNames = template.spec.containers.flatMap((c: { ports?: { name?: string }[] }) => (c.ports ?? []).map((p) => p.name));
    for (const s of services) {
      for (const [k, v] of Object.entries(s.spec?.selector ?? {})) expect(template.metadata.labels[k]).toBe(v);
      for (const p of s.spec?.ports ?? []) expect(portNames).toContain(p.targetPort);
    }
  });

});
