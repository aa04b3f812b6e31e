// The operator's HTTP endpoints: /healthz and /readyz (health.ts says when each fails),
// /metrics (Prometheus), /origins
// (virtual server key -> Service, read by `ipvs-operator status`).
import type { Server } from 'node:http';
import { http } from '../util/node-http.js';
import type { HealthVerdict } from './health.js';
import type { Metrics } from '../metrics/metrics.js';
import { parseHostPort } from '../model/host-port.js';

/**
 * Starts the server on `host:port` / `[v6]:port` (parseHostPort; port 0 = any free port, for
 * tests); rejects a bad address.
 */
export function serveHttp(addr: string, health: () => HealthVerdict, metrics: Metrics,
  origins: () => unknown = () => ({})): Promise<Server> {
  const parsed = parseHostPort(addr, { allowPortZero: true });
  if (!parsed.ok) return Promise.reject(new Error(`listen address ${parsed.error}`));
  const { host, port } = parsed.addr;
  let encoded: { text: string; body: Buffer } | undefined;
  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    const reply = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    if (url === '/healthz') {
      const h = health();
      reply(h.healthy ? 200 : 503, h.healthy ? 'ok\n' : `${h.reason}\n`);
    } else if (url === '/readyz') {
      const h = health();
      reply(h.ready ? 200 : 503, h.ready ? 'ok\n' : `${h.reason || 'not synced yet'}\n`);
    } else if (url === '/origins') {
      // Which Service each virtual server key serves (for `ipvs-operator status`).
      reply(200, JSON.stringify(origins()), 'application/json');
    } else if (url === '/metrics') {
      metrics.render().then(
        (text) => {
          // The same text serves every scrape for a while: encode it once, not per scrape.
          if (encoded?.text !== text) encoded = { text, body: Buffer.from(text, 'utf8') };
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(encoded.body);
        },
        (e: unknown) => reply(500, `metrics: ${(e as Error).message}\n`),
      );
    } else {
      reply(404, 'not found\n');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
