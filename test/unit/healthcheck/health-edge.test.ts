// The Operator's afterSync hook with kube-proxy's health checking (health-edge.ts) over FakeIpvs
// and real HTTP listeners on 127.0.0.1 (ephemeral ports): a sync opens the health-check NodePort
// and the proxy health server, endpoint changes reach the answers, a port in use becomes an
// Event-bound problem of its Service. Address ranges: fixtures.ts; this node is 127.0.0.1 here.
import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer } from 'node:net';
import type { V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { healthEdge } from '../../../src/healthcheck/health-edge.js';
import { ProxierHealthServer, ServiceHealthServers } from '../../../src/healthcheck/health-servers.js';
import { memoryLog } from '../../../src/util/log.js';
import { Operator } from '../../../src/sync/operator.js';
import { ProxierHealth } from '../../../src/healthcheck/proxier-health.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import type { Problem } from '../../../src/desired/types.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';
import { freePort } from '../../support/net.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => { while (closers.length) await closers.pop()!(); });

const config: ProxyConfig = { ...defaultProxyConfig, nodePortAddresses: ['127.0.0.0/8'], healthzBindAddress: '127.0.0.1:0' };
const node = makeNode((n) => { n.status!.addresses = [{ type: 'InternalIP', address: '127.0.0.1' }]; });
const lb = (hcPort: number) => makeService('default', 'lb', (s: V1Service) => {
  s.spec!.type = 'LoadBalancer'; s.spec!.externalTrafficPolicy = 'Local'; s.spec!.ports![0]!.nodePort = 30080; s.spec!.healthCheckNodePort = hcPort;
});
const slice = (nodeName: string, rv: string) => makeSlice('default', 'lb', 'lb-1', [{ ip: '10.10.1.3', node: nodeName }, { ip: '10.10.1.4', node: nodeName }],
  (s) => { s.metadata!.resourceVersion = rv; });

function setup() {
  const posted: Problem[][] = [];
  const log = memoryLog();
  const health = new ProxierHealth(60_000);
  const proxier = new ProxierHealthServer(health, log);
  const services = new ServiceHealthServers(() => health.isHealthy(), log, NODE);
  closers.push(() => services.close(), () => proxier.close());
  const op = new Operator(config, {
    ipvs: new FakeIpvs(), vips: new FakeVipLink(), iptables: new NoIptables(), log, registry: new PluginRegistry(), nodeName: NODE,
    events: { report: async (p) => { posted.push([...p]); } }, status: { write: async () => undefined },
    clock: { now: () => Date.now(), setTimeout: () => ({}), clearTimeout: () => undefined },
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
    afterSync: healthEdge({ health, proxier, services }),
  });
  return { op, proxier, posted };
}

const get = async (url: string) => { const r = await fetch(url); return { status: r.status, body: await r.text() }; };

describe('Operator + healthEdge', () => {
  it('serves the health-check NodePort from the desired state and the proxy health server after a sync', async () => {
    const hc = await freePort();
    const { op, proxier } = setup();
    op.handle({ kind: 'node', type: 'upsert', object: node });
    op.handle({ kind: 'service', type: 'upsert', object: lb(hc) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice(NODE, '1') });
    await op.sync();
    const up = await get(`http://127.0.0.1:${hc}/`);
    expect([up.status, JSON.parse(up.body)]).toEqual([200, { service: { namespace: 'default', name: 'lb' }, localEndpoints: 2, serviceProxyHealthy: true }]);
    expect((await get(`http://127.0.0.1:${proxier.port}/healthz`)).status).toBe(200);

    op.handle({ kind: 'endpointslice', type: 'upsert', object: slice('node-b', '2') });
    await op.sync();
    const down = await get(`http://127.0.0.1:${hc}/`);
    expect([down.status, JSON.parse(down.body).localEndpoints]).toEqual([503, 0]);
  });

  it('a health-check port in use is a problem of its Service, reported with the others, and opened once freed', async () => {
    const hc = await freePort();
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(hc, '127.0.0.1', () => r()));
    const { op, posted } = setup();
    op.handle({ kind: 'node', type: 'upsert', object: node });
    op.handle({ kind: 'service', type: 'upsert', object: lb(hc) });
    await op.sync();
    expect(posted.at(-1)!.map((p) => `${p.service} ${p.reason}`)).toEqual(['default/lb FailedToStartServiceHealthcheck']);
    await new Promise<void>((r) => blocker.close(() => r()));
    await op.sync({ periodic: true, retry: false });
    expect(posted.at(-1)).toEqual([]);
    expect((await get(`http://127.0.0.1:${hc}/`)).status).toBe(503);
  });
});
