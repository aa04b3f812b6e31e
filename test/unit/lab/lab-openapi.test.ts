// The lab API server's OpenAPI documents (lab/cluster/openapi.ts): the committed definitions
// are what openapi-gen.ts makes of kubernetes-models today, every served resource has a schema
// with its group-version-kind, the documents have what kubectl looks for, and unknown fields are
// found by path as kube-apiserver names them. kubectl itself reading them: lab-apiserver-kubectl.test.ts.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_CRDS, readCrd } from '../../../src/config/load.js';
import { OUTPUT, generate, render } from '../../../lab/cluster/openapi-gen.js';
import { OpenApiDocuments, buildDefinitions, definitionOf, unknownFields } from '../../../lab/cluster/openapi.js';
import { RESOURCES, type ResourceInfo } from '../../../lab/cluster/store.js';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
const defs = buildDefinitions(PROJECT_CRDS.map((c) => readCrd(c)));

describe('lab OpenAPI definitions', () => {
  it('openapi-builtin.json is what openapi-gen.ts makes from kubernetes-models (regenerate: node dist/lab/cluster/openapi-gen.js)', () => {
    expect(readFileSync(OUTPUT, 'utf8')).toBe(render(generate(join(root, 'node_modules'))));
  });

  it.each((Object.values(RESOURCES) as ResourceInfo[]).map((i) => [`${i.group || 'core'}/${i.version} ${i.kind}`, i] as const))('%s has a schema with its group-version-kind', (_, i) => {
    const name = definitionOf(defs, i.group, i.version, i.kind);
    expect(name).toBeDefined();
    expect(defs[name!]!.properties?.metadata?.$ref).toBe('#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta');
  });

  it('names the real fields: ServiceSpec, EndpointSlice endpoints, the CRD spec', () => {
    const spec = defs['io.k8s.api.core.v1.ServiceSpec']!;
    expect(Object.keys(spec.properties!)).toEqual(expect.arrayContaining(['clusterIP', 'clusterIPs', 'externalTrafficPolicy', 'ports', 'sessionAffinityConfig', 'trafficDistribution']));
    expect(spec.properties!.externalTrafficPolicy).toMatchObject({ type: 'string', enum: ['Cluster', 'Local'] });
    expect(defs['io.k8s.api.core.v1.ServicePort']!.properties!.targetPort).toMatchObject({ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString' });
    expect(defs['io.k8s.apimachinery.pkg.util.intstr.IntOrString']).toMatchObject({ type: 'string', format: 'int-or-string' });
    expect(defs['io.k8s.api.discovery.v1.EndpointSlice']!.required).toEqual(['addressType']); // endpoints: optional since 1.33
    expect(defs['io.ipvs-operator.v1alpha1.IPVSProxyConfig']!.properties!.spec!.properties).toHaveProperty('syncPeriod');
  });
});

describe('lab OpenAPI v3 documents', () => {
  const docs = new OpenApiDocuments(defs);
  const json = (p: string) => JSON.parse(docs.document(p)!) as Record<string, unknown>;

  it('/openapi/v3 lists every served group-version with a hashed URL', () => {
    const paths = json('/openapi/v3').paths as Record<string, { serverRelativeURL: string }>;
    expect(Object.keys(paths).sort()).toEqual(['api/v1', 'apis/apiextensions.k8s.io/v1', 'apis/apps/v1', 'apis/coordination.k8s.io/v1', 'apis/discovery.k8s.io/v1', 'apis/events.k8s.io/v1',
      'apis/ipvs-operator.io/v1alpha1', 'apis/rbac.authorization.k8s.io/v1']);
    expect(paths['api/v1']!.serverRelativeURL).toMatch(/^\/openapi\/v3\/api\/v1\?hash=[0-9A-F]{128}$/);
    expect(docs.document('/openapi/v3/apis/nope/v1')).toBeUndefined();
  });

  it("a group-version's PATCH operations carry the GVK and fieldValidation (what kubectl checks before it sends Strict)", () => {
    const doc = json('/openapi/v3/api/v1') as { paths: Record<string, { patch?: { 'x-kubernetes-group-version-kind': unknown; parameters: Array<{ name: string; in: string }> } }>; components: { schemas: Record<string, unknown> } };
    const patch = doc.paths['/api/v1/namespaces/{namespace}/services/{name}']!.patch!;
    expect(patch['x-kubernetes-group-version-kind']).toEqual({ group: '', version: 'v1', kind: 'Service' });
    expect(patch.parameters).toContainEqual(expect.objectContaining({ name: 'fieldValidation', in: 'query' }));
    expect(doc.paths['/api/v1/nodes/{name}']!.patch).toBeDefined();
    // The schemas each kind needs, and nothing of another group-version's kinds.
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['io.k8s.api.core.v1.Service', 'io.k8s.api.core.v1.PodSpec', 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta']));
    expect(Object.keys(doc.components.schemas)).not.toContain('io.k8s.api.apps.v1.Deployment');
  });
});

describe('unknownFields', () => {
  const service = () => ({
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'x', labels: { a: 'b' }, annotationz: {} },
    spec: { ports: [{ port: 80, targetPort: 'http' }, { port: 81, nodeport: 1 }], selector: { app: 'x' }, typo: true },
  });

  it('names every undeclared field by its path, through $refs, arrays and maps', () => {
    expect(unknownFields(defs, 'io.k8s.api.core.v1.Service', service())).toEqual(['metadata.annotationz', 'spec.ports[1].nodeport', 'spec.typo']);
  });

  it('prunes them when asked, and leaves the rest as it was', () => {
    const s = service();
    unknownFields(defs, 'io.k8s.api.core.v1.Service', s, true);
    expect(s).toEqual({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'x', labels: { a: 'b' } }, spec: { ports: [{ port: 80, targetPort: 'http' }, { port: 81 }], selector: { app: 'x' } } });
  });

  it('accepts anything under preserve-unknown-fields or an untyped schema (a CRD\'s openAPIV3Schema in a CRD)', () => {
    const crd = readCrd('ipvsproxyconfigs');
    expect(unknownFields(defs, definitionOf(defs, 'apiextensions.k8s.io', 'v1', 'CustomResourceDefinition')!, crd)).toEqual([]);
  });
});
