// /metrics with kube-proxy's meanings: the kernel's IPVS counters exported as counters, the sync
// and network-programming histograms with kube-proxy's bucket layouts (pkg/proxy/metrics).
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';
import { Metrics, PROGRAMMING_BUCKETS, SYNC_BUCKETS } from '../../../src/metrics/metrics.js';

describe('Metrics', () => {
  it('uses kube-proxy\'s bucket layouts', () => {
    expect(SYNC_BUCKETS[0]).toBe(0.001);
    expect(SYNC_BUCKETS.at(-1)).toBe(16.384);
    expect(SYNC_BUCKETS).toHaveLength(15);
    expect(PROGRAMMING_BUCKETS.slice(0, 5)).toEqual([0, 0.25, 0.5, 1, 2]);
    expect(PROGRAMMING_BUCKETS.slice(60, 64)).toEqual([58, 59, 60, 65]);
    expect(PROGRAMMING_BUCKETS.slice(-8)).toEqual([115, 120, 150, 180, 210, 240, 270, 300]);
    expect(PROGRAMMING_BUCKETS).toHaveLength(1 + 2 + 59 + 12 + 7);
  });

  it('exports the kernel\'s per-server counters as Prometheus counters, only for virtual servers with a Service', async () => {
    const ipvs = new FakeIpvs();
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
    await ipvs.addVirtualServer(vs);
    await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.1.3', port: 8080 }));
    await ipvs.addVirtualServer(makeVirtualServer({ family: 'IPv4', address: '10.99.0.1', port: 80, scheduler: 'rr' }));
    const m = new Metrics();
    m.watchKernel(ipvs, () => new Map([['TCP 10.200.1.10:80', { namespace: 'default', name: 'web', portName: 'http' }]]));
    const text = await m.render(0, 0);
    expect(text).toContain('# TYPE ipvsop_virtual_server_connections_total counter');
    expect(text).toContain('# TYPE ipvsop_real_server_bytes_in_total counter');
    expect(text).toContain('# TYPE ipvsop_real_server_active_connections gauge');
    expect(text).toMatch(/^ipvsop_real_server_active_connections\{namespace="default",service="web",port="http",virtual_server="TCP 10.200.1.10:80",endpoint="10.10.1.3:8080"\} 0$/m);
    expect(text).not.toContain('10.99.0.1');
    expect(text).toContain('# TYPE ipvsop_sync_proxy_rules_endpoint_changes_total counter');
    expect(text).toContain('ipvsop_network_programming_duration_seconds_bucket{le="0.25"} 0');
  });

  it('serves every scrape from one IPVS snapshot at most snapshotMs old, however many scrapers; a failed read is retried', async () => {
    const ipvs = new FakeIpvs();
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
    await ipvs.addVirtualServer(vs);
    await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.1.3', port: 8080 }));
    let dumps = 0;
    let fail = false;
    const list = ipvs.listVirtualServers.bind(ipvs);
    ipvs.listVirtualServers = async () => { dumps++; if (fail) throw new Error('socket down'); return list(); };
    let t = 0;
    const m = new Metrics();
    m.watchKernel(ipvs, () => new Map([['TCP 10.200.1.10:80', { namespace: 'default', name: 'web', portName: 'http' }]]), { snapshotMs: 5000, now: () => t });
    const scrape = () => m.render(t, 0);
    await Promise.all(Array.from({ length: 8 }, scrape));
    for (let i = 0; i < 8; i++) await scrape();
    expect(dumps).toBe(1);
    t = 4999;
    await Promise.all(Array.from({ length: 8 }, scrape));
    expect(dumps).toBe(1);
    t = 5000;
    await Promise.all(Array.from({ length: 8 }, scrape));
    expect(dumps).toBe(2);
    fail = true;
    t = 10_000;
    await Promise.all(Array.from({ length: 8 }, () => scrape().catch(() => 'failed')));
    expect(dumps).toBe(3);
    fail = false;
    const text = await scrape();
    expect(dumps).toBe(4);
    expect(text).toMatch(/endpoint="10.10.1.3:8080"\} 0$/m);
  });

  it('writes the IPVS series in Prometheus text format, labels escaped, and yields to the event loop while it does', async () => {
    const ipvs = new FakeIpvs();
    const origins = new Map<string, { namespace: string; name: string; portName: string }>();
    for (let i = 0; i < 600; i++) {
      const vs = makeVirtualServer({ family: 'IPv4', address: `10.200.${i >> 8}.${i & 255}`, port: 80, scheduler: 'rr' });
      await ipvs.addVirtualServer(vs);
      await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.1.3', port: 8080 }));
      origins.set(`TCP 10.200.${i >> 8}.${i & 255}:80`, { namespace: 'default', name: i === 0 ? 'we"ird\\name' : `svc-${i}`, portName: 'http' });
    }
    const m = new Metrics();
    m.watchKernel(ipvs, () => origins);
    let ticks = 0;
    const ticker = setInterval(() => { ticks++; }, 0);
    const text = await m.render(0, 0);
    clearInterval(ticker);
    expect(ticks).toBeGreaterThan(0);
    expect(text.match(/^ipvsop_real_server_active_connections\{/gm)).toHaveLength(600);
    expect(text).toContain('service="we\\"ird\\\\name"');
    expect(text.split('\n').filter((l) => l.startsWith('# TYPE ipvsop_real_server_active_connections gauge'))).toHaveLength(1);
  });
});
