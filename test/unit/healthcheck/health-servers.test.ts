// kube-proxy's health checking over real HTTP on 127.0.0.1 (ephemeral ports): the health-check
// NodePort listeners (ServiceHealthServers) and the proxy health server (/healthz, /livez), with
// ProxierHealth's rules driven by an injected clock.
import { afterEach, describe, expect, it } from '@jest/globals';
import { type Server, connect, createServer } from 'node:net';
import type { V1Node } from '@kubernetes/client-node';
import type { WantedHealthServer } from '../../../src/desired/health-checks.js';
import { ProxierHealthServer, ServiceHealthServers } from '../../../src/healthcheck/health-servers.js';
import { ProxierHealth, formatGoTime, nodeEligible } from '../../../src/healthcheck/proxier-health.js';
import { freePort } from '../../support/net.js';

const quiet = () => undefined;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => { while (closers.length) await closers.pop()!(); });

async function get(port: number, path = '/') {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, type: res.headers.get('content-type'), nosniff: res.headers.get('x-content-type-options'), body: await res.text() };
}

/** A new TCP connection's fate: 'connected', or the error code (ECONNREFUSED when nothing listens). */
const refused = (port: number) => new Promise<string | undefined>((resolve) => {
  const c = connect(port, '127.0.0.1', () => { c.destroy(); resolve('connected'); });
  c.on('error', (e: NodeJS.ErrnoException) => resolve(e.code));
});

describe('ServiceHealthServers (health-check NodePorts)', () => {
  const svc = (localEndpoints: number, name = 'web'): WantedHealthServer => ({ namespace: 'ns1', name, localEndpoints });

  it('answers 200 with kube-proxy\'s body and headers while local endpoints exist, 503 at 0 or when the proxy is unhealthy', async () => {
    let proxyHealthy = true;
    const servers = new ServiceHealthServers(() => proxyHealthy, quiet, 'node-a');
    closers.push(() => servers.close());
    const port = await freePort();
    expect(await servers.sync(new Map([[port, svc(2)]]), ['127.0.0.1'])).toEqual([]);
    expect(await get(port, '/any/path')).toEqual({ status: 200, type: 'application/json', nosniff: 'nosniff',
      body: '{\n\t"service": {\n\t\t"namespace": "ns1",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}' });
    expect(await servers.sync(new Map([[port, svc(0)]]), ['127.0.0.1'])).toEqual([]);
    const zero = await get(port);
    expect([zero.status, JSON.parse(zero.body)]).toEqual([503, { service: { namespace: 'ns1', name: 'web' }, localEndpoints: 0, serviceProxyHealthy: true }]);
    await servers.sync(new Map([[port, svc(3)]]), ['127.0.0.1']);
    proxyHealthy = false;
    const sick = await get(port);
    expect([sick.status, JSON.parse(sick.body).serviceProxyHealthy, JSON.parse(sick.body).localEndpoints]).toEqual([503, false, 3]);
  });

  it('closes a port no longer wanted, and reopens one that moved to another Service', async () => {
    const servers = new ServiceHealthServers(() => true, quiet, 'node-a');
    closers.push(() => servers.close());
    const [a, b] = [await freePort(), await freePort()];
    await servers.sync(new Map([[a, svc(1)], [b, svc(1, 'api')]]), ['127.0.0.1']);
    await servers.sync(new Map([[b, svc(1, 'other')]]), ['127.0.0.1']);
    expect(await refused(a)).toBe('ECONNREFUSED');
    expect(JSON.parse((await get(b)).body).service.name).toBe('other');
    expect([...servers.ports().keys()]).toEqual([b]);
  });

  it('a port in use is a problem of its Service, not a throw; the next sync after it is freed opens it', async () => {
    const port = await freePort();
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', () => r()));
    const logged: string[] = [];
    const servers = new ServiceHealthServers(() => true, (level, msg) => { logged.push(`${level} ${msg}`); }, 'node-a');
    closers.push(() => servers.close());
    const problems = await servers.sync(new Map([[port, svc(1)]]), ['127.0.0.1']);
    expect(problems.map((p) => [p.service, p.reason])).toEqual([['ns1/web', 'FailedToStartServiceHealthcheck']]);
    expect(problems[0]!.message).toMatch(new RegExp(`^node node-a failed to start healthcheck "ns1/web" on port ${port}: .*EADDRINUSE`));
    expect(logged).toContain('warn failed to start health check; retrying next sync');
    expect(servers.ports().size).toBe(0);
    await new Promise<void>((r) => blocker.close(() => r()));
    expect(await servers.sync(new Map([[port, svc(1)]]), ['127.0.0.1'])).toEqual([]);
    expect((await get(port)).status).toBe(200);
  });
});

describe('ProxierHealth (kube-proxy proxier_health.go)', () => {
  it.each<[string, number | undefined, number | undefined, string]>([
    ['zero time', undefined, undefined, '0001-01-01 00:00:00 +0000 UTC'],
    ['milliseconds, trailing zeros trimmed', Date.UTC(2026, 10, 23, 8, 30, 0, 120), undefined, '2026-11-23 08:30:00.12 +0000 UTC'],
    ['whole second: no fraction', Date.UTC(2026, 10, 23, 8, 30, 0, 0), undefined, '2026-11-23 08:30:00 +0000 UTC'],
    ['monotonic suffix', Date.UTC(2026, 10, 23, 8, 30, 1, 500), Date.UTC(2026, 10, 23, 8, 30, 0, 0), '2026-11-23 08:30:01.5 +0000 UTC m=+1.500000000'],
  ])('formatGoTime: %s', (_n, ms, start, expected) => {
    expect(formatGoTime(ms, start)).toBe(expected);
  });

  it.each<[string, V1Node | undefined, boolean]>([
    ['a plain Node', { metadata: { name: 'n' } }, true],
    ['being deleted', { metadata: { name: 'n', deletionTimestamp: new Date(0) } }, false],
    ['tainted ToBeDeletedByClusterAutoscaler', { metadata: { name: 'n' }, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } }, false],
    ['another taint', { metadata: { name: 'n' }, spec: { taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] } }, true],
    ['deleted (gone)', undefined, false],
  ])('nodeEligible: %s', (_n, node, expected) => {
    expect(nodeEligible(node)).toBe(expected);
  });

  it('healthy until a queued update is older than the timeout; a sync clears it', () => {
    let now = 1_000_000;
    const h = new ProxierHealth(60_000, () => now);
    expect(h.isHealthy()).toBe(true);
    h.queuedUpdate();
    now += 59_999;
    h.queuedUpdate(); // the oldest counts
    expect(h.isHealthy()).toBe(true);
    now += 1;
    expect(h.isHealthy()).toBe(false);
    expect(h.healthz().status).toBe(503);
    expect(h.livez().status).toBe(503);
    h.updated();
    expect([h.isHealthy(), h.healthz().status]).toEqual([true, 200]);
  });
});

describe('ProxierHealthServer (/healthz, /livez on healthzBindAddress)', () => {
  it('answers like kube-proxy, /healthz also 503 for a Node being deleted, 404 elsewhere; "" closes it', async () => {
    let now = Date.UTC(2026, 10, 23, 8, 0, 0);
    const health = new ProxierHealth(60_000, () => now);
    const server = new ProxierHealthServer(health, quiet);
    closers.push(() => server.close());
    expect(await server.ensure('127.0.0.1:0')).toBeUndefined();
    const port = server.port;
    const ok = await get(port, '/healthz');
    expect(ok).toEqual({ status: 200, type: 'application/json', nosniff: 'nosniff',
      body: '{"lastUpdated": "2026-11-23 08:00:00 +0000 UTC m=+0.000000000","currentTime": "2026-11-23 08:00:00 +0000 UTC m=+0.000000000", "nodeEligible": true}' });
    expect((await get(port, '/livez')).body).toBe('{"lastUpdated": "2026-11-23 08:00:00 +0000 UTC m=+0.000000000","currentTime": "2026-11-23 08:00:00 +0000 UTC m=+0.000000000"}');
    health.updated();
    health.queuedUpdate();
    now += 61_000;
    const late = await get(port, '/healthz');
    expect([late.status, late.body]).toEqual([503,
      '{"lastUpdated": "2026-11-23 08:00:00 +0000 UTC m=+0.000000000","currentTime": "2026-11-23 08:01:01 +0000 UTC m=+61.000000000", "nodeEligible": true}']);
    health.updated();
    health.syncNode({ metadata: { name: 'node-a' }, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } });
    const draining = await get(port, '/healthz');
    expect([draining.status, JSON.parse(draining.body).nodeEligible]).toEqual([503, false]);
    expect((await get(port, '/livez')).status).toBe(200);
    expect((await get(port, '/metrics')).status).toBe(404);
    expect(await server.ensure('')).toBeUndefined();
    expect(await refused(port)).toBe('ECONNREFUSED');
  });

  it('an address in use or invalid is returned (and logged), not thrown; a later call retries', async () => {
    const port = await freePort();
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', () => r()));
    const server = new ProxierHealthServer(new ProxierHealth(60_000), quiet);
    closers.push(() => server.close());
    expect(await server.ensure(`127.0.0.1:${port}`)).toMatch(/EADDRINUSE/);
    expect(await server.ensure('nonsense')).toMatch(/no :PORT/);
    await new Promise<void>((r) => blocker.close(() => r()));
    expect(await server.ensure(`127.0.0.1:${port}`)).toBeUndefined();
    expect((await get(port, '/healthz')).status).toBe(200);
  });
});
