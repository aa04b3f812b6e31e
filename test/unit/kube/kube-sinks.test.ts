// KubeEventSink and KubeStatusSink through the operator's API client (src/kube/client.ts) against the fake API
// server, and the informer backoff schedule.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { crdSchema, makeAjv, toJsonSchema } from '../../../src/config/schema.js';
import { readCrd } from '../../../src/config/load.js';
import { KubeEventSink } from '../../../src/kube/events.js';
import { backoffDelay, defaultBackoff } from '../../../src/kube/informer.js';
import { KubeStatusSink } from '../../../src/kube/status.js';
import type { NodeStatus, ServiceRef } from '../../../src/source/types.js';
import { FakeApiServer, clientFor } from '../../support/fake-apiserver.js';
import { NODE } from '../../support/fixtures.js';

let server: FakeApiServer;
beforeEach(async () => { server = await FakeApiServer.start(); });
afterEach(async () => { await server.close(); });

const unknownScheduler = { service: 'ns1/svc1', reason: 'UnknownScheduler', message: 'scheduler "foo" is not known; using rr' };
const badOptions = { service: 'ns1/svc2', reason: 'InvalidSchedulerOptions', message: 'options.weights: must be object' };
const refs = new Map<string, ServiceRef>([['ns1/svc1', { namespace: 'ns1', name: 'svc1', uid: 'uid-svc1' }]]);
const posted = () => server.list('events').map((e) => `${String(e.reason)} ${(e.involvedObject as { name: string }).name}`);

describe('KubeEventSink', () => {
  it('posts each problem once however many syncs report it', async () => {
    const sink = new KubeEventSink({ client: clientFor(server), nodeName: NODE });
    for (let i = 0; i < 10; i++) await sink.report([unknownScheduler, badOptions, unknownScheduler], refs);
    expect(posted().sort()).toEqual(['InvalidSchedulerOptions svc2', 'UnknownScheduler svc1']);
    const ev = server.list('events').find((e) => e.reason === 'UnknownScheduler')!;
    expect(ev).toMatchObject({
      metadata: { namespace: 'ns1' }, type: 'Warning', message: unknownScheduler.message, count: 1,
      involvedObject: { apiVersion: 'v1', kind: 'Service', namespace: 'ns1', name: 'svc1', uid: 'uid-svc1' },
      source: { component: 'ipvs-operator', host: NODE }, reportingComponent: 'ipvs-operator', reportingInstance: NODE,
    });
    expect(typeof ev.firstTimestamp).toBe('string');
  });

  it('posts again a problem that went away and came back, and a changed message', async () => {
    const sink = new KubeEventSink({ client: clientFor(server), nodeName: NODE });
    await sink.report([unknownScheduler], refs);
    await sink.report([], refs);
    await sink.report([unknownScheduler], refs);
    await sink.report([{ ...unknownScheduler, message: 'scheduler "bar" is not known; using rr' }], refs);
    expect(posted()).toEqual(['UnknownScheduler svc1', 'UnknownScheduler svc1', 'UnknownScheduler svc1']);
    expect(new Set(server.list('events').map((e) => e.metadata.name)).size).toBe(3);
  });

  it('puts configuration problems on the IPVSProxyConfig, in the default namespace', async () => {
    const sink = new KubeEventSink({ client: clientFor(server), nodeName: NODE });
    await sink.report([{ service: '', reason: 'UnknownScheduler', message: 'defaultScheduler "x" is not known' }], new Map());
    expect(server.list('events')[0]).toMatchObject({ metadata: { namespace: 'default' },
      involvedObject: { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', name: 'default' } });
  });

  it('retries at the next report what the API refused, logging each kind of failure once, and never throws', async () => {
    const logged: string[] = [];
    const sink = new KubeEventSink({ client: clientFor(server), nodeName: NODE, log: (l, m) => logged.push(`${l} ${m}`) });
    server.down();
    await sink.report([unknownScheduler, badOptions], refs);
    await sink.report([unknownScheduler, badOptions], refs);
    server.up();
    server.fail({ resource: 'events', status: 403 });
    await sink.report([unknownScheduler], refs);
    await sink.report([unknownScheduler], refs);
    expect(logged.filter((l) => !l.startsWith('debug'))).toEqual([
      expect.stringMatching(/^warn posting an Event failed: .*ECONNRESET|^warn posting an Event failed: .*socket hang up/),
      expect.stringMatching(/^warn posting an Event failed: 403 Forbidden: .*; will retry$/),
    ]);
    // A report stops at its first failure: one attempt per report, not one per problem.
    expect(logged).toHaveLength(4);
    server.clearFaults();
    await sink.report([unknownScheduler], refs);
    await sink.report([unknownScheduler], refs);
    expect(posted()).toEqual(['UnknownScheduler svc1']);
    expect(logged.at(-1)).toBe('info posting an Event works again');
  });

  it('gives up on a post the API never answers after timeoutMs', async () => {
    const logged: string[] = [];
    const sink = new KubeEventSink({ client: clientFor(server), nodeName: NODE, timeoutMs: 200, log: (l, m) => logged.push(`${l} ${m}`) });
    server.fail({ resource: 'events', status: 0 });
    await sink.report([unknownScheduler], refs);
    expect(logged).toEqual(['warn posting an Event failed: the Kubernetes API did not answer within 0.2 s; will retry']);
  });
});

const status = (n: number): NodeStatus => ({
  kernelIPVSVersion: '1.2.1', schedulersAvailable: ['lc', 'rr', 'wrr'], virtualServers: n, realServers: 2 * n,
  lastSyncTime: `2025-01-02T03:04:0${n % 10}.000Z`, lastSyncDurationSeconds: 0.004, lastError: '', problems: 0,
  consecutiveFailedSyncs: 0, healthy: true, healthReason: '',
});

describe('KubeStatusSink', () => {
  const validStatus = makeAjv().compile(toJsonSchema(crdSchema(readCrd('ipvsnodestates'))) as object);

  it('creates the IPVSNodeState named after the node, then only updates its status', async () => {
    const sink = new KubeStatusSink({ client: clientFor(server), nodeName: NODE });
    await sink.write(status(1));
    await sink.write(status(2));
    const obj = server.get('ipvsnodestates', NODE)!;
    expect(obj).toMatchObject({ apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSNodeState', metadata: { name: NODE }, status: status(2) });
    expect(validStatus(obj)).toBe(true);
    const calls = server.requests.filter((r) => r.path.includes('ipvsnodestates')).map((r) => `${r.method} ${r.path.replace(/.*ipvsnodestates/, '')}`);
    expect(calls).toEqual(['GET /node-a', 'POST ', 'PUT /node-a/status', 'PUT /node-a/status']);
  });

  it('uses an existing object, and recreates it when it was deleted meanwhile', async () => {
    server.put('ipvsnodestates', { metadata: { name: NODE }, spec: {} });
    const sink = new KubeStatusSink({ client: clientFor(server), nodeName: NODE });
    await sink.write(status(1));
    server.remove('ipvsnodestates', NODE);
    await sink.write(status(3));
    expect(server.get('ipvsnodestates', NODE)?.status).toEqual(status(3));
  });

  it('re-reads after a conflict (someone else changed the object)', async () => {
    const sink = new KubeStatusSink({ client: clientFor(server), nodeName: NODE });
    await sink.write(status(1));
    const o = server.get('ipvsnodestates', NODE)!;
    server.put('ipvsnodestates', { ...o, metadata: { ...o.metadata, labels: { a: 'b' } } });
    const before = server.requests.length;
    await sink.write(status(4));
    expect(server.get('ipvsnodestates', NODE)?.status).toEqual(status(4));
    expect(server.requests.slice(before).map((r) => r.method)).toEqual(['PUT', 'GET', 'PUT']);
  });

  it('coalesces writes that come faster than the API answers: the newest wins', async () => {
    const sink = new KubeStatusSink({ client: clientFor(server), nodeName: NODE });
    await Promise.all([1, 2, 3, 4, 5].map((n) => sink.write(status(n))));
    expect(server.get('ipvsnodestates', NODE)?.status).toEqual(status(5));
    expect(server.requests.filter((r) => r.method === 'PUT').length).toBeLessThan(5);
  });

  it('never rejects: an unreachable, refusing or silent API is logged once per kind, and the next write after it works', async () => {
    const logged: string[] = [];
    const sink = new KubeStatusSink({ client: clientFor(server), nodeName: NODE, timeoutMs: 200, log: (l, m) => logged.push(`${l} ${m}`) });
    server.down();
    expect(await sink.tryWrite(status(1))).toBe(false);
    await sink.write(status(1));
    server.up();
    server.fail({ resource: 'ipvsnodestates', status: 500 });
    expect(await sink.tryWrite(status(2))).toBe(false);
    await sink.write(status(2));
    server.clearFaults();
    server.fail({ resource: 'ipvsnodestates', status: 0 });
    expect(await sink.tryWrite(status(3))).toBe(false);
    expect(logged.filter((l) => !l.startsWith('debug'))).toEqual([
      expect.stringMatching(/^warn writing the IPVSNodeState status failed: /),
      expect.stringMatching(/^warn writing the IPVSNodeState status failed: 500 Internal Server Error/),
      'warn writing the IPVSNodeState status failed: the Kubernetes API did not answer within 0.2 s; will retry',
    ]);
    expect(logged.filter((l) => l.startsWith('debug'))).toHaveLength(2);
    server.clearFaults();
    expect(await sink.tryWrite(status(4))).toBe(true);
    expect(server.get('ipvsnodestates', NODE)?.status).toEqual(status(4));
    expect(logged.at(-1)).toBe('info writing the IPVSNodeState status works again');
  });
});

describe('informer backoff', () => {
  it('doubles from 1 s to 30 s, with jitter of ±10 %', () => {
    const exact = { ...defaultBackoff, jitter: 0 };
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((n) => backoffDelay(exact, n))).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(backoffDelay(defaultBackoff, 0, () => 0)).toBe(900);
    expect(backoffDelay(defaultBackoff, 0, () => 1)).toBe(1100);
  });
});
