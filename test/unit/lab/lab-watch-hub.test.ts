// The lab API server's watch streams (lab/cluster/watch.ts) at their ends: a change published to
// a watch whose response has ended (its timeout, before the socket's 'close') is not written
// ("write after end" was thrown into the request that made the change, in a busy cluster run).
import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, get, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ObjectStore } from '../../../lab/cluster/objects.js';
import { WatchHub } from '../../../lab/cluster/watch.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A hub over a store, one watch of services served on a real HTTP response, and its body as read. */
async function oneWatch(timeoutSeconds?: number): Promise<{ hub: WatchHub; store: ObjectStore; res: ServerResponse; body: () => string; ended: Promise<void> }> {
  const store: ObjectStore = new ObjectStore((c) => hub.publish(c)); // the hub exists by the first change
  const hub = new WatchHub(store);
  let res: ServerResponse | undefined;
  server = createServer((_req, r) => {
    res = r;
    hub.serve(r, { resource: 'services', fields: [], labels: [] }, false, '', timeoutSeconds);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  let text = '';
  const ended = new Promise<void>((resolve) => {
    get(`http://127.0.0.1:${(server!.address() as AddressInfo).port}/`, (m) => {
      m.on('data', (d: Buffer) => { text += d.toString(); });
      m.on('end', resolve);
    });
  });
  while (!res) await new Promise((r) => setTimeout(r, 5));
  return { hub, store, res, body: () => text, ended };
}

const svc = (name: string) => ({ metadata: { name, namespace: 'default' }, spec: { ports: [{ port: 80 }] } });

describe('lab watch hub', () => {
  it('a change after a watch response ended is not written, and nothing throws', async () => {
    const w = await oneWatch();
    w.store.put('services', svc('a'));
    w.res.end(); // ended, but 'close' has not come yet: the watcher is still in the hub's set
    expect(() => w.store.put('services', svc('b'))).not.toThrow();
    expect(() => w.hub.bookmark()).not.toThrow();
    await w.ended;
    const names = w.body().trim().split('\n').map((l) => (JSON.parse(l) as { object: { metadata: { name: string } } }).object.metadata.name);
    expect(names).toEqual(['a']);
  });

  it('a watch ended by its timeout leaves the hub at once', async () => {
    const w = await oneWatch(1);
    expect(w.hub.open).toBe(1);
    await w.ended;
    expect(w.hub.open).toBe(0);
    expect(() => w.store.put('services', svc('c'))).not.toThrow();
  });
});
