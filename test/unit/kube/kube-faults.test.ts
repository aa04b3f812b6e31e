// KubeSource healing itself against the fake API server's injected faults (401, 403, 429 with
// Retry-After, 5xx, a malformed watch line, a stalled watch, paginated lists), start-up that gives
// up with a clear error, and listOnce. client-node's real informers over real HTTP; backoffs are
// shortened; no assertion depends on how fast the machine is (requests are counted, order observed).
import { afterEach, describe, expect, it } from '@jest/globals';
import { listOnce } from '../../../src/kube/list-once.js';
import { KubeSource, type KubeSourceOptions } from '../../../src/kube/source.js';
import type { LogLevel } from '../../../src/util/log.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { FakeApiServer, type ResourceName, clientFor } from '../../support/fake-apiserver.js';
import { sleep, waitFor } from '../../support/wait.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const fast = { initialMs: 20, maxMs: 100, jitter: 0 };

interface LogLine { level: LogLevel; message: string; fields?: Record<string, unknown> }
interface Harness { server: FakeApiServer; source: KubeSource; lines: string[]; logs: LogLine[] }
let h: Harness | undefined;

function line(e: SourceEvent): string {
  if (e.kind === 'config') return `${e.type} config ${e.config.defaultScheduler}`;
  const m = e.object.metadata!;
  return `${e.type} ${e.kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`;
}

const seed = (s: FakeApiServer) => {
  s.put('services', makeService('ns1', 'svc1'));
  s.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-a', [{ ip: '10.10.1.1' }]));
  s.put('nodes', makeNode());
};

async function setup(opts: Partial<KubeSourceOptions> = {}, before: (s: FakeApiServer) => void = seed, start = true): Promise<Harness> {
  const server = await FakeApiServer.start();
  before(server);
  const logs: LogLine[] = [];
  const lines: string[] = [];
  const source = new KubeSource({
    client: clientFor(server), nodeName: NODE, backoff: fast, relistMs: 0,
    log: (level, message, fields) => logs.push({ level, message, ...(fields ? { fields } : {}) }), ...opts,
  });
  h = { server, source, lines, logs };
  if (start) await source.start((e) => lines.push(line(e)));
  return h;
}

afterEach(async () => {
  await h?.source.stop();
  await h?.server.close();
  h = undefined;
});

const requestsFor = (s: FakeApiServer, path: string, watch?: boolean) =>
  s.requests.filter((r) => r.path === path && (watch === undefined || r.query.includes('watch=true') === watch));
const paths: Record<string, string> = { services: '/api/v1/services', endpointslices: '/apis/discovery.k8s.io/v1/endpointslices' };

describe('KubeSource heals after API errors', () => {
  it.each<[number, ResourceName, 'error' | 'warn', RegExp]>([
    [401, 'endpointslices', 'error', /endpointslices: 401 Unauthorized/],
    [403, 'endpointslices', 'error', /endpointslices: 403 Forbidden/],
    [500, 'services', 'warn', /services: 500 Internal Server Error/],
    [503, 'services', 'warn', /services: 503 Service Unavailable/],
  ])('%i on %s: logged at %s, retried with backoff, unhealthy with the reason, converges when it clears', async (status, resource, level, reason) => {
    const { server, source, lines, logs } = await setup();
    lines.length = 0;
    server.fail({ resource, status });
    server.dropWatches(); // the reconnect and every retry meet the fault
    await waitFor(() => !source.health().ok, 'unhealthy');
    const requestsAtFault = requestsFor(server, paths[resource]!).length;
    await waitFor(() => requestsFor(server, paths[resource]!).length >= requestsAtFault + 3, 'three retries');
    expect(source.health()).toMatchObject({ ok: false, reason: expect.stringMatching(reason) });
    const failures = logs.filter((l) => l.message.includes(`list/watch of ${resource} failed`));
    // One line at warn/error for the failure; its repeats at debug.
    expect(failures.filter((l) => l.level !== 'debug')).toEqual([expect.objectContaining({ level, fields: expect.objectContaining({ informer: resource, status }) })]);
    expect(failures.length).toBeGreaterThanOrEqual(3);
    // A change made during the fault reaches the source once it clears.
    if (resource === 'services') server.put('services', makeService('ns1', 'svc-during'));
    else server.put('endpointslices', makeSlice('ns1', 'svc1', 'svc1-b', [{ ip: '10.10.1.2' }]));
    server.clearFaults();
    await waitFor(() => source.health().ok && lines.length === 1, 'healthy and converged');
    expect(lines).toEqual([resource === 'services' ? 'upsert service ns1/svc-during' : 'upsert endpointslice ns1/svc1-b']);
    expect(source.health().reason).toBeUndefined();
    expect(logs.some((l) => l.level === 'info' && l.message === 'watching again' && l.fields?.informer === resource)).toBe(true);
  });

  it('429 with Retry-After on a list: waits as long as the server asks, longer than its own backoff', async () => {
    const { server, source, logs } = await setup();
    // client-node's Watch keeps only the status of a refused watch, so Retry-After is seen on lists.
    server.fail({ resource: 'services', verb: 'list', status: 429, retryAfterSeconds: 1 });
    const before = requestsFor(server, paths.services!).length;
    source.relistNow();
    await waitFor(() => !source.health().ok, 'unhealthy');
    const failed = logs.find((l) => l.message.startsWith('list/watch of services failed: 429'))!;
    expect(failed).toMatchObject({ level: 'warn', fields: { status: 429, retryAfterMs: 1000, retryInMs: 1000 } });
    // The backoff alone would have retried 5 times by now; the server asked for 1 s.
    await sleep(300);
    expect(requestsFor(server, paths.services!).length).toBe(before + 1);
    expect(source.health()).toMatchObject({ ok: false, reason: expect.stringContaining('services: 429 Too Many Requests') });
    server.clearFaults();
    await waitFor(() => source.health().ok, 'healthy after the Retry-After');
    expect(requestsFor(server, paths.services!).length).toBeGreaterThanOrEqual(before + 2);
  });

  it('health(): since when the first informer went down and when all came back, by the injected clock', async () => {
    let clock = 500;
    const { server, source } = await setup({ now: () => clock }, seed, false);
    clock = 700;
    const started = source.start(() => undefined);
    expect(source.health()).toMatchObject({ ok: false, since: 700 }); // since start, before the first list
    clock = 1_000;
    await started;
    expect(source.health()).toEqual({ ok: true, since: 1_000 });
    clock = 2_000;
    server.fail({ resource: 'endpointslices', status: 403 });
    server.dropWatches();
    await waitFor(() => !source.health().ok, 'unhealthy');
    clock = 2_500; // later retries do not move `since`
    await waitFor(() => requestsFor(server, paths.endpointslices!).length >= 6, 'retries');
    expect(source.health()).toMatchObject({ ok: false, since: 2_000, reason: expect.stringMatching(/^endpointslices: 403 Forbidden/) });
    clock = 3_000;
    server.clearFaults();
    await waitFor(() => source.health().ok, 'healthy');
    expect(source.health()).toEqual({ ok: true, since: 3_000 });
  });
});

describe('KubeSource repairs what the watch lost', () => {
  it('an add and a delete lost to malformed watch lines are repaired by a relist, which sends only the differences', async () => {
    const { server, source, lines } = await setup();
    lines.length = 0;
    server.corruptNextEvent('services');
    server.put('services', makeService('ns1', 'svc-lost'));
    server.corruptNextEvent('services');
    server.remove('services', 'svc1', 'ns1');
    server.put('services', makeService('ns1', 'svc-after'));
    await waitFor(() => lines.length === 1, 'the event after the malformed lines');
    await sleep(50);
    expect(lines).toEqual(['upsert service ns1/svc-after']); // client-node dropped the two lines
    const lists = requestsFor(server, paths.services!, false).length;
    source.relistNow();
    await waitFor(() => lines.length === 3, 'the relist repaired them');
    expect(lines.slice(1).sort()).toEqual(['delete service ns1/svc1', 'upsert service ns1/svc-lost']);
    expect(requestsFor(server, paths.services!, false).length).toBe(lists + 1);
    expect(source.health().ok).toBe(true);
  });

  it('relists periodically on its own (relistMs)', async () => {
    const { server, lines } = await setup({ relistMs: 150 });
    lines.length = 0;
    server.corruptNextEvent('services');
    server.put('services', makeService('ns1', 'svc-lost'));
    await waitFor(() => lines.includes('upsert service ns1/svc-lost'), 'the periodic relist');
    expect(lines).toEqual(['upsert service ns1/svc-lost']);
  });

  it('a stalled watch (open, silent) is ended after the idle timeout, logged, and restarted; events converge', async () => {
    const { server, source, lines, logs } = await setup({ watchIdleMs: 300, backoff: { initialMs: 100, maxMs: 100, jitter: 0 } });
    lines.length = 0;
    server.stall('services');
    server.put('services', makeService('ns1', 'svc-stalled'));
    await waitFor(() => logs.some((l) => l.message.includes('list/watch of services failed: watch stalled')), 'the stall detected');
    expect(logs.find((l) => l.message.includes('of services failed: watch stalled'))!.level).toBe('warn');
    await waitFor(() => !source.health().ok && (source.health().reason ?? '').includes('services: watch stalled (no data for 300 ms)'), 'unhealthy for the stall');
    expect(lines).toEqual([]);
    const watches = requestsFor(server, paths.services!, true).length;
    server.unstall('services');
    await waitFor(() => lines.includes('upsert service ns1/svc-stalled'), 'the event after the restart');
    expect(requestsFor(server, paths.services!, true).length).toBeGreaterThan(watches);
    await waitFor(() => source.health().ok, 'healthy');
    expect(lines).toEqual(['upsert service ns1/svc-stalled']);
  });

  it('asks the server for bookmarks and a watch timeout', async () => {
    const { server } = await setup({ watchTimeoutSeconds: 42 });
    const q = new URLSearchParams(requestsFor(server, paths.services!, true)[0]!.query);
    expect([q.get('allowWatchBookmarks'), q.get('timeoutSeconds')]).toEqual(['true', '42']);
  });

  it('a paginated list (limit/continue) delivers every object', async () => {
    const { server, lines } = await setup({ listPageSize: 3 }, (s) => {
      seed(s);
      for (let i = 2; i <= 7; i++) s.put('services', makeService('ns1', `svc${i}`));
    });
    expect(lines.filter((l) => l.startsWith('upsert service')).sort()).toEqual([1, 2, 3, 4, 5, 6, 7].map((i) => `upsert service ns1/svc${i}`));
    const lists = requestsFor(server, paths.services!, false).map((r) => new URLSearchParams(r.query));
    expect(lists.map((q) => [q.get('limit'), q.has('continue')])).toEqual([['3', false], ['3', true], ['3', true]]);
  });
});

describe('KubeSource start-up gives up within startTimeoutMs with a clear error', () => {
  it.each<[string, (s: FakeApiServer) => void, RegExp[]]>([
    ['the API is unreachable', (s) => { seed(s); s.down(); }, [/services: .*ECONNRESET|services: .*socket hang up/, /endpointslices: /, /node: /]],
    ['every list is 403', (s) => { seed(s); s.fail({ status: 403 }); }, [/services: 403 Forbidden/, /endpointslices: 403 Forbidden/, /node: 403 Forbidden/, /ipvsproxyconfig: 403 Forbidden/]],
    ['EndpointSlices are forbidden', (s) => { seed(s); s.fail({ resource: 'endpointslices', status: 403 }); }, [/: endpointslices: 403 Forbidden[^;]*$/]],
    ['lists never answer', (s) => { seed(s); s.fail({ resource: 'services', status: 0 }); }, [/: services: no answer yet$/]],
  ])('when %s', async (_what, before, reasons) => {
    const { source, logs } = await setup({ startTimeoutMs: 400 }, before, false);
    const started = source.start(() => undefined);
    await expect(started).rejects.toThrow(/did not answer every first list within 0.4 s/);
    const message = await started.catch((e: Error) => e.message);
    for (const r of reasons) expect(message).toMatch(r);
    expect(source.health()).toMatchObject({ ok: false, reason: 'stopped' });
    if (_what === 'every list is 403') expect(logs.filter((l) => l.level === 'error').length).toBeGreaterThanOrEqual(4);
  });

  it('an unreachable address (connection refused) rejects too', async () => {
    const server = await FakeApiServer.start();
    const kc = clientFor(server);
    await server.close(); // nothing listens there any more
    const source = new KubeSource({ client: kc, nodeName: NODE, backoff: fast, startTimeoutMs: 300 });
    await expect(source.start(() => undefined)).rejects.toThrow(/services: .*ECONNREFUSED/);
  });
});

describe('listOnce', () => {
  it('lists everything once, across pages, with the config validated', async () => {
    const server = await FakeApiServer.start();
    h = { server, source: new KubeSource({ client: clientFor(server), nodeName: NODE }), lines: [], logs: [] };
    seed(server);
    server.put('services', makeService('ns2', 'svc2'));
    server.put('nodes', makeNode((n) => { n.metadata!.name = 'node-b'; }));
    server.put('ipvsproxyconfigs', { metadata: { name: 'default' }, spec: { defaultScheduler: 'lc' } });
    const r = await listOnce(clientFor(server), NODE, { pageSize: 1 });
    expect(r.events.map(line).sort()).toEqual(['upsert config lc', 'upsert endpointslice ns1/svc1-a', 'upsert node node-a', 'upsert service ns1/svc1', 'upsert service ns2/svc2']);
    expect(r.problems).toEqual([]);
  });

  it.each<[string, (s: FakeApiServer) => Promise<void> | void, RegExp]>([
    ['forbidden', (s) => s.fail({ resource: 'endpointslices', status: 403 }), /^listing endpointslices from http:\/\/127\.0\.0\.1:\d+ failed: 403 Forbidden.*check the RBAC rules/],
    ['unauthorized', (s) => s.fail({ status: 401 }), /failed: 401 Unauthorized.*credentials refused/],
    ['a 500', (s) => s.fail({ resource: 'services', status: 500 }), /^listing services .* failed: 500 Internal Server Error/],
    ['unreachable', (s) => s.close(), /failed: .*ECONNREFUSED/],
    // The message names what is still listed: the hanging node, and on a busy machine lists that
    // had not ended within the 0.3 s either (seen under load: all four).
    ['hanging', (s) => s.fail({ resource: 'nodes', status: 0 }), /did not answer within 0.3 s \(still listing (?:[a-z]+, )*node(?:, [a-z]+)*\)$/],
  ])('rejects with a clear message when %s', async (what, fault, message) => {
    const server = await FakeApiServer.start();
    h = { server, source: new KubeSource({ client: clientFor(server), nodeName: NODE }), lines: [], logs: [] };
    seed(server);
    const kc = clientFor(server);
    await fault(server);
    // Only the hanging server is about the deadline; the others answer at once, so their deadline
    // stays far away (0.3 s was missed on a busy machine before the refusal arrived).
    await expect(listOnce(kc, NODE, { timeoutMs: what === 'hanging' ? 300 : 30_000 })).rejects.toThrow(message);
  });

  it('a CRD not installed means no config; an invalid config is a problem', async () => {
    const server = await FakeApiServer.start({ notServed: ['ipvsproxyconfigs'] });
    h = { server, source: new KubeSource({ client: clientFor(server), nodeName: NODE }), lines: [], logs: [] };
    seed(server);
    expect((await listOnce(clientFor(server), NODE)).events.map(line).sort()).toEqual(['upsert endpointslice ns1/svc1-a', 'upsert node node-a', 'upsert service ns1/svc1']);
    const other = await FakeApiServer.start();
    try {
      other.put('ipvsproxyconfigs', { metadata: { name: 'default' }, spec: { masqueradeBit: 77 } });
      const r = await listOnce(clientFor(other), NODE);
      expect(r.events).toEqual([]);
      expect(r.problems).toEqual([expect.objectContaining({ reason: 'InvalidConfig', message: expect.stringContaining('masqueradeBit') })]);
    } finally {
      await other.close();
    }
  });
});
