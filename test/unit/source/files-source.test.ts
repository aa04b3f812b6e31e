// FilesSource against a real temporary directory: parsing as kubectl writes YAML, change detection
// through fs.watch, malformed files and invalid configs reported while the last good objects stay.
// Addresses: VIPs 10.200.1.0/24, pods 10.10.0.0/16, nodes 192.168.0.0/24.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { mkdtemp, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Problem } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FilesSource } from '../../../src/source/files.js';
import { LogEventSink } from '../../../src/source/log-events.js';
import type { LogLevel } from '../../../src/util/log.js';
import { parseManifests, splitDocuments } from '../../../src/source/manifests.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { waitFor } from '../../support/wait.js';

const service = (name: string, ip: string, extra = '') => `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: ns1
  resourceVersion: "4711"
spec:
  clusterIP: ${ip}
  ports:
  - port: 80
    protocol: TCP
    targetPort: 8080${extra}
`;
const slice = (name: string, svc: string, ip: string) => `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${name}
  namespace: ns1
  labels: {kubernetes.io/service-name: ${svc}}
addressType: IPv4
endpoints:
- addresses: [${ip}]
ports:
- port: 8080
  protocol: TCP
`;
const node = (name: string) => `apiVersion: v1
kind: Node
metadata: {name: ${name}}
status:
  addresses: [{type: InternalIP, address: 192.168.0.10}]
`;
const config = (spec: string) => `apiVersion: ipvs-operator.io/v1alpha1
kind: IPVSProxyConfig
metadata: {name: default}
spec: ${spec}
`;

/** One line per event: `upsert service ns1/svc1`, `upsert config lc`. */
function describeEvent(e: SourceEvent): string {
  if (e.kind === 'config') return `${e.type} config ${e.config.defaultScheduler}`;
  const m = e.object.metadata!;
  return `${e.type} ${e.kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`;
}

let dir: string;
let events: SourceEvent[];
let problems: readonly Problem[];
let source: FilesSource | undefined;
const lines = () => events.map(describeEvent);

async function startSource(): Promise<FilesSource> {
  source = new FilesSource({ dir, nodeName: 'node-a', debounceMs: 20, onProblems: (p) => { problems = p; } });
  await source.start((e) => events.push(e));
  return source;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'files-source-'));
  events = [];
  problems = [];
});
afterEach(async () => {
  await source?.stop();
  source = undefined;
  await rm(dir, { recursive: true, force: true });
});

describe('parseManifests', () => {
  it('reads multi-document files and kind: List items, skips other kinds and empty documents', () => {
    const list = `apiVersion: v1
kind: List
items:
- ${service('a', '10.200.1.1').trimEnd().replace(/\n/g, '\n  ')}
- {apiVersion: v1, kind: Pod, metadata: {name: p}}
`;
    const r = parseManifests(`${list}---\n---\n${slice('a-1', 'a', '10.10.1.1')}---\n${node('node-a')}`);
    expect(r.errors).toEqual([]);
    expect(r.manifests.map((m) => m.key)).toEqual(['Service/ns1/a', 'EndpointSlice/ns1/a-1', 'Node//node-a']);
    expect(r.skipped).toEqual(['Pod/p']);
  });

  it('puts objects without a namespace in "default", as kubectl apply does', () => {
    expect(parseManifests('kind: Service\nmetadata: {name: x}\n').manifests[0]!.key).toBe('Service/default/x');
  });

  it.each([
    ['a YAML syntax error', 'kind: Service\nmetadata: {name: [x\n', 'document 1:'],
    ['a scalar document', 'just text\n', 'document 1: not a Kubernetes object'],
    ['no kind', 'metadata: {name: x}\n', 'document 1: no kind'],
    ['no name', 'kind: Service\nmetadata: {}\n', 'document 1: Service without metadata.name'],
    ['an old EndpointSlice apiVersion', 'apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: x}\n',
      'EndpointSlice x: apiVersion "discovery.k8s.io/v1beta1" is not read (use discovery.k8s.io/v1)'],
    ['a bad List item', 'kind: List\nitems: [{kind: Service, metadata: {name: a}}, 7]\n', 'document 1 item 2: not a Kubernetes object'],
  ])('makes a file with %s malformed as a whole', (_name, text, message) => {
    const r = parseManifests(`kind: Service\nmetadata: {name: fine}\n---\n${text}`);
    expect(r.manifests).toEqual([]);
    expect(r.errors.join('\n')).toContain(message.replace('document 1', 'document 2'));
  });
});

describe('FilesSource', () => {
  it('sends every object of the directory before start resolves; only this node\'s Node', async () => {
    await writeFile(join(dir, 'svc.yaml'), `${service('svc1', '10.200.1.10')}---\n${slice('svc1-a', 'svc1', '10.10.1.1')}`);
    await writeFile(join(dir, 'nodes.yml'), `${node('node-a')}---\n${node('node-b')}`);
    await writeFile(join(dir, 'config.yaml'), config('{defaultScheduler: lc}'));
    await writeFile(join(dir, 'notes.txt'), 'not yaml: [');
    const s = await startSource();
    expect(lines()).toEqual(['upsert config lc', 'upsert node node-a', 'upsert service ns1/svc1', 'upsert endpointslice ns1/svc1-a']);
    expect(events[0]).toEqual({ kind: 'config', type: 'upsert', config: { ...defaultProxyConfig, defaultScheduler: 'lc' } });
    expect(s.healthy()).toBe(true);
    expect(problems).toEqual([]);
  });

  it('rejects start when the directory cannot be read', async () => {
    const s = new FilesSource({ dir: join(dir, 'missing'), nodeName: 'node-a' });
    await expect(s.start(() => undefined)).rejects.toThrow(/cannot read manifest directory/);
    expect(s.healthy()).toBe(false);
  });

  it('sees edits, new files and removals through fs.watch, and sends only what changed', async () => {
    await writeFile(join(dir, 'a.yaml'), `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11')}`);
    await startSource();
    events = [];
    // Edit svc2 only (same kubectl resourceVersion: the source's own must change), add a slice file.
    await writeFile(join(dir, 'a.yaml'), `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11', '\n  - port: 81')}`);
    await writeFile(join(dir, 'b.yaml'), slice('svc1-a', 'svc1', '10.10.1.1'));
    await waitFor(() => events.length >= 2, 'the edit and the new file');
    expect(lines().sort()).toEqual(['upsert endpointslice ns1/svc1-a', 'upsert service ns1/svc2']);
    const edited = events.find((e) => e.kind === 'service')!;
    expect(edited.kind === 'service' && edited.object.metadata?.resourceVersion).toMatch(/^files-\d+$/);
    events = [];
    await unlink(join(dir, 'b.yaml'));
    await waitFor(() => events.length >= 1, 'the removal');
    expect(lines()).toEqual(['delete endpointslice ns1/svc1-a']);
    // An editor's atomic save: write elsewhere, rename over.
    events = [];
    await writeFile(join(dir, '.a.yaml.swp'), service('svc1', '10.200.1.10'));
    await rename(join(dir, '.a.yaml.swp'), join(dir, 'a.yaml'));
    await waitFor(() => events.length >= 1, 'the rename');
    expect(lines()).toEqual(['delete service ns1/svc2']);
  });

  it('reports a malformed file and keeps its last good objects; recovers when it is fixed', async () => {
    await writeFile(join(dir, 'a.yaml'), `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11')}`);
    const s = await startSource();
    events = [];
    await writeFile(join(dir, 'a.yaml'), `${service('svc1', '10.200.1.10')}---\nkind: Service\nmetadata: {name: [oops\n`);
    await waitFor(() => problems.length > 0, 'the problem');
    expect(problems).toEqual([{ service: '', reason: 'InvalidManifestFile', message: expect.stringMatching(/^a\.yaml: document 2: .*\(keeping its last good objects\)$/) }]);
    expect(events).toEqual([]);
    expect(s.healthy()).toBe(true);
    await writeFile(join(dir, 'a.yaml'), service('svc1', '10.200.1.10'));
    await waitFor(() => events.length > 0, 'the fix');
    expect(lines()).toEqual(['delete service ns1/svc2']);
    expect(problems).toEqual([]);
  });

  it('keeps the last valid config when a new one is invalid, and sends defaults when it is removed', async () => {
    await writeFile(join(dir, 'config.yaml'), config('{defaultScheduler: lc}'));
    const s = await startSource();
    events = [];
    await writeFile(join(dir, 'config.yaml'), config('{defaultScheduler: sed, masqueradeBit: 40}'));
    await waitFor(() => problems.length > 0, 'the invalid config problem');
    expect(problems[0]!.reason).toBe('InvalidConfig');
    expect(problems[0]!.message).toContain('spec.masqueradeBit = 40: must be <= 31');
    await s.rescan();
    expect(events).toEqual([]);
    await unlink(join(dir, 'config.yaml'));
    await waitFor(() => events.length > 0, 'the config delete');
    expect(events).toEqual([{ kind: 'config', type: 'delete', config: { ...defaultProxyConfig } }]);
  });

  it('uses the first of two files defining the same object and reports the other', async () => {
    await writeFile(join(dir, 'a.yaml'), service('svc1', '10.200.1.10'));
    await writeFile(join(dir, 'b.yaml'), service('svc1', '10.200.1.99'));
    await startSource();
    expect(events.map((e) => e.kind === 'service' && e.object.spec?.clusterIP)).toEqual(['10.200.1.10']);
    expect(problems.map((p) => p.reason)).toEqual(['DuplicateObject']);
  });

  it('sends nothing after stop', async () => {
    const s = await startSource();
    await s.stop();
    await writeFile(join(dir, 'a.yaml'), service('svc1', '10.200.1.10'));
    await s.rescan();
    expect(events).toEqual([]);
  });
});

describe('LogEventSink', () => {
  it('logs a problem once while it persists and again after it went away and came back', async () => {
    const logged: Array<[LogLevel, string]> = [];
    const sink = new LogEventSink((level, message) => logged.push([level, message]));
    const p = { service: 'ns1/svc1', reason: 'UnknownScheduler', message: 'scheduler "foo" is not known' };
    const q = { service: 'ns1/svc2', reason: 'UnknownScheduler', message: 'scheduler "bar" is not known' };
    for (let i = 0; i < 5; i++) await sink.report([p, q], new Map());
    await sink.report([q], new Map());
    await sink.report([p, q], new Map());
    expect(logged).toEqual([['warn', p.message], ['warn', q.message], ['warn', p.message]]);
  });
});

describe('FilesSource reads only what changed', () => {
  /** A source whose file reads are recorded (by file name). */
  async function startCounting(): Promise<string[]> {
    const reads: string[] = [];
    const { readFile } = await import('node:fs/promises');
    source = new FilesSource({
      dir, nodeName: 'node-a', debounceMs: 20, onProblems: (p) => { problems = p; },
      readFile: (path) => { reads.push(path.slice(dir.length + 1)); return readFile(path, 'utf8'); },
    });
    await source.start((e) => events.push(e));
    return reads;
  }

  it('a file the watcher names is the only one read again, and only its changed object is sent', async () => {
    for (let i = 0; i < 20; i++) await writeFile(join(dir, `svc${i}.yaml`), service(`svc${i}`, `10.200.1.${i + 1}`) + '---\n' + slice(`svc${i}-1`, `svc${i}`, `10.10.1.${i + 1}`));
    const reads = await startCounting();
    expect(reads).toHaveLength(20);
    reads.length = 0;
    events.length = 0;
    await writeFile(join(dir, 'svc7.yaml'), service('svc7', '10.200.1.8') + '---\n' + slice('svc7-1', 'svc7', '10.10.1.99'));
    await waitFor(() => events.length > 0, 'the change');
    expect(lines()).toEqual(['upsert endpointslice ns1/svc7-1']);
    expect(reads).toEqual(['svc7.yaml']);
  });

  it('unchanged bytes send nothing on a full rescan; a removed file deletes its objects; a directory named *.yaml is not a file', async () => {
    await writeFile(join(dir, 'a.yaml'), service('a', '10.200.1.1'));
    await writeFile(join(dir, 'b.yaml'), service('b', '10.200.1.2'));
    await startCounting();
    events.length = 0;
    await source!.rescan();
    expect(lines()).toEqual([]);
    await unlink(join(dir, 'b.yaml'));
    await waitFor(() => events.length > 0, 'the removal');
    expect(lines()).toEqual(['delete service ns1/b']);
    events.length = 0;
    await rm(join(dir, 'a.yaml'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(dir, 'a.yaml'));
    await waitFor(() => events.length > 0, 'a.yaml replaced by a directory');
    expect(lines()).toEqual(['delete service ns1/a']);
    expect(source!.healthy()).toBe(true);
  });

  it("an editor's backup file is not read; a hidden entry (a ConfigMap's ..data swap) reads the whole directory", async () => {
    await writeFile(join(dir, 'a.yaml'), service('a', '10.200.1.1'));
    const reads = await startCounting();
    reads.length = 0;
    await writeFile(join(dir, 'a.yaml~'), service('zz', '10.200.1.9'));
    await writeFile(join(dir, '.hidden'), 'x');
    await waitFor(() => reads.length > 0, 'the full read');
    await source!.rescan(); // after the debounced read: nothing new, nothing sent
    expect(new Set(reads)).toEqual(new Set(['a.yaml']));
    expect(lines()).toEqual(['upsert service ns1/a']);
  });

  it('a file made bad and then restored to its last good bytes clears its problem without sending anything', async () => {
    await writeFile(join(dir, 'a.yaml'), service('a', '10.200.1.1'));
    await startCounting();
    await writeFile(join(dir, 'a.yaml'), 'kind: Service\nmetadata: {name: [x\n');
    await waitFor(() => problems.length === 1, 'the problem');
    expect(problems[0]!.message).toMatch(/^a\.yaml: .*keeping its last good objects/);
    await writeFile(join(dir, 'a.yaml'), service('a', '10.200.1.1'));
    await waitFor(() => problems.length === 0, 'the problem cleared');
    expect(lines()).toEqual(['upsert service ns1/a']);
  });
});

describe('splitDocuments', () => {
  const whole = (t: string) => parseManifests(t);
  const pieces = (t: string) => {
    const parts = splitDocuments(t)!;
    const rs = parts.map((p) => parseManifests(p));
    return { manifests: rs.flatMap((r) => r.manifests), errors: rs.flatMap((r) => r.errors), skipped: rs.flatMap((r) => r.skipped) };
  };

  it.each([
    ['documents with markers', `${service('a', '10.200.1.1')}---\n${slice('a-1', 'a', '10.10.1.1')}---\n${node('node-a')}`],
    ['a leading marker, comments, an empty document and a marker with content', `# head\n---\n${service('a', '10.200.1.1')}---\n---\n--- {apiVersion: v1, kind: Node, metadata: {name: n}}\n`],
    ['a block scalar holding dashes (indented, so not a marker)', `${service('a', '10.200.1.1').replace('metadata:\n', 'metadata:\n  annotations:\n    note: |\n      ---\n      text\n')}---\n${service('b', '10.200.1.2')}`],
    ['a document end marker', `${service('a', '10.200.1.1')}...\n---\n${service('b', '10.200.1.2')}`],
    ['CRLF line ends', `${service('a', '10.200.1.1')}---\n${service('b', '10.200.1.2')}`.replace(/\n/g, '\r\n')],
    ['anchors within each document', `a: &x 1\nkind: Service\nmetadata: {name: s, labels: {v: *x}}\n---\nkind: Service\nmetadata: &m {name: t}\n`],
  ])('parsing the pieces one by one gives what the whole text gives: %s', (_name, text) => {
    expect(whole(text).errors).toEqual([]);
    expect(pieces(text)).toEqual(whole(text));
    expect(splitDocuments(text)!.join('')).toBe(text);
  });

  it('leaves a text with directives whole (undefined)', () => {
    expect(splitDocuments(`%YAML 1.2\n---\n${service('a', '10.200.1.1')}`)).toBeUndefined();
  });
});

describe('FilesSource parses only the documents that changed', () => {
  it('an edited document of a large file is the one sent; the others keep their parsed objects', async () => {
    const docs = Array.from({ length: 50 }, (_, i) => service(`s${i}`, `10.200.1.${i + 1}`));
    await writeFile(join(dir, 'many.yaml'), docs.join('---\n'));
    await startSource();
    events.length = 0;
    docs[17] = service('s17', '10.200.1.18', '\n    name: http');
    await writeFile(join(dir, 'many.yaml'), docs.join('---\n'));
    await waitFor(() => events.length > 0, 'the edit');
    expect(lines()).toEqual(['upsert service ns1/s17']);
    // A bad edit in one document: the file's errors name the file's own document number.
    docs[30] = 'kind: Service\nmetadata: {name: [x\n';
    await writeFile(join(dir, 'many.yaml'), docs.join('---\n'));
    await waitFor(() => problems.length === 1, 'the problem');
    expect(problems[0]!.message).toMatch(/^many\.yaml: document 31: /);
  });
});
