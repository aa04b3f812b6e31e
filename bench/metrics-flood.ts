// /healthz latency while 8 scrapers hit /metrics in a loop, on a node with 5 000 Services (a fake
// IPVS table of 5 000 virtual servers x 3 real servers, so only the operator's own work counts),
// with /metrics served from one snapshot and one render per 5 s. Prints the figures:
// `node dist/bench/metrics-flood.js`.
import { spawn } from 'node:child_process';
import type { Server } from 'node:http';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { makeRealServer, makeVirtualServer, virtualServerKey } from '../src/model/ipvs.js';
import { serveHttp } from '../src/healthcheck/http.js';
import { KERNEL_SNAPSHOT_MS, Metrics } from '../src/metrics/metrics.js';

const SERVICES = 5000;
const SCRAPERS = 8;
const SECONDS = 6;

async function table(): Promise<{ ipvs: FakeIpvs; origins: Map<string, { namespace: string; name: string; portName: string }> }> {
  const ipvs = new FakeIpvs();
  const origins = new Map<string, { namespace: string; name: string; portName: string }>();
  for (let i = 0; i < SERVICES; i++) {
    const vs = makeVirtualServer({ family: 'IPv4', address: `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, port: 80, scheduler: 'rr' });
    await ipvs.addVirtualServer(vs);
    for (let r = 1; r <= 3; r++) await ipvs.addRealServer(vs, makeRealServer({ address: `10.10.${r}.${i & 255}`, port: 8080 + (i >> 8) }));
    origins.set(virtualServerKey(vs), { namespace: 'default', name: `svc-${i}`, portName: 'http' });
  }
  return { ipvs, origins };
}

async function run(snapshotMs: number): Promise<string> {
  const { ipvs, origins } = await table();
  const metrics = new Metrics();
  metrics.watchKernel(ipvs, () => origins, { snapshotMs });
  const server: Server = await serveHttp('127.0.0.1:0', () => ({ healthy: true, ready: true, reason: '' }), metrics);
  const port = (server.address() as { port: number }).port;
  const end = Date.now() + SECONDS * 1000;
  // The scrapers are another process, as Prometheus is: their own parsing must not load this loop.
  const scrapers = spawn(process.execPath, ['--input-type=module', '-e', `
    let n = 0; const end = Date.now() + ${SECONDS * 1000};
    await Promise.all(Array.from({ length: ${SCRAPERS} }, async () => {
      while (Date.now() < end) { await (await fetch('http://127.0.0.1:${port}/metrics')).arrayBuffer(); n++; }
    }));
    console.log(n);`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  scrapers.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  const scraped = new Promise<number>((r) => scrapers.once('exit', () => r(Number(out.trim()))));
  const lat: number[] = [];
  const prober = async () => {
    while (Date.now() < end) {
      const t0 = performance.now();
      await (await fetch(`http://127.0.0.1:${port}/healthz`)).text();
      lat.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await prober();
  const scrapes = await scraped;
  await new Promise<void>((r) => server.close(() => r()));
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.ceil(p * lat.length) - 1)]!.toFixed(1);
  return `snapshot ${String(snapshotMs).padStart(4)} ms: ${scrapes} scrapes in ${SECONDS} s; /healthz p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms (${lat.length} probes)`;
}

console.log(`/healthz under ${SCRAPERS} /metrics scrapers in a loop, ${SERVICES} Services x 3 real servers (fake IPVS), node ${process.version}`);
console.log(await run(KERNEL_SNAPSHOT_MS));
