// What the files source keeps of a file (src/source/file-entries.ts): the objects as sent
// (Services and EndpointSlices trimmed as the kube source keeps them, the Node and the config
// whole), compared by what is kept of them, and the entries of documents whose text did not change
// reused.
// Addresses: VIPs 10.200.1.0/24, pods 10.10.0.0/16, nodes 192.168.0.0/24.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { describe, expect, it } from '@jest/globals';
import { docObjects, parseEntries, sameContent } from '../../../src/source/file-entries.js';

const service = (name: string, ip: string, comment = '') => `apiVersion: v1
kind: Service${comment}
metadata:
  name: ${name}
  namespace: ns1
  resourceVersion: "4711"
  managedFields: [{manager: kubectl, operation: Update}]
  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{"big": "json"}', ipvs-operator.io/scheduler: wrr}
spec: {clusterIP: ${ip}, ports: [{port: 80, protocol: TCP}]}
status: {conditions: [{type: x, status: "True"}]}
`;
const slice = (name: string) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${name}, namespace: ns1, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
ports: [{port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.10.0.1], conditions: {ready: true}, targetRef: {kind: Pod, name: p1, namespace: ns1, uid: u1}}
- {addresses: [10.10.0.2], conditions: {ready: true}, targetRef: {kind: Pod, name: p2, namespace: ns1, uid: u2}}
`;
const node = 'apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.10}]}\n';

const objects = (r: ReturnType<typeof parseEntries>) => r.docs.flatMap(docObjects);

describe('parseEntries', () => {
  it('keeps Services and EndpointSlices as the kube source does, the Node whole', () => {
    const r = parseEntries(`${service('a', '10.200.1.1')}---\n${slice('a-1')}---\n${node}`, undefined);
    expect(r.errors).toEqual([]);
    const [svc, sl, n] = objects(r) as any[];
    expect(svc.key).toBe('Service/ns1/a');
    expect(svc.object).toEqual({
      metadata: { name: 'a', namespace: 'ns1', resourceVersion: '4711', annotations: { 'ipvs-operator.io/scheduler': 'wrr' } },
      spec: { clusterIP: '10.200.1.1', ports: [{ port: 80, protocol: 'TCP' }] },
    });
    expect(sl.object.endpoints.map((e: any) => e.targetRef)).toEqual([{ kind: 'Pod', name: 'p1' }, { kind: 'Pod', name: 'p2' }]);
    expect(sl.object.endpoints[0].conditions).toBe(sl.object.endpoints[1].conditions);
    expect(n.object).toEqual({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } });
  });

  it('tells objects apart by what is kept of them: a comment, a dropped field or a resourceVersion changes nothing', () => {
    const [a] = objects(parseEntries(service('a', '10.200.1.1'), undefined));
    const [commented] = objects(parseEntries(service('a', '10.200.1.1', ' # edited'), undefined));
    const [status] = objects(parseEntries(service('a', '10.200.1.1').replace('type: x', 'type: y'), undefined));
    const [moved] = objects(parseEntries(service('a', '10.200.1.2'), undefined));
    expect(sameContent(commented!.object, a!.object)).toBe(true);
    expect(sameContent(status!.object, a!.object)).toBe(true);
    const sent = { ...a!.object, metadata: { ...(a!.object.metadata as object), resourceVersion: 'files-7' } };
    expect(sameContent(sent, a!.object)).toBe(true);
    expect(sameContent(moved!.object, a!.object)).toBe(false);
    expect(Object.keys(a!).sort()).toEqual(['digest', 'key', 'kind', 'object']);
  });

  it('reuses the entries of documents whose text did not change', () => {
    const first = parseEntries(`${service('a', '10.200.1.1')}---\n${slice('a-1')}`, undefined);
    const second = parseEntries(`${service('a', '10.200.1.1')}---\n${slice('a-2')}`, first.docs);
    expect(second.docs[0]).toBe(first.docs[0]);
    expect(second.docs[1]).not.toBe(first.docs[1]);
    expect(objects(second).map((e) => e.key)).toEqual(['Service/ns1/a', 'EndpointSlice/ns1/a-2']);
  });

  it('keeps a document of one object as that object\'s entry, others with their list, and reuses both', () => {
    const list = `apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: b, namespace: ns1}}\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n`;
    const first = parseEntries(`${service('a', '10.200.1.1')}---\n${list}`, undefined);
    const [one, many] = first.docs as any[];
    expect(one).toBe(objects(first)[0]);
    expect(one.digest).not.toBe('');
    expect(many.objects.map((e: any) => e.key)).toEqual(['Service/ns1/b']);
    expect(many.skipped).toEqual(['Pod/p']);
    const second = parseEntries(`${service('a', '10.200.1.1')}---\n${list}---\n${slice('a-1')}`, first.docs);
    expect(second.docs[0]).toBe(one);
    expect(second.docs[1]).toBe(many);
    expect(second.skipped).toEqual(['Pod/p']);
    expect(objects(second).map((e) => e.key)).toEqual(['Service/ns1/a', 'Service/ns1/b', 'EndpointSlice/ns1/a-1']);
  });

  it('parses a file with directives whole, and reuses none of it by document', () => {
    const text = `%YAML 1.2\n---\n${service('a', '10.200.1.1')}`;
    const first = parseEntries(text, undefined);
    expect(first.docs.map((d) => d.digest)).toEqual(['']);
    const second = parseEntries(text, first.docs);
    expect(second.docs[0]).not.toBe(first.docs[0]);
    expect(objects(second)[0]!.object).toEqual(objects(first)[0]!.object);
  });

  it('an error anywhere leaves no entries, and names the document as numbered in the file', () => {
    const first = parseEntries(service('a', '10.200.1.1'), undefined);
    const r = parseEntries(`${service('a', '10.200.1.1')}---\nkind: Service\nmetadata: {name: [x]}\n`, first.docs);
    expect(r.docs).toEqual([]);
    expect(r.errors).toEqual(['document 2: Service without metadata.name']);
  });

  it('lists skipped kinds, for the debug log', () => {
    const r = parseEntries(`${service('a', '10.200.1.1')}---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n`, undefined);
    expect(r.skipped).toEqual(['Pod/p']);
    expect(objects(r).map((e) => e.key)).toEqual(['Service/ns1/a']);
  });
});
