// The lab API server over Debian's etcd (lab/cluster/etcd.ts): a restart is a new server over the
// same etcd, and serves the same objects at the same resourceVersions (= etcd's mod_revision),
// replays a watch from before the restart, answers one from before a compaction with 410 Gone,
// and keeps Events with their expiry. Each test runs its own etcd on loopback (free ports) with
// its data in a temporary directory. Needs the `etcd` binary (etcd-server, `lab prepare`).
// Addresses: Services 10.200.1.0/24, pods 10.10.0.0/16.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LabApiServer } from '../../../lab/cluster/apiserver.js';
import type { LabApiServerOptions } from '../../../lab/cluster/api-types.js';
import { EtcdProcess, changeOfEvent, etcdKey, resourceOfKey } from '../../../lab/cluster/etcd.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('etcd layout (pure)', () => {
  it('keys objects by resource, namespace and name, and reads the resource back', () => {
    expect(etcdKey('services', 'default', 'web')).toBe('/registry/services/default/web');
    expect(etcdKey('nodes', undefined, 'n1')).toBe('/registry/nodes/n1');
    expect(resourceOfKey('/registry/events.events.k8s.io/default/e1')).toBe('events.events.k8s.io');
    expect(resourceOfKey('/registry/nosuch/x')).toBeUndefined();
    expect(resourceOfKey('/other/services/x')).toBeUndefined();
  });

  it('turns watch events into changes: version 1 ADDED, later MODIFIED, DELETE the previous object at the delete\'s revision', () => {
    const value = (name: string) => b64(JSON.stringify({ written: 5, object: { metadata: { name, namespace: 'default' }, spec: {} } }));
    const key = b64('/registry/services/default/web');
    expect(changeOfEvent({ type: 'PUT', kv: { key, value: value('web'), mod_revision: '7', version: '1' } }))
      .toEqual({ rv: 7, resource: 'services', type: 'ADDED', object: { metadata: { name: 'web', namespace: 'default', resourceVersion: '7' }, spec: {} } });
    expect(changeOfEvent({ type: 'PUT', kv: { key, value: value('web'), mod_revision: '8', version: '2' } })?.type).toBe('MODIFIED');
    expect(changeOfEvent({ type: 'DELETE', kv: { key, mod_revision: '9' }, prev_kv: { key, value: value('web'), mod_revision: '8' } }))
      .toMatchObject({ rv: 9, type: 'DELETED', object: { metadata: { name: 'web', resourceVersion: '9' } } });
    expect(changeOfEvent({ type: 'PUT', kv: { key, value: b64('not json'), mod_revision: '10', version: '1' } })).toBeUndefined();
  });
});

const hasEtcd = (() => {
  try {
    execFileSync('etcd', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    process.stderr.write('lab-etcd.test: no etcd binary (apt-get install etcd-server, or npm run lab -- prepare): the etcd tests are skipped\n');
    return false;
  }
})();

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

(hasEtcd ? describe : describe.skip)('the lab API server over etcd, restarted', () => {
  let dir: string;
  let etcd: EtcdProcess;
  const servers: LabApiServer[] = [];
  const start = async (o: Omit<LabApiServerOptions, 'etcd'> = {}) => {
    const s = await LabApiServer.start({ ...o, etcd: etcd.url });
    servers.push(s);
    return s;
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lab-etcd-'));
    etcd = await EtcdProcess.start({ dir: join(dir, 'data'), client: `http://127.0.0.1:${await freePort()}`, peer: `http://127.0.0.1:${await freePort()}` });
  }, 60_000);
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
    await etcd.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  const json = async (s: LabApiServer, path: string, init?: RequestInit) => (await fetch(`${s.url}${path}`, { ...init, headers: { 'content-type': 'application/json' } })).json() as Promise<Record<string, unknown>>;
  /** A watch from `rv`, ended by the server after a second: its event lines. */
  const watchFrom = async (s: LabApiServer, path: string, rv: number) =>
    (await (await fetch(`${s.url}${path}?watch=true&timeoutSeconds=1&resourceVersion=${rv}`)).text()).trim().split('\n').filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string; resourceVersion?: string }; code?: number } });
  const svc = (name: string, port: number) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec: { clusterIP: '10.200.1.9', ports: [{ port }] } });

  it('serves the same objects at the same resourceVersions, and replays a watch from before the restart', async () => {
    const a = await start();
    const first = a.resourceVersion;
    a.put('services', svc('web', 80));
    a.put('services', svc('web', 81));
    a.put('services', svc('db', 5432));
    a.put('nodes', { metadata: { name: 'n1' } });
    const mid = a.resourceVersion;
    a.remove('services', 'db', 'default');
    a.put('services', svc('cache', 6379));
    // In key order: a list's order is the server's own (etcd keeps keys sorted).
    const all = (s: LabApiServer) => [...s.list('services'), ...s.list('nodes')].sort((x, y) => x.metadata.name.localeCompare(y.metadata.name));
    const before = all(a);
    const rv = a.resourceVersion;
    // resourceVersion = etcd's revision: one revision per change, from etcd's first (1).
    expect({ first, rv }).toEqual({ first: 1, rv: 7 });
    await a.close();

    const b = await start();
    expect(b.resourceVersion).toBe(rv);
    expect(all(b)).toEqual(before);
    const list = await json(b, '/api/v1/services');
    expect((list.metadata as { resourceVersion: string }).resourceVersion).toBe(String(rv));
    // An informer that saw `mid` before the restart resumes from it: the delete and the create after it.
    expect((await watchFrom(b, '/api/v1/services', mid)).map((e) => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion]))
      .toEqual([['DELETED', 'db', '6'], ['ADDED', 'cache', '7']]);
    // The counter goes on from etcd's revision; a uid is never given twice.
    const next = b.put('services', svc('queue', 5672));
    expect(next.metadata.resourceVersion).toBe(String(rv + 1));
    // web, db (deleted), n1 and cache had uid-1..4 before the restart.
    expect(before.map((o) => o.metadata.uid).sort()).toEqual(['uid-1', 'uid-3', 'uid-4']);
    expect(next.metadata.uid).toBe('uid-5');
  }, 60_000);

  it('a watch from before a compaction gets 410 Gone after the restart; one from the compaction on replays', async () => {
    const a = await start();
    a.put('services', svc('web', 80));
    const old = a.resourceVersion;
    a.put('services', svc('web', 81));
    a.compact();
    const compacted = a.resourceVersion;
    a.put('services', svc('web', 82));
    await a.close();

    const b = await start();
    const gone = await watchFrom(b, '/api/v1/services', old);
    expect(gone).toEqual([{ type: 'ERROR', object: expect.objectContaining({ code: 410, reason: 'Expired' }) }]);
    expect((await watchFrom(b, '/api/v1/services', compacted)).map((e) => [e.type, e.object.metadata.resourceVersion])).toEqual([['MODIFIED', String(compacted + 1)]]);
    // Compacted again, and restarted: nothing before the new compaction is replayed.
    b.compact();
    await b.close();
    const c = await start();
    expect((await watchFrom(c, '/api/v1/services', compacted))[0]?.object.code).toBe(410);
    expect(await watchFrom(c, '/api/v1/services', c.resourceVersion)).toEqual([]);
  }, 60_000);

  it('keeps Events with their expiry: an Event written before the restart goes an hour after its write, not after the restart', async () => {
    let t = Date.parse('2026-11-25T00:00:00Z');
    const lab = { clock: () => t };
    const a = await start({ lab });
    const path = '/api/v1/namespaces/default/events';
    const ev = { apiVersion: 'v1', kind: 'Event', metadata: { name: 'e.1', namespace: 'default' }, reason: 'Test', message: 'm', involvedObject: { kind: 'Node', name: 'n1' } };
    expect((await fetch(`${a.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ev) })).status).toBe(201);
    await a.close();
    t += 50 * 60_000;
    const b = await start({ lab });
    const names = async () => ((await json(b, path)).items as Array<{ metadata: { name: string } }>).map((i) => i.metadata.name);
    expect(await names()).toEqual(['e.1']);
    t += 11 * 60_000; // 61 min after its write, 11 after the restart
    expect(await names()).toEqual([]);
  }, 60_000);

  it('with the lab control plane, a restart over an unchanged store writes nothing', async () => {
    const lab = { advertiseAddress: '172.18.0.2', alloc: { serviceCIDRs: ['10.200.1.0/24'], nodePortRange: [30000, 30010] as [number, number] } };
    const a = await start({ lab, port: await freePort() });
    const port = Number(new URL(a.url).port);
    a.create('services', { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } });
    a.put('pods', { metadata: { name: 'p1', namespace: 'default', labels: { app: 'web' } }, spec: { nodeName: 'n1' },
      status: { phase: 'Running', podIP: '10.10.1.5', conditions: [{ type: 'Ready', status: 'True' }] } });
    expect(a.get('endpointslices', 'web-lab', 'default') ?? a.list('endpointslices').find((s) => s.metadata.name.startsWith('web'))).toBeDefined();
    const rv = a.resourceVersion;
    await a.close();
    const b = await start({ lab, port });
    expect(b.resourceVersion).toBe(rv);
  }, 60_000);
});
