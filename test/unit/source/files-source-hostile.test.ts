// The files source under hostile and careless input (issue 12): a seeded corpus of hostile YAML
// through the parser and through a real source in a real directory, the ConfigMap-volume layout
// with kubelet's atomic swap, a directory removed and created again, unreadable files, the
// safety-net rescan, and each warning once. Addresses: VIPs 10.200.1.0/24, pods 10.10.0.0/16.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Problem } from '../../../src/desired/types.js';
import { FilesSource, type FilesSourceOptions } from '../../../src/source/files.js';
import { ReadBuffer, readRegularBytes } from '../../../src/source/manifest-dir.js';
import type { LogLevel } from '../../../src/util/log.js';
import { parseManifests } from '../../../src/source/manifests.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { waitFor } from '../../support/wait.js';
import { prng } from '../../support/fixtures.js';

/** A file read as the source reads it, decoded. */
const readRegularFile = async (path: string, max: number, skipOthers: boolean) =>
  (await readRegularBytes(path, max, skipOthers)).toString('utf8');

const service = (name: string, ip: string) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: ns1}\nspec: {clusterIP: ${ip}, ports: [{port: 80, protocol: TCP}]}\n`;

/** Hostile documents, each a way YAML that parses can hurt a naive reader. */
function hostile(rand: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const depth = 500 + Math.floor(rand() * 5000);
  const kinds = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'List', 'ServiceList', 'Service', 'EndpointSlice', 'Node'];
  const kind = pick(kinds);
  const withApi = rand() < 0.5 ? `apiVersion: ${pick(['v1', 'discovery.k8s.io/v1', 'toString', '__proto__'])}\n` : '';
  const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ...Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9).fill(`*${String.fromCharCode(97 + i)}`).join(',')}]`)].join('\n');
  const cases = [
    () => `${withApi}kind: ${kind}\nmetadata: {name: x}\n`,
    () => `${withApi}kind: ${kind}\nitems: ${pick(['7', '{a: 1}', '[null]', '[{kind: constructor}]'])}\nmetadata: {name: x}\n`,
    () => `${laughs}\nkind: Service\nmetadata: {name: bomb}\n`,
    () => `kind: Service\nmetadata: &m {name: loop, labels: *m}\n`,
    () => `&x [*x]\n`,
    () => `kind: Service\nmetadata: {name: deep}\nspec: ${'['.repeat(depth)}${']'.repeat(depth)}\n`,
    () => `kind: Service\nmetadata: {name: deep}\nspec: ${'{a: '.repeat(depth)}1${'}'.repeat(depth)}\n`,
    () => `kind: Service\nmetadata: ${pick(['7', '[x]', 'null', '"str"', '{name: 7}', '{name: [a]}', '{name: x, namespace: 9}'])}\n`,
    () => `kind: ${pick(['7', '[Service]', '{a: b}', 'null', '""'])}\nmetadata: {name: x}\n`,
    () => `\ufeffkind: Service\nmetadata: {name: bom}\n---\n\u0000\u0001\u0002 binary`,
    () => `kind: Service\nmetadata: {name: dup, name: dup2}\n`,
    () => `kind: Service\nmetadata: {name: big}\nspec: {x: "${'y'.repeat(100_000 + Math.floor(rand() * 100_000))}"}\n`,
    () => `!!js/function "function(){}"\n`,
    () => `kind: Service\nmetadata: {name: tag}\nspec: !!binary AAAA\n`,
    () => '---\n---\n...\n',
  ];
  return pick(cases)();
}

describe('parseManifests on a seeded hostile corpus', () => {
  it.each([1, 2, 3])('seed %i: 2,000 documents, never a throw, every bad document named', (seed) => {
    const rand = prng(seed);
    let throws = 0;
    let refused = 0;
    let accepted = 0;
    const unnamed: string[] = [];
    const unusable: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const text = `${service('good', '10.200.1.10')}---\n${hostile(rand)}`;
      let r: ReturnType<typeof parseManifests>;
      try {
        r = parseManifests(text);
      } catch {
        throws++;
        continue;
      }
      if (r.errors.length) {
        refused++;
        if (r.manifests.length) unusable.push('a refused file kept objects');
        for (const e of r.errors) if (!/^(document \d|not YAML)/.test(e)) unnamed.push(e);
      } else {
        accepted++;
        // Whatever was accepted is plain data a source can fingerprint and clone.
        for (const m of r.manifests) {
          try {
            structuredClone(JSON.parse(JSON.stringify(m.object)));
          } catch (e) {
            unusable.push((e as Error).message);
          }
        }
      }
    }
    console.log(`hostile YAML corpus, seed ${seed}: 2000 files, ${throws} throws, ${refused} refused, ${accepted} accepted`);
    expect(throws).toBe(0);
    expect(unnamed).toEqual([]);
    expect(unusable).toEqual([]);
    expect(refused).toBeGreaterThan(1000);
  });

  it('names prototype kinds as skipped, never as Object members', () => {
    expect(parseManifests('apiVersion: v1\nkind: constructor\nmetadata: {name: x}\n')).toEqual({ manifests: [], errors: [], skipped: ['constructor/x'] });
    expect(parseManifests('kind: toString\nmetadata: {name: x}\n').skipped).toEqual(['toString/x']);
  });

  it('an alias bomb, a circular alias and nesting 5,000 deep are errors, each naming its document', () => {
    const r = (t: string) => parseManifests(`${service('a', '10.200.1.1')}---\n${t}`).errors.join('\n');
    expect(r('a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n'))
      .toMatch(/^document 2: .*alias/i);
    expect(r('kind: Service\nmetadata: &m {name: loop, labels: *m}\n')).toMatch(/^document 2: metadata\.labels: contains itself \(a circular alias\)/);
    // Too deep for the YAML parser itself: the whole file is refused, without a document number.
    expect(r(`kind: Service\nmetadata: {name: deep}\nspec: ${'['.repeat(5000)}${']'.repeat(5000)}\n`)).toMatch(/^not YAML this parser can read \(nested too deep\?\)/);
    expect(r(`kind: Service\nmetadata: {name: deep}\nspec: ${'['.repeat(100)}${']'.repeat(100)}\n`)).toMatch(/^document 2: spec(\[0\])+: nested more than 64 deep/);
  });
});

let dir: string;
let events: SourceEvent[];
let problems: readonly Problem[];
let source: FilesSource | undefined;
let logged: Array<{ level: LogLevel; message: string }>;
const lines = () => events.map((e) => (e.kind === 'config' ? `${e.type} config` : `${e.type} ${e.kind} ${e.object.metadata!.name}`));

async function startSource(extra: Partial<FilesSourceOptions> = {}, d = dir): Promise<FilesSource> {
  source = new FilesSource({
    dir: d, nodeName: 'node-a', debounceMs: 20, log: (level, message) => { logged.push({ level, message }); },
    onProblems: (p) => { problems = p; }, ...extra,
  });
  await source.start((e) => events.push(e));
  return source;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'files-hostile-'));
  events = [];
  problems = [];
  logged = [];
});
afterEach(async () => {
  await source?.stop();
  source = undefined;
  await rm(dir, { recursive: true, force: true });
});

describe('FilesSource with hostile files', () => {
  it('a directory of hostile files: no crash at start, each bad file reported by name, good files delivered', async () => {
    const rand = prng(7);
    await writeFile(join(dir, 'good.yaml'), service('good', '10.200.1.10'));
    for (let i = 0; i < 40; i++) await writeFile(join(dir, `bad-${String(i).padStart(2, '0')}.yaml`), hostile(rand));
    await startSource();
    expect(lines()).toContain('upsert service good');
    const named = new Set(problems.map((p) => /^(bad-\d\d\.yaml):/.exec(p.message)?.[1]).filter(Boolean));
    // Every file that is not plain good YAML is named; a few hostile draws are harmless (empty
    // documents, a kind the source does not read) and are rightly not problems.
    expect(named.size).toBeGreaterThan(25);
    // Hostile draws that parse into the same harmless object in two files are duplicates.
    expect(problems.filter((p) => p.reason !== 'InvalidManifestFile' && p.reason !== 'DuplicateObject')).toEqual([]);
  });

  it('a good file turned hostile keeps its last good objects, reported once', async () => {
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource();
    await writeFile(join(dir, 'svc.yaml'), 'kind: Service\nmetadata: &m {name: loop, labels: *m}\n');
    await waitFor(() => problems.length === 1, 'the problem');
    await source!.rescan();
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1']);
    expect(problems[0]!.message).toMatch(/^svc\.yaml: .*circular alias.*\(keeping its last good objects\)$/);
  });
});

describe('FilesSource on a real node\'s layouts and faults', () => {
  it('follows a ConfigMap volume\'s symlinks, and kubelet\'s atomic ..data swap is one change with nothing lost', async () => {
    const v1 = join(dir, '..2026_11_23_01');
    await mkdir(v1);
    await writeFile(join(v1, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await symlink('..2026_11_23_01', join(dir, '..data'));
    await symlink('..data/svc.yaml', join(dir, 'svc.yaml'));
    await startSource();
    expect(lines()).toEqual(['upsert service svc1']);
    // kubelet: new timestamped dir, ..data_tmp -> it, rename over ..data, remove the old dir.
    const v2 = join(dir, '..2026_11_23_02');
    await mkdir(v2);
    await writeFile(join(v2, 'svc.yaml'), `${service('svc1', '10.200.1.10')}---\n${service('svc2', '10.200.1.11')}`);
    await symlink('..2026_11_23_02', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await rm(v1, { recursive: true });
    await waitFor(() => lines().length === 2, 'the new object');
    expect(lines()).toEqual(['upsert service svc1', 'upsert service svc2']);
    expect(problems).toEqual([]);
  });

  it('a file turned into a symlink to the same content keeps its Services', async () => {
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource();
    await writeFile(join(dir, '.real.yaml'), service('svc1', '10.200.1.10'));
    await unlink(join(dir, 'svc.yaml'));
    await symlink('.real.yaml', join(dir, 'svc.yaml'));
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1']);
  });

  it('a directory removed and created again is read and watched again', async () => {
    const d = join(dir, 'manifests');
    await mkdir(d);
    await writeFile(join(d, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource({}, d);
    await rm(d, { recursive: true });
    await source!.rescan();
    // Gone: nothing is deleted while the directory cannot be read; the source says why.
    expect(lines()).toEqual(['upsert service svc1']);
    expect(source!.health()).toMatchObject({ ok: false, reason: expect.stringContaining('cannot read') });
    await mkdir(d);
    await writeFile(join(d, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await source!.rescan();
    expect(source!.health().ok).toBe(true);
    // Watched again: a change is seen without another rescan.
    await writeFile(join(d, 'svc2.yaml'), service('svc2', '10.200.1.11'));
    await waitFor(() => lines().includes('upsert service svc2'), 'a change in the new directory');
  });

  it('a file that cannot be read keeps its last good objects, with a warning', async () => {
    let fail = false;
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource({
      readFile: async (path) => {
        if (fail) throw Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: 'EACCES' });
        const { readFile } = await import('node:fs/promises');
        return readFile(path, 'utf8');
      },
    });
    fail = true;
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1']);
    expect(problems).toEqual([expect.objectContaining({ reason: 'UnreadableManifestFile', message: expect.stringMatching(/^svc\.yaml: cannot be read: EACCES.*keeping its last good objects/) })]);
    fail = false;
    await source!.rescan();
    expect(problems).toEqual([]);
    // A file that is really gone deletes its objects.
    await unlink(join(dir, 'svc.yaml'));
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1', 'delete service svc1']);
  });

  it('the periodic rescan catches a change the watcher never reported', async () => {
    let rescans = 0;
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    // No watcher events reach it: the debounce is longer than the test, so only the rescan can see changes.
    await startSource({ debounceMs: 3_600_000, rescanMs: 30, readFile: async (p) => { rescans++; const { readFile } = await import('node:fs/promises'); return readFile(p, 'utf8'); } });
    await writeFile(join(dir, 'svc2.yaml'), service('svc2', '10.200.1.11'));
    await waitFor(() => lines().includes('upsert service svc2'), 'the rescan');
    expect(rescans).toBeGreaterThan(1);
  });

  it('files of other sizes read in turn through one buffer: each its own objects, a rescan sees only what changed', async () => {
    // A big file first (the buffer grows to it), then smaller ones read into the same buffer.
    const long = (name: string, ip: string) => service(name, ip).replace('namespace: ns1}', `namespace: ns1, annotations: {note: "${'x'.repeat(50_000)}"}}`);
    await writeFile(join(dir, 'a.yaml'), long('svc1', '10.200.1.10'));
    await writeFile(join(dir, 'b.yaml'), service('svc2', '10.200.1.11'));
    await writeFile(join(dir, 'c.yaml'), service('svc3', '10.200.1.12'));
    await startSource({ debounceMs: 3_600_000 });
    expect(lines().sort()).toEqual(['upsert service svc1', 'upsert service svc2', 'upsert service svc3']);
    // The same size, another address: only c.yaml's Service changes; a.yaml and b.yaml are the same bytes.
    await writeFile(join(dir, 'c.yaml'), service('svc3', '10.200.1.13'));
    await source!.rescan();
    expect(lines().slice(3)).toEqual(['upsert service svc3']);
    const e = events[3]!;
    expect(e.kind === 'service' && e.object.spec?.clusterIP).toBe('10.200.1.13');
    await source!.rescan();
    expect(lines()).toHaveLength(4);
  });

  it('each warning is logged once (without an onProblems sink), however often the directory is read', async () => {
    await writeFile(join(dir, 'bad.yaml'), 'kind: [\n');
    await startSource({ onProblems: undefined });
    for (let i = 0; i < 5; i++) await source!.rescan();
    expect(logged.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual([expect.stringMatching(/^bad\.yaml: document 1:/)]);
  });
});

describe('FilesSource against a careless or hostile editor (issue "Never wedged")', () => {
  it('an emptied file (a save in two steps, `cmd > file.yaml`) keeps its Services and says so; deleting the file deletes them', async () => {
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource();
    await writeFile(join(dir, 'svc.yaml'), '');
    await waitFor(() => problems.some((p) => p.reason === 'EmptyManifestFile'), 'the empty-file problem');
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1']);
    await writeFile(join(dir, 'svc.yaml'), '\n  \n');
    await source!.rescan();
    expect(lines()).toEqual(['upsert service svc1']);
    await unlink(join(dir, 'svc.yaml'));
    await waitFor(() => lines().includes('delete service svc1'), 'the delete');
    expect(problems).toEqual([]);
  });

  it('a file swapped for a FIFO never blocks: a rescan and stop() return, its last good objects stay', async () => {
    await writeFile(join(dir, 'svc.yaml'), service('svc1', '10.200.1.10'));
    await startSource();
    await unlink(join(dir, 'svc.yaml'));
    const mk = spawnSync('mkfifo', [join(dir, 'svc.yaml')]);
    expect(mk.status).toBe(0);
    // Listed, opened non-blocking, refused by fstat on that descriptor: no read ever waits for a writer.
    await source!.rescan();
    await waitFor(() => problems.some((p) => /^svc\.yaml: cannot be read: not a regular file \(keeping its last good objects\)$/.test(p.message)), 'the problem');
    await source!.stop();
    source = undefined;
    expect(lines()).toEqual(['upsert service svc1']);
  });

  it('reads a regular file through one non-blocking descriptor with the size checked on the bytes read', async () => {
    const path = join(dir, 'x.yaml');
    await writeFile(path, 'a'.repeat(100));
    expect(await readRegularFile(path, 100, true)).toHaveLength(100);
    await expect(readRegularFile(path, 99, true)).rejects.toThrow(/larger than 99 bytes/);
    spawnSync('mkfifo', [join(dir, 'fifo.yaml')]);
    await expect(readRegularFile(join(dir, 'fifo.yaml'), 100, false)).rejects.toMatchObject({ code: 'ENOTREG' });
    await expect(readRegularFile(join(dir, 'fifo.yaml'), 100, true)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(readRegularFile(dir, 100, false)).rejects.toMatchObject({ code: 'ENOTREG' });
  });

  it('reads file after file into one kept buffer, each read its own bytes', async () => {
    const kept = new ReadBuffer();
    const [big, small, huge] = [join(dir, 'big.yaml'), join(dir, 'small.yaml'), join(dir, 'huge.yaml')];
    await writeFile(big, 'b'.repeat(5000));
    await writeFile(small, 'é'.repeat(10));
    await writeFile(huge, 'h'.repeat(1 << 20));
    const first = await readRegularBytes(big, 1 << 21, true, kept);
    expect(first.toString()).toBe('b'.repeat(5000));
    const buffer = kept.buf;
    expect(buffer.length).toBe(5001); // the file's size and one byte to see its end
    // A smaller file goes into the same buffer; the view returned is its bytes only.
    const second = await readRegularBytes(small, 1 << 21, true, kept);
    expect(second.toString()).toBe('é'.repeat(10));
    expect([second.buffer, second.byteOffset]).toEqual([buffer.buffer, buffer.byteOffset]);
    expect(kept.buf).toBe(buffer);
    // A file of 1 MiB or more gets a buffer of its own: the kept one does not grow to it.
    expect((await readRegularBytes(huge, 1 << 21, true, kept)).toString()).toBe('h'.repeat(1 << 20));
    expect(kept.buf).toBe(buffer);
    // Past the size fstat gave (a /proc file), read on into a buffer of its own, within the bound.
    const status = await readRegularBytes('/proc/self/status', 1 << 20, true, kept);
    const text = status.toString();
    expect(text).toMatch(/^Name:[^]*\nVmRSS:/);
    await expect(readRegularBytes('/proc/self/status', 100, true, kept)).rejects.toThrow(/larger than 100 bytes/);
    // The kept buffer's next reads leave those bytes as they were: they are not a view of it.
    expect((await readRegularBytes(big, 1 << 21, true, kept)).toString()).toBe('b'.repeat(5000));
    expect(status.toString()).toBe(text);
    expect((await readRegularBytes(small, 1 << 21, true, kept)).toString()).toBe('é'.repeat(10));
  });

  it('reads the whole text past the size fstat gave, within the bound', async () => {
    // Multi-byte characters across the old 1 MiB chunk edge, in a file of fstat's size.
    const text = 'é€'.repeat(300_000);
    const path = join(dir, 'big.yaml');
    await writeFile(path, text);
    expect(await readRegularFile(path, 1_500_000, true)).toBe(text);
    // /proc files are regular with a size of 0: all of their text is past fstat's size.
    const status = await readRegularFile('/proc/self/status', 1 << 20, true);
    expect(status).toMatch(/^Name:/);
    expect(status).toMatch(/\nVmRSS:/);
    await expect(readRegularFile('/proc/self/status', 100, true)).rejects.toThrow(/larger than 100 bytes/);
  });
});
