// The operator's HTTP endpoints: /healthz (the process syncs: the last sync is recent or the
// operator is still starting), /readyz (a sync has succeeded), /metrics (Prometheus), /origins
// (virtual server key -> Service, read by `ipvs-operator status`).
import { type Server, createServer } from 'node:http';
import type { Metrics } from './metrics.js';

export interface HealthView {
  /** True after the first successful sync. */
  ready(): boolean;
  /** Milliseconds since the last sync ended, or undefined before any. */
  sinceLastSyncMs(): number | undefined;
  /** The periodic sync interval; healthz fails when no sync ended within twice it (plus a minute). */
  syncPeriodMs(): number;
}

/** Starts the server on host:port; resolves with it once listening. */
export function serveHttp(addr: string, health: HealthView, metrics: Metrics, origins: () => unknown = () => ({})): Promise<Server> {
  const [host, portText] = addr.includes(':') ? [addr.slice(0, addr.lastIndexOf(':')), addr.slice(addr.lastIndexOf(':') + 1)] : ['0.0.0.0', addr];
  const server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    const reply = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(code, { 'content-type': type });
      res.end(body);
    };
    if (url === '/healthz') {
      const since = health.sinceLastSyncMs();
      const stale = since !== undefined && since > 2 * health.syncPeriodMs() + 60_000;
      reply(stale ? 503 : 200, stale ? `no sync for ${Math.round(since / 1000)} s\n` : 'ok\n');
    } else if (url === '/readyz') {
      reply(health.ready() ? 200 : 503, health.ready() ? 'ok\n' : 'not synced yet\n');
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
