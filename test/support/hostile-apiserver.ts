// A Kubernetes API server that misbehaves on purpose, for the operator's API edge (issue "Never
// wedged, never crashed"): HTTP on 127.0.0.1, the project's own code. It serves one Service (and
// in the good phase a second one arrives over the watch), its EndpointSlice, the Node and an empty
// IPVSProxyConfig list; the Services resource misbehaves as `mode` says until `mode` is set to
// 'good'. Sockets it holds open on purpose are ended by close().
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';

export type HostileMode =
  | 'good' | 'never-answer' | 'slow-loris' | 'truncated-json' | 'html-200' | 'endless-continue' | 'repeated-continue'
  | 'oversized-line' | 'malformed-lines' | 'malformed-items' | 'gone-410' | 'throttle-429' | 'resets' | 'unavailable-503';

export const HOSTILE_MODES: readonly HostileMode[] = ['never-answer', 'slow-loris', 'truncated-json', 'html-200', 'endless-continue',
  'repeated-continue', 'oversized-line', 'malformed-lines', 'malformed-items', 'gone-410', 'throttle-429', 'resets', 'unavailable-503'];

/** The malformed watch lines of the issue, in order, then a good ADDED of `svc-late`. */
export const MALFORMED_LINES = ['{"type":"BOOKMARK"}', '{"type":"ERROR","object":null}', '{}', '42', '{"type":"ADDED","object":{"kind":"Service"}}',
  '{"type":"ADDED","object":{"metadata":{"namespace":"default"}}}', 'not json at all'];

export function service(name: string, ip: string, rv: string): object {
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { name, namespace: 'default', uid: `uid-${name}`, resourceVersion: rv },
    spec: { type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ipFamilies: ['IPv4'], ports: [{ name: 'http', port: 80, targetPort: 80, protocol: 'TCP' }], selector: { app: name } },
  };
}

function slice(name: string, ip: string): object {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: `${name}-abc`, namespace: 'default', resourceVersion: '5', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4', ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
  };
}

export class HostileApiServer {
  mode: HostileMode = 'good';
  /** Watches of Services whose connection is still open. */
  openServiceWatches = 0;
  /** Requests per path kind, for assertions ("list services", "watch services", ...). */
  readonly counts = new Map<string, number>();
  private readonly held = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Open watches of Services that behave: they hear of `late` when the server turns good. */
  private readonly watchers = new Set<ServerResponse>();

  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(): Promise<HostileApiServer> {
    const server = createServer();
    server.keepAliveTimeout = 1000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const h = new HostileApiServer(server, `http://127.0.0.1:${port}`);
    server.on('connection', (s) => { h.held.add(s); s.on('close', () => h.held.delete(s)); });
    server.on('request', (req, res) => h.serve(req, res));
    return h;
  }

  /** Turns the server good: `late` is created, and the open watches that behave hear of it. */
  behave(): void {
    this.mode = 'good';
    for (const w of this.watchers) w.write(`${JSON.stringify({ type: 'ADDED', object: service('late', '10.96.0.11', '11') })}\n`);
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    for (const s of this.held) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private count(k: string): void {
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  private every(ms: number, f: () => void, res: ServerResponse): void {
    const t = setInterval(f, ms);
    this.timers.add(t);
    res.on('close', () => { clearInterval(t); this.timers.delete(t); });
  }

  private json(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(code, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }

  private serve(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    const watch = url.searchParams.get('watch') === 'true';
    const path = url.pathname;
    req.resume();
    if (req.method !== 'GET') return this.json(res, 201, {});
    const list = (kind: string, items: object[], extra: Record<string, unknown> = {}) =>
      this.json(res, 200, { kind, apiVersion: 'v1', metadata: { resourceVersion: '10', ...extra }, items });
    if (path === '/api/v1/services') {
      this.count(`${watch ? 'watch' : 'list'} services`);
      if (watch) {
        this.openServiceWatches++;
        res.on('close', () => { this.openServiceWatches--; });
      }
      return this.services(url, watch, res, list);
    }
    if (watch) {
      // Other resources: a quiet, healthy watch with a bookmark now and then.
      res.writeHead(200, { 'content-type': 'application/json' });
      this.every(500, () => res.write('{"type":"BOOKMARK","object":{"kind":"X","metadata":{"resourceVersion":"10"}}}\n'), res);
      return;
    }
    if (path === '/apis/discovery.k8s.io/v1/endpointslices') return list('EndpointSliceList', [slice('web', '10.10.1.1'), slice('late', '10.10.1.2')]);
    if (path === '/api/v1/nodes') return list('NodeList', [{ metadata: { name: 'hostile-node', resourceVersion: '3' }, status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }] } }]);
    if (path.endsWith('/ipvsproxyconfigs')) return list('IPVSProxyConfigList', []);
    return this.json(res, 404, { kind: 'Status', code: 404 });
  }

  private services(url: URL, watch: boolean, res: ServerResponse, list: (kind: string, items: object[], extra?: Record<string, unknown>) => void): void {
    const good = [service('web', '10.96.0.10', '10')];
    switch (this.mode) {
      case 'never-answer': return; // the socket stays open, the answer never comes
      case 'slow-loris':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"kind":"ServiceList","items":[');
        this.every(300, () => res.write(' '), res);
        return;
      case 'truncated-json':
        if (watch) break;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"kind":"ServiceList","metadata":{"resourceVersion":"10"},"items":[{"metadata":');
        return;
      case 'html-200':
        if (watch) break;
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html><body>502 Bad Gateway (from a proxy)</body></html>');
        return;
      case 'endless-continue':
        if (watch) break;
        return list('ServiceList', [], { continue: `token-${Math.random()}` });
      case 'repeated-continue':
        if (watch) break;
        return list('ServiceList', [], { continue: 'always-the-same' });
      case 'malformed-items':
        if (watch) break;
        return list('ServiceList', [...good, { kind: 'Service' }, 42 as unknown as object, { metadata: { namespace: 'default' } }]);
      case 'gone-410':
        if (!watch) break;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 410, reason: 'Expired', message: 'too old resource version' } })}\n`);
        return;
      case 'throttle-429':
        return this.json(res, 429, { kind: 'Status', code: 429, message: 'too many requests' }, { 'retry-after': '1' });
      case 'unavailable-503':
        return this.json(res, 503, { kind: 'Status', code: 503, message: 'unavailable' });
      case 'resets':
        if (!watch) { req(res).destroy(); return; }
        res.writeHead(200, { 'content-type': 'application/json' });
        setTimeout(() => req(res).destroy(), 200);
        return;
      case 'oversized-line': {
        if (!watch) break;
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = Buffer.alloc(1024 * 1024, 0x61);
        let sent = 0;
        this.every(5, () => { if (sent++ < 64) res.write(chunk); }, res);
        return;
      }
      case 'malformed-lines':
        if (!watch) break;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`${MALFORMED_LINES.join('\n')}\n`);
        res.write(`${JSON.stringify({ type: 'ADDED', object: service('late', '10.96.0.11', '11') })}\n`);
        this.every(500, () => res.write('{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"11"}}}\n'), res);
        return;
      case 'good': break;
    }
    if (!watch) return list('ServiceList', this.mode === 'good' ? [...good, service('late', '10.96.0.11', '11')] : good);
    res.writeHead(200, { 'content-type': 'application/json' });
    // Once it behaves, `late` exists: a watch from before it was made sees it added.
    if (this.mode === 'good') res.write(`${JSON.stringify({ type: 'ADDED', object: service('late', '10.96.0.11', '11') })}\n`);
    else {
      this.watchers.add(res);
      res.on('close', () => this.watchers.delete(res));
    }
    this.every(500, () => res.write('{"type":"BOOKMARK","object":{"kind":"Service","metadata":{"resourceVersion":"11"}}}\n'), res);
  }
}

/** The request's socket (to reset it). */
function req(res: ServerResponse): Socket {
  return res.socket!;
}
