// The files source's decisions without a directory (src/source/files-parse.ts): what a file's text
// gives, which objects are used, and the events that bring what was sent up to date.
// Addresses: VIPs 10.200.1.0/24, nodes 192.168.0.0/24.
import { describe, expect, it } from '@jest/globals';
import type { Problem } from '../../../src/desired/types.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigGate } from '../../../src/source/config-gate.js';
import {
  type FileEntry, type SentState, diffObjects, isManifestName, parseFile, selectObjects, unreadableFile,
} from '../../../src/source/files-parse.js';
import { docObjects } from '../../../src/source/file-entries.js';
import type { SourceEvent } from '../../../src/source/types.js';

const service = (name: string, ip: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: ns1}\nspec: {clusterIP: ${ip}, ports: [{port: 80}]}\n`;
const node = (name: string) => `apiVersion: v1\nkind: Node\nmetadata: {name: ${name}}\n`;
const config = (name: string, spec: string) => `apiVersion: ipvs-operator.io/v1alpha1\nkind: IPVSProxyConfig\nmetadata: {name: ${name}}\nspec: ${spec}\n`;

/** The file's entry, parsed from `text` (which must parse). */
function entry(text: string): FileEntry {
  const r = parseFile('f.yaml', text, undefined);
  if (!('entry' in r)) throw new Error(`does not parse: ${JSON.stringify(r)}`);
  return r.entry;
}
const line = (e: SourceEvent) => e.kind === 'config' ? `${e.type} config ${e.config.defaultScheduler}`
  : `${e.type} ${e.kind} ${e.object.metadata?.namespace ? `${e.object.metadata.namespace}/` : ''}${e.object.metadata?.name}`;

describe('parseFile', () => {
  it('gives the objects of a new text, the same for the same bytes', () => {
    const r = parseFile('a.yaml', service('svc1', '10.200.1.10'), undefined);
    expect('entry' in r && r.entry.docs.flatMap(docObjects).map((o) => o.key)).toEqual(['Service/ns1/svc1']);
    expect(parseFile('a.yaml', service('svc1', '10.200.1.10'), entry(service('svc1', '10.200.1.10')))).toEqual({ same: true });
  });

  it('takes bytes as their text: the same digest, decoded only when they differ', () => {
    const text = `# é€\n${service('svc1', '10.200.1.10')}`;
    const fromText = entry(text);
    // The same bytes as the text's UTF-8: the same file, nothing parsed again.
    expect(parseFile('a.yaml', Buffer.from(text), fromText)).toEqual({ same: true });
    const r = parseFile('a.yaml', Buffer.from(service('svc2', '10.200.1.11')), fromText);
    expect('entry' in r && r.entry.docs.flatMap(docObjects).map((o) => o.key)).toEqual(['Service/ns1/svc2']);
    // Blank bytes after objects: a problem, as blank text is.
    expect(parseFile('a.yaml', Buffer.from(' \n\t\n'), fromText)).toMatchObject({ problem: { reason: 'EmptyManifestFile' } });
  });

  it('is a problem, never a delete, for an empty file that had objects and for a file that does not parse', () => {
    const last = entry(service('svc1', '10.200.1.10'));
    expect(parseFile('a.yaml', '  \n', last)).toEqual({ problem: { service: '', reason: 'EmptyManifestFile',
      message: 'a.yaml: is empty (keeping its last good objects; delete the file to delete them)' } });
    expect(parseFile('a.yaml', '', undefined)).toMatchObject({ entry: { docs: [] } });
    const bad = parseFile('a.yaml', 'kind: Service\nmetadata: {name: [oops\n', last);
    expect(bad).toEqual({ problem: { service: '', reason: 'InvalidManifestFile', message: expect.stringMatching(/^a\.yaml: .*\(keeping its last good objects\)$/) } });
    expect(unreadableFile('b.yaml', 'EACCES', false)).toEqual({ service: '', reason: 'UnreadableManifestFile', message: 'b.yaml: cannot be read: EACCES' });
  });

  it('reads *.yaml and *.yml names only, not hidden ones', () => {
    expect(['a.yaml', 'b.yml', '.a.yaml', 'a.yaml~', 'notes.txt'].filter(isManifestName)).toEqual(['a.yaml', 'b.yml']);
  });
});

describe('selectObjects', () => {
  it('keeps this Node only, the config "default" only, and the first file of a duplicate', () => {
    const files = new Map<string, FileEntry>([
      ['b.yaml', entry(`${service('svc1', '10.200.1.99')}---\n${config('other', '{}')}`)],
      ['a.yaml', entry(`${service('svc1', '10.200.1.10')}---\n${node('node-a')}---\n${node('node-b')}---\n${config('default', '{}')}`)],
    ]);
    const problems: Problem[] = [];
    const next = selectObjects(files, 'node-a', problems);
    expect([...next].map(([key, s]) => `${key} ${s.file}`)).toEqual(['Service/ns1/svc1 a.yaml', 'Node//node-a a.yaml', 'IPVSProxyConfig//default a.yaml']);
    expect(problems.map((p) => p.message)).toEqual([
      'b.yaml: Service/ns1/svc1 is also in a.yaml; using the one in a.yaml',
      'b.yaml: IPVSProxyConfig other is ignored: only the one named "default" is read']);
  });
});

describe('diffObjects', () => {
  const state = (): SentState => { let v = 0; return { gate: new ConfigGate(validateConfig), sent: new Map(), nextVersion: () => ++v }; };
  const diff = (s: SentState, text: string, problems: Problem[] = []) =>
    diffObjects(selectObjects(new Map([['a.yaml', entry(text)]]), 'node-a', problems), s, problems);

  it('sends the config first, then upserts with the source\'s own resourceVersion, then deletes; nothing for what did not change', () => {
    const s = state();
    const first = diff(s, `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11')}---\n${config('default', '{defaultScheduler: lc}')}`);
    expect(first.map(line)).toEqual(['upsert config lc', 'upsert service ns1/svc1', 'upsert service ns1/svc2']);
    expect(first.map((e) => e.kind === 'service' && e.object.metadata?.resourceVersion)).toEqual([false, 'files-1', 'files-2']);
    expect(diff(s, `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11')}---\n${config('default', '{defaultScheduler: lc}')}`)).toEqual([]);
    expect(diff(s, service('svc1', '10.200.1.12')).map(line)).toEqual(['delete config rr', 'upsert service ns1/svc1', 'delete service ns1/svc2']);
  });

  it('sends an object again only when what is kept of it changed: not for a status or a resourceVersion edit', () => {
    const s = state();
    const svc = (extra: string) => `${service('svc1', '10.200.1.10')}${extra}`;
    expect(diff(s, svc('')).map(line)).toEqual(['upsert service ns1/svc1']);
    expect(diff(s, svc('status: {conditions: [{type: x, status: "True"}]}\n'))).toEqual([]);
    expect(diff(s, svc('').replace('namespace: ns1}', 'namespace: ns1, resourceVersion: "9"}'))).toEqual([]);
    expect(diff(s, svc('').replace('port: 80', 'port: 81')).map(line)).toEqual(['upsert service ns1/svc1']);
    // A config is told apart by its whole content: a label edit is sent, the same text is not.
    expect(diff(s, config('default', '{defaultScheduler: lc}')).map(line)).toEqual(['upsert config lc', 'delete service ns1/svc1']);
    expect(diff(s, config('default', '{defaultScheduler: lc}'))).toEqual([]);
    expect(diff(s, config('default', '{defaultScheduler: lc}').replace('{name: default}', '{name: default, labels: {a: b}}')).map(line)).toEqual(['upsert config lc']);
  });

  it('reports an invalid config and sends nothing for it: the last valid one stays in force', () => {
    const s = state();
    diff(s, config('default', '{defaultScheduler: lc}'));
    const problems: Problem[] = [];
    expect(diff(s, config('default', '{masqueradeBit: 40}'), problems)).toEqual([]);
    expect(problems).toEqual([{ service: '', reason: 'InvalidConfig', message: expect.stringMatching(/^a\.yaml: IPVSProxyConfig default is invalid, the last valid configuration stays in force: .*masqueradeBit = 40/) }]);
    expect(diff(s, '')).toEqual([{ kind: 'config', type: 'delete', config: defaultProxyConfig }]);
  });
});
