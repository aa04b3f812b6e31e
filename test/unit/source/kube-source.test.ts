// KubeSource with client-node's real informers (ListWatch, Watch, the generated API clients) against
// the fake API server over real HTTP: initial list, changes, dropped watches, an API that goes away
// and comes back, 410 Gone both ways, invalid configs. Backoff is shortened so this runs in seconds.
// Addresses: see fixtures.ts (VIPs 10.200.1.0/24, pods 10.10.0.0/16, nodes 192.168.0.0/24).
import { afterEach, describe, expect, it } from '@jest/globals';
import { KubeSource, type KubeSourceOptions } from '../../../src/kube/source.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { FakeApiServer, type FakeApiServerOptions, clientFor } from '../../support/fake-apiserver.js';
import { sleep, waitFor } from '../../support/wait.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const fast = { initialMs: 20, maxMs: 100, jitter: 0 };
const config = (spec: Record<string, unknown>, name = 'default') => ({ metadata: { name }, spec });

/** `upsert service ns1/svc1@rv` style lines; config events as `upsert config <scheduler>`. */
function line(e: SourceEvent): string {
  if (e.kind === 'config') return `${e.type} config ${e.config.defaultScheduler}`;
  const m = e.object.metadata!;
  return `${e.type} ${e.kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`;
}

interface Harness { server: FakeApiServer; source: KubeSource; events: SourceEvent[]; lines(): string[]; clear(): void }
let h: Harness | undefined;

/** A fake server seeded by `seed` and a KubeSource on it, started unless `start` is false. */
async function setup(seed: (s: FakeApiServer) => void = () => undefined, opts: FakeApiServerOptions = {},
  sourceOpts: Partial<KubeSourceOptions> = {}, start = true): Promise<Harness> {
  const server = await FakeApiServer.start(opts);
  seed(server);
  const events: SourceEvent[] = [];
  const source = new KubeSource({ client: clientFor(server), nodeName: NODE, backoff: fast, ...sourceOpts });
  h = { server, source, events, lines: () => events.map(line), clear: () => { events.length = 0; } };
  if (start) await source.start((e) => events.push(e));
  return h;
}

afterEach(async () => {
  await h?.source.stop();
  await h?.server.close();
  h = undefined;
});

const seedBasic = (s: FakeApiServer) => {
  s.put('services', makeService('ns1', 'svc1'));
  s.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]));
  s.put('nodes', makeNode());
  s.put('nodes', makeNode((n) => { n.metadata!.name = 'node-b'; }));
  s.put('ipvsproxyconfigs', config({ defaultScheduler: 'lc' }));
  s.put('ipvsproxyconfigs', config({ defaultScheduler: 'sed' }, 'other'));
};

describe('KubeSource against the fake API server', () => {
  it('delivers the initial list before start resolves: all Services and slices, only this Node, only config "default"', async () => {
    const { lines, source, events, server } = await setup(seedBasic);
    expect(lines().sort()).toEqual(['upsert config lc', 'upsert endpointslice ns1/svc1-a', 'upsert node node-a', 'upsert service ns1/svc1']);
    expect(events.find((e) => e.kind === 'config')).toEqual({ kind: 'config', type: 'upsert', config: { ...defaultProxyConfig, defaultScheduler: 'lc' } });
    expect(source.healthy()).toBe(true);
    // The Node was listed and watched with a field selector, not filtered here.
    expect(server.requests.filter((r) => r.path === '/api/v1/nodes').map((r) => new URLSearchParams(r.query).get('fieldSelector')))
      .toEqual(['metadata.name=node-a', 'metadata.name=node-a']);
  });

  it('sends adds, modifications and deletes of every kind as they happen', async () => {
    const { server, lines, clear } = await setup(seedBasic);
    clear();
    server.put('services', makeService('ns2', 'svc2'));
    server.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.2' }]));
    server.put('nodes', makeNode((n) => { n.metadata!.labels = { 'topology.kubernetes.io/zone': 'z1' }; }));
    server.put('nodes', makeNode((n) => { n.metadata!.name = 'node-b'; n.metadata!.labels = { x: 'y' }; }));
    server.put('ipvsproxyconfigs', config({ defaultScheduler: 'wrr' }));
    server.remove('services', 'svc1', 'ns1');
    server.remove('endpointslices', 'svc1-a', 'ns1');
    await waitFor(() => lines().length >= 6, 'six events');
    expect(lines().sort()).toEqual((['upsert service ns2/svc2', 'upsert endpointslice ns1/svc1-a', 'upsert node node-a',
      'upsert config wrr', 'delete service ns1/svc1', 'delete endpointslice ns1/svc1-a']).sort());
    server.remove('nodes', NODE);
    server.remove('ipvsproxyconfigs', 'default');
    await waitFor(() => lines().length >= 8, 'the node and config deletes');
    // Two informers, two watch streams: their events have no order between them.
    expect(lines().slice(6).sort()).toEqual(['delete config rr', 'delete node node-a']);
    expect(lines().filter((l) => l.includes('node-b'))).toEqual([]);
  });

  it.each([['cleanly (as at a watch timeout)', false], ['abruptly (connection reset)', true]])(
    'reconnects after watches end %s and loses nothing', async (_how, abrupt) => {
      const { server, lines, clear, source } = await setup(seedBasic);
      clear();
      server.dropWatches(abrupt);
      server.put('services', makeService('ns1', 'svc-during'));
      await waitFor(() => lines().includes('upsert service ns1/svc-during'), 'the event written while reconnecting');
      await waitFor(() => server.openWatches === 4, 'four watches again');
      server.put('services', makeService('ns1', 'svc-after'));
      await waitFor(() => lines().includes('upsert service ns1/svc-after'), 'the event after reconnecting');
      expect(lines()).toEqual(['upsert service ns1/svc-during', 'upsert service ns1/svc-after']);
      expect(source.healthy()).toBe(true);
    });

  it('while the API is down: unhealthy and silent; when it is back: converges, deletes included', async () => {
    const { server, lines, clear, source } = await setup(seedBasic);
    clear();
    server.down();
    await waitFor(() => !source.healthy(), 'unhealthy');
    // Changes the operator cannot see yet (the fake changes its store while refusing connections).
    server.remove('services', 'svc1', 'ns1');
    server.put('services', makeService('ns1', 'svc3'));
    await sleep(250); // several failed restarts at the test backoff
    expect(lines()).toEqual([]);
    expect(source.healthy()).toBe(false);
    server.up();
    await waitFor(() => source.healthy() && lines().length >= 2, 'healthy and converged');
    expect(lines().sort()).toEqual(['delete service ns1/svc1', 'upsert service ns1/svc3']);
  });

  it.each<[string, FakeApiServerOptions['goneAs']]>([['a watch ERROR event', 'event'], ['an HTTP 410', 'http']])(
    'relists on 410 Gone sent as %s, and sends deletes the new list implies', async (_how, goneAs) => {
      const { server, lines, clear, source } = await setup(seedBasic, { goneAs });
      clear();
      server.down();
      await waitFor(() => !source.healthy(), 'unhealthy');
      server.remove('services', 'svc1', 'ns1');
      server.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-b', [{ ip: '10.10.1.9' }]));
      server.compact();
      const lists = server.requests.filter((r) => r.path === '/api/v1/services' && !r.query.includes('watch')).length;
      server.up();
      await waitFor(() => source.healthy() && lines().length >= 2, 'healthy and converged');
      expect(lines().sort()).toEqual(['delete service ns1/svc1', 'upsert endpointslice ns1/svc1-b']);
      expect(server.requests.filter((r) => r.path === '/api/v1/services' && !r.query.includes('watch')).length).toBe(lists + 1);
    });

  it('ignores bookmarks and keeps watching from their resourceVersion', async () => {
    const { server, lines, clear } = await setup(seedBasic);
    clear();
    server.bookmark();
    server.put('services', makeService('ns1', 'svc4'));
    await waitFor(() => lines().length >= 1, 'the event after a bookmark');
    expect(lines()).toEqual(['upsert service ns1/svc4']);
  });

  it('keeps the last valid config when an invalid one arrives, posts one Event, and recovers', async () => {
    const problemsSeen: string[][] = [];
    const { server, source, clear } = await setup(seedBasic, {}, { onProblems: (p) => problemsSeen.push(p.map((x) => x.reason)) });
    clear();
    server.put('ipvsproxyconfigs', config({ defaultScheduler: 'lc', masqueradeBit: 77 }));
    await waitFor(() => server.list('events').length === 1, 'the Event');
    const ev = server.list('events')[0]!;
    expect(ev).toMatchObject({ metadata: { namespace: 'default' }, reason: 'InvalidConfig', type: 'Warning',
      involvedObject: { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', name: 'default' },
      source: { component: 'ipvs-operator', host: NODE } });
    expect(ev.message).toContain('spec.masqueradeBit = 77: must be <= 31');
    expect(source.problems().map((p) => p.reason)).toEqual(['InvalidConfig']);
    // Relists and reconnects see the same invalid object again: no second Event, nothing sent.
    server.dropWatches(true);
    await waitFor(() => server.openWatches === 4, 'watches back');
    await sleep(50);
    expect(server.list('events')).toHaveLength(1);
    expect(h!.lines()).toEqual([]);
    server.put('ipvsproxyconfigs', config({ defaultScheduler: 'mh' }));
    await waitFor(() => h!.lines().length === 1, 'the valid config');
    expect(h!.lines()).toEqual(['upsert config mh']);
    expect(source.problems()).toEqual([]);
    expect(problemsSeen).toEqual([['InvalidConfig'], []]);
  });

  it('runs with the defaults when the IPVSProxyConfig CRD is not installed (404), and is healthy', async () => {
    const { lines, source } = await setup((s) => { s.put('services', makeService('ns1', 'svc1')); }, { notServed: ['ipvsproxyconfigs'] });
    expect(lines()).toEqual(['upsert service ns1/svc1']);
    expect(source.healthy()).toBe(true);
  });

  it('start waits for an API that is down at first, and stop ends the wait', async () => {
    const { server, source, events, lines } = await setup((s) => { seedBasic(s); s.down(); }, {}, {}, false);
    let resolved = false;
    const started = source.start((e) => events.push(e)).then(() => { resolved = true; });
    await sleep(150);
    expect(resolved).toBe(false);
    expect(source.healthy()).toBe(false);
    server.up();
    await started;
    expect(lines()).toHaveLength(4);
    expect(source.healthy()).toBe(true);
    await source.stop();
    server.put('services', makeService('ns1', 'after-stop'));
    await sleep(50);
    expect(lines()).toHaveLength(4);
  });
});
