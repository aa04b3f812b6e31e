// The operator's HTTP endpoints: /healthz and /readyz (health.ts says when each fails),
// /metrics (Prometheus), /origins
// (virtual server key -> Service, read by `ipvs-operator status`).
import { type Server, createServer } from 'node:http';
import type { HealthVerdict } from './health.js';
import type { Metrics } from './metrics.js';

/** Starts the server on host:port; resolves with it once listening. */
export function serveHttp(addr: string, health: () => HealthVerdict, metrics: Metrics, origins: () => unknown = () => ({})): Promise<Server> {
  const [host, portText] = addr.includes(':') ? [addr.slice(0, addr.lastIndexOf(':')), addr.slice(addr.lastIndexOf(':') + 1)] : ['0.0.0.0', addr];
  const server = createServer((req, res) => {
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
      metrics.registry.metrics().then(
        (text) => reply(200, text, metrics.registry.contentType),
        (e: unknown) => reply(500, `metrics: ${(e as Error).message}\n`),
      );
    } else {
      reply(404, 'not found\n');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(portText), host || '0.0.0.0', () => resolve(server));
  });
}
