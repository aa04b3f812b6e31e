// A fake Kubernetes API server over real HTTP, so client-node's real informers, watch and
// generated API clients are exercised end to end: nothing of client-node is mocked.
//
// Semantics kept from the real server:
// - one resourceVersion counter for everything; every write (and delete) bumps it;
// - list returns items plus the list's resourceVersion; `fieldSelector=metadata.name=X` and
//   `metadata.namespace=X` filter lists and watches;
// - `?watch=true&resourceVersion=N` streams, chunked, one JSON line per event with rv > N
//   (ADDED / MODIFIED / DELETED, BOOKMARK on request); an unset or "0" resourceVersion starts
//   with synthetic ADDED events of the current objects;
// - a resourceVersion older than the compacted history gets 410 Gone - by default as the real
//   server does it (HTTP 200, then an ERROR event carrying a Status with code 410, then close),
//   or as an HTTP 410 response (`goneAs: 'http'`);
// - errors are Status objects; writes with a stale metadata.resourceVersion get 409 Conflict;
//   /status subresources change only status, the main resource keeps the old status.
// - `limit`/`continue` paginate lists (in name order; a continue token carries the first page's
//   resourceVersion, which every page reports - the fake does not keep a snapshot, so objects
//   changed between pages show their newer version); `timeoutSeconds` ends a watch cleanly.
// Test controls: dropWatches() (clean close or abrupt reset), down()/up() (every connection is
// reset while down), compact() (old resourceVersions become 410), bookmark().
// Fault injection: fail() answers matching requests with an error Status (401, 403, 429 with
// Retry-After, 5xx) until clearFaults() or `times` runs out; corruptNextEvent() writes the next
// watch event of a resource as a malformed line (client-node drops it); stall() keeps watches of a
// resource open but silent (no replay, no events, no bytes) until unstall().
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

type Obj = { metadata: { name: string; namespace?: string; resourceVersion?: string; uid?: string; creationTimestamp?: string }; status?: unknown } & Record<string, unknown>;

/** The resources the fake serves. */
export const RESOURCES = {
  services: { prefix: '/api/v1', namespaced: true, kind: 'Service', apiVersion: 'v1' },
  endpointslices: { prefix: '/apis/discovery.k8s.io/v1', namespaced: true, kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1' },
  nodes: { prefix: '/api/v1', namespaced: false, kind: 'Node', apiVersion: 'v1' },
  events: { prefix: '/api/v1', namespaced: true, kind: 'Event', apiVersion: 'v1' },
  ipvsproxyconfigs: { prefix: '/apis/ipvs-operator.io/v1alpha1', namespaced: false, kind: 'IPVSProxyConfig', apiVersion: 'ipvs-operator.io/v1alpha1' },
  ipvsnodestates: { prefix: '/apis/ipvs-operator.io/v1alpha1', namespaced: false, kind: 'IPVSNodeState', apiVersion: 'ipvs-operator.io/v1alpha1' },
} as const;
export type ResourceName = keyof typeof RESOURCES;

type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';
interface HistoryEntry { rv: number; resource: ResourceName; type: WatchType; object: Obj }
interface Watcher { resource: ResourceName; namespace?: string; name?: string; res: ServerResponse; stalled?: boolean }

/** An injected failure: matching requests get `status` with a Status body. */
export interface Fault {
  /** Only requests for this resource (default: any). */
  resource?: ResourceName;
  /** Only this kind of request (default: any): a collection GET, a watch, or anything else. */
  verb?: 'list' | 'watch' | 'other';
  /** The HTTP status; 0: no answer at all (the request hangs until the server closes). */
  status: number;
  /** Sent as the Retry-After header (seconds), as the real server does with 429. */
  retryAfterSeconds?: number;
  /** How many requests fail (default: until clearFaults()). */
  times?: number;
  message?: string;
}

/** A request the fake received, for assertions. */
export interface RecordedRequest { method: string; path: string; query: string; body?: unknown }

export interface FakeApiServerOptions {
  /** How a too-old watch resourceVersion is refused: 'event' (the real server's way) or 'http'. */
  goneAs?: 'event' | 'http';
  /** Resources answered with 404, as for a CRD that is not installed. */
  notServed?: ResourceName[];
}

const key = (ns: string | undefined, name: string) => `${ns ?? ''}/${name}`;

/** The fake API server (see the file comment). */
export class FakeApiServer {
  readonly requests: RecordedRequest[] = [];
  private readonly store = new Map<ResourceName, Map<string, Obj>>();
  private history: HistoryEntry[] = [];
  /** Watches from before this resourceVersion get 410 Gone. */
  private oldest = 0;
  private rv = 100;
  private uid = 0;
  private readonly watchers = new Set<Watcher>();
  private readonly sockets = new Set<Socket>();
  private isDown = false;
  private faults: Array<Fault & { left: number }> = [];
  private readonly corrupt = new Set<ResourceName>();
  private readonly stalled = new Set<ResourceName>();

  private constructor(private readonly server: Server, private readonly opts: FakeApiServerOptions) {
    for (const r of Object.keys(RESOURCES) as ResourceName[]) this.store.set(r, new Map());
    server.on('connection', (s: Socket) => {
      if (this.isDown) {
        s.destroy();
        return;
      }
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.on('request', (req, res) => void this.handle(req, res));
  }

  /** Starts a server on 127.0.0.1, on a free port. */
  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new FakeApiServer(server, opts);
  }

  get url(): string {
    const a = this.server.address();
    if (!a || typeof a === 'string') throw new Error('not listening');
    return `http://127.0.0.1:${a.port}`;
  }

  /** The current resourceVersion. */
  get resourceVersion(): number {
    return this.rv;
  }

  /** Open watch connections. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Creates or replaces an object (ADDED or MODIFIED); returns it as stored. */
  put(resource: ResourceName, object: object): Obj {
    const o = structuredClone(object) as Obj;
    const m = this.store.get(resource)!;
    const k = key(o.metadata.namespace, o.metadata.name);
    const old = m.get(k);
    o.apiVersion = RESOURCES[resource].apiVersion;
    o.kind = RESOURCES[resource].kind;
    o.metadata.uid = old?.metadata.uid ?? `uid-${++this.uid}`;
    o.metadata.creationTimestamp = old?.metadata.creationTimestamp ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    o.metadata.resourceVersion = String(++this.rv);
    m.set(k, o);
    this.record(resource, old ? 'MODIFIED' : 'ADDED', o);
    return o;
  }

  /** Deletes an object (DELETED, with a new resourceVersion); false when it did not exist. */
  remove(resource: ResourceName, name: string, namespace?: string): boolean {
    const m = this.store.get(resource)!;
    const old = m.get(key(namespace, name));
    if (!old) return false;
    m.delete(key(namespace, name));
    const o = structuredClone(old);
    o.metadata.resourceVersion = String(++this.rv);
    this.record(resource, 'DELETED', o);
    return true;
  }

  /** An object as stored, or undefined. */
  get(resource: ResourceName, name: string, namespace?: string): Obj | undefined {
    return this.store.get(resource)!.get(key(namespace, name));
  }

  /** Every object of a resource. */
  list(resource: ResourceName): Obj[] {
    return [...this.store.get(resource)!.values()];
  }

  /** Ends every open watch: `abrupt` resets the connections, otherwise they end cleanly (as at a watch timeout). */
  dropWatches(abrupt = false): void {
    for (const w of this.watchers) {
      if (abrupt) w.res.socket?.destroy();
      else w.res.end();
    }
    this.watchers.clear();
  }

  /** Resets every connection and refuses (resets) new ones until up(). */
  down(): void {
    this.isDown = true;
    this.watchers.clear();
    for (const s of this.sockets) s.destroy();
  }

  up(): void {
    this.isDown = false;
  }

  /** Forgets the history: watches from any resourceVersion before now get 410 Gone. */
  compact(): void {
    this.history = [];
    this.oldest = this.rv;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch. */
  bookmark(): void {
    for (const w of this.watchers) {
      const { kind, apiVersion } = RESOURCES[w.resource];
      w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { kind, apiVersion, metadata: { resourceVersion: String(this.rv) } } })}\n`);
    }
  }

  /** Answers matching requests with an error until clearFaults() (or `times` requests). */
  fail(fault: Fault): void {
    this.faults.push({ ...fault, left: fault.times ?? Infinity });
  }

  /** Removes every injected fault (stalls and pending corruptions included). */
  clearFaults(): void {
    this.faults = [];
    this.corrupt.clear();
    this.stalled.clear();
  }

  /** The next watch event of `resource` reaches its watchers as a malformed (truncated) JSON line. */
  corruptNextEvent(resource: ResourceName): void {
    this.corrupt.add(resource);
  }

  /** Watches of `resource`, open and new, stay connected but send nothing until unstall(). */
  stall(resource: ResourceName): void {
    this.stalled.add(resource);
    for (const w of this.watchers) if (w.resource === resource) w.stalled = true;
  }

  /** New events reach new watches again (watches that stalled missed theirs for good, as on a dead link). */
  unstall(resource: ResourceName): void {
    this.stalled.delete(resource);
  }

  async close(): Promise<void> {
    this.down();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private record(resource: ResourceName, type: WatchType, object: Obj): void {
    this.history.push({ rv: this.rv, resource, type, object });
    let text = `${JSON.stringify({ type, object })}\n`;
    if (this.corrupt.delete(resource)) text = `${text.slice(0, Math.floor(text.length / 2))}\n`;
    for (const w of this.watchers) {
      if (matches(w, resource, object) && !w.stalled) w.res.write(text);
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    let body: unknown;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (chunks.length) body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const method = req.method ?? 'GET';
    this.requests.push({ method, path: url.pathname, query: url.search, ...(body !== undefined ? { body } : {}) });
    const route = parsePath(url.pathname);
    if (!route || this.opts.notServed?.includes(route.resource)) return sendStatus(res, 404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    const { resource, namespace, name, status } = route;
    const selector = parseFieldSelector(url.searchParams.get('fieldSelector'));
    const ns = namespace ?? selector.namespace;
    const isWatch = !name && method === 'GET' && url.searchParams.get('watch') === 'true';
    const verb = isWatch ? 'watch' : !name && method === 'GET' ? 'list' : 'other';
    const fault = this.faults.find((f) => f.left > 0 && (f.resource ?? resource) === resource && (f.verb ?? verb) === verb);
    if (fault) {
      fault.left--;
      if (fault.status === 0) return;
      const reason = STATUS_REASONS[fault.status] ?? 'InternalError';
      return sendStatus(res, fault.status, reason, fault.message ?? `${reason}: injected for ${verb} ${resource}`,
        fault.retryAfterSeconds !== undefined ? { 'retry-after': String(fault.retryAfterSeconds) } : {});
    }
    if (isWatch) {
      const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
      return this.watch(res, { resource, res, ...(ns ? { namespace: ns } : {}), ...(selector.name ? { name: selector.name } : {}) },
        url.searchParams.get('resourceVersion') ?? '', timeout > 0 ? timeout : undefined);
    }
    if (!name && method === 'GET') {
      const items = this.list(resource).filter((o) => matches({ resource, namespace: ns, name: selector.name }, resource, o))
        .sort((a, b) => key(a.metadata.namespace, a.metadata.name).localeCompare(key(b.metadata.namespace, b.metadata.name)));
      const limit = Number(url.searchParams.get('limit') ?? 0);
      const token = url.searchParams.get('continue');
      const from = token ? (JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { offset: number; rv: number }) : { offset: 0, rv: this.rv };
      const page = limit > 0 ? items.slice(from.offset, from.offset + limit) : items.slice(from.offset);
      const more = limit > 0 && from.offset + limit < items.length;
      const next = more ? Buffer.from(JSON.stringify({ offset: from.offset + limit, rv: from.rv })).toString('base64') : undefined;
      return send(res, 200, { apiVersion: RESOURCES[resource].apiVersion, kind: `${RESOURCES[resource].kind}List`,
        metadata: { resourceVersion: String(from.rv), ...(next ? { continue: next } : {}) }, items: page });
    }
    if (!name && method === 'POST') {
      const o = body as Obj;
      if (RESOURCES[resource].namespaced) o.metadata.namespace = namespace;
      if (this.get(resource, o.metadata.name, namespace)) return sendStatus(res, 409, 'AlreadyExists', `${resource} "${o.metadata.name}" already exists`);
      return send(res, 201, this.put(resource, o));
    }
    const current = name ? this.get(resource, name, namespace) : undefined;
    if (!name || !current) return sendStatus(res, 404, 'NotFound', `${resource} "${name ?? ''}" not found`);
    if (method === 'GET') return send(res, 200, current);
    if (method === 'DELETE') {
      this.remove(resource, name, namespace);
      return send(res, 200, current);
    }
    if (method === 'PUT' || method === 'PATCH') {
      let next = method === 'PUT' ? (body as Obj) : (mergePatch(structuredClone(current), body) as Obj);
      const rv = next.metadata?.resourceVersion;
      if (method === 'PUT' && rv && rv !== current.metadata.resourceVersion) {
        return sendStatus(res, 409, 'Conflict', `the object has been modified; please apply your changes to the latest version`);
      }
      // The status subresource changes only status; the main resource never changes status.
      next = status ? { ...structuredClone(current), status: next.status } : { ...next, metadata: { ...next.metadata, name, ...(namespace ? { namespace } : {}) }, status: current.status };
      return send(res, 200, this.put(resource, next));
    }
    return sendStatus(res, 405, 'MethodNotAllowed', `${method} not allowed`);
  }

  private watch(res: ServerResponse, w: Watcher, rvText: string, timeoutSeconds?: number): void {
    const from = rvText === '' || rvText === '0' ? undefined : Number(rvText);
    if (from !== undefined && (Number.isNaN(from) || from < this.oldest)) {
      const message = `too old resource version: ${rvText} (${this.oldest})`;
      if (this.opts.goneAs === 'http') return sendStatus(res, 410, 'Expired', message);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: statusObject(410, 'Expired', message) })}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as the real server does: clients see the watch established before any event
    if (timeoutSeconds !== undefined) {
      const timer = setTimeout(() => res.end(), timeoutSeconds * 1000);
      res.on('close', () => clearTimeout(timer));
    }
    if (this.stalled.has(w.resource)) {
      w.stalled = true;
    } else if (from === undefined) {
      for (const o of this.list(w.resource)) if (matches(w, w.resource, o)) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
    } else {
      for (const h of this.history) {
        if (h.rv > from && matches(w, h.resource, h.object)) res.write(`${JSON.stringify({ type: h.type, object: h.object })}\n`);
      }
    }
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }
}

/** A client-node KubeConfig pointing at the fake server. */
export function kubeConfigFor(server: FakeApiServer): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: server.url, skipTLSVerify: true }],
    users: [{ name: 'tester' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'tester' }],
    currentContext: 'fake',
  });
  return kc;
}

function matches(w: Pick<Watcher, 'resource' | 'namespace' | 'name'>, resource: ResourceName, o: Obj): boolean {
  return w.resource === resource && (w.namespace === undefined || o.metadata.namespace === w.namespace) &&
    (w.name === undefined || o.metadata.name === w.name);
}

/** `/api/v1/namespaces/ns1/services/x/status` -> its parts; undefined for paths the fake does not serve. */
function parsePath(path: string): { resource: ResourceName; namespace?: string; name?: string; status: boolean } | undefined {
  for (const [resource, r] of Object.entries(RESOURCES) as [ResourceName, (typeof RESOURCES)[ResourceName]][]) {
    if (!path.startsWith(`${r.prefix}/`)) continue;
    const parts = path.slice(r.prefix.length + 1).split('/');
    let namespace: string | undefined;
    if (parts[0] === 'namespaces' && parts.length >= 3 && r.namespaced) {
      namespace = parts[1];
      parts.splice(0, 2);
    }
    if (parts[0] !== resource || parts.length > 3 || (parts.length === 3 && parts[2] !== 'status')) continue;
    return { resource, ...(namespace ? { namespace } : {}), ...(parts[1] ? { name: parts[1] } : {}), status: parts[2] === 'status' };
  }
  return undefined;
}

function parseFieldSelector(text: string | null): { name?: string; namespace?: string } {
  const out: { name?: string; namespace?: string } = {};
  for (const term of (text ?? '').split(',').filter(Boolean)) {
    const [field, value] = term.split('=');
    if (field === 'metadata.name') out.name = value;
    else if (field === 'metadata.namespace') out.namespace = value;
  }
  return out;
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const t = (typeof target === 'object' && target !== null && !Array.isArray(target) ? target : {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete t[k];
    else t[k] = mergePatch(t[k], v);
  }
  return t;
}

function statusObject(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

const STATUS_REASONS: Record<number, string> = {
  401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
};

function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(code, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function sendStatus(res: ServerResponse, code: number, reason: string, message: string, headers: Record<string, string> = {}): void {
  send(res, code, statusObject(code, reason, message), headers);
}
