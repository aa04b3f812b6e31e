// A small Kubernetes API server over real HTTP(S): the unit tests' fake (client-node's real
// informers, watch and generated API clients exercised end to end, nothing of client-node mocked)
// and the lab cluster's control plane (`lab` options, apiserver-main.ts). Lab tooling: never
// imported by the operator.
//
// Semantics kept from the real server:
// - one resourceVersion counter for everything; every write (and delete) bumps it;
// - list returns items plus the list's resourceVersion; field selectors (any dotted path, = and !=)
//   and label selectors (=, !=, in, notin, exists, !) filter lists and watches;
// - `?watch=true&resourceVersion=N` streams, chunked, one JSON line per event with rv > N
//   (ADDED / MODIFIED / DELETED, BOOKMARK on request); an unset or "0" resourceVersion starts
//   with synthetic ADDED events of the current objects;
// - a resourceVersion older than the compacted history gets 410 Gone - by default as the real
//   server does it (HTTP 200, then an ERROR event carrying a Status with code 410, then close),
//   or as an HTTP 410 response (`goneAs: 'http'`);
// - errors are Status objects: bad body 400, unauthenticated 401, RBAC 403, unknown resource or
//   object 404, existing object or stale metadata.resourceVersion 409, invalid Service 422;
//   /status subresources change only status, the main resource keeps the old status;
// - `limit`/`continue` paginate lists (in name order; a continue token carries the first page's
//   resourceVersion, which every page reports - no snapshot is kept, so objects changed between
//   pages show their newer version); `timeoutSeconds` ends a watch cleanly;
// - patches: merge, JSON, strategic (approximated) and server-side apply (approximated as a merge
//   patch or a create), see store.ts; discovery for kubectl (/version, /api, /apis, per group);
//   OpenAPI v3 (/openapi/v3 and one document per group-version) and field validation of writes
//   that ask for it (`fieldValidation=Strict|Warn|Ignore`, what kubectl sends), see openapi.ts.
// With `lab` (the cluster's control plane; off for the unit tests' fake): Services are defaulted
// and get ClusterIPs/NodePorts (alloc.ts); EndpointSlices follow Services, Pods and Nodes
// (controllers.ts); a Pod delete with a grace period sets deletionTimestamp and removes the Pod
// when the grace ends (or at a delete with gracePeriodSeconds=0, as the kubelet sends); deleting
// a Namespace removes its objects at once; the usual namespaces exist from the start.
// With `auth`: bearer tokens and RBAC (rbac.ts); ClusterRoles/Bindings created through the API
// count too. Not modelled: admission, finalizers, owner-reference garbage collection (except the
// controller's own slices), managedFields, the namespace lifecycle (objects may be created in a
// namespace that does not exist).
// Test controls: dropWatches() (clean close or abrupt reset), down()/up() (every connection is
// reset while down), compact() (old resourceVersions become 410), bookmark().
// Fault injection: fail() answers matching requests with an error Status (401, 403, 429 with
// Retry-After, 5xx) until clearFaults() or `times` runs out; corruptNextEvent() writes the next
// watch event of a resource as a malformed line (client-node drops it); stall() keeps watches of a
// resource open but silent (no replay, no events, no bytes) until unstall().
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { PROJECT_CRDS, readCrd } from '../../src/config/load.js';
import { KubeClient } from '../../src/kube/client.js';
import { parse as parseYaml } from 'yaml';
import { type AllocConfig, DEFAULT_ALLOC, type ServiceLike, allocateService, formatIp, parseCidr } from './alloc.js';
import { MANAGED_BY, MANAGED_BY_LABEL, type SliceLike, buildEndpointSlices } from './controllers.js';
import { type LbService, poolAddresses, reconcileLoadBalancers } from './loadbalancer.js';
import { type Definitions, type FieldValidation, OpenApiDocuments, buildDefinitions, definitionOf, unknownFields } from './openapi.js';
import { type RbacPolicy, type RequestAttributes, type UserInfo, authorize, forbiddenMessage, parseRbac, userGroups } from './rbac.js';
import {
  RESOURCES, type Requirement, type ResourceInfo, type ResourceName, apiVersionOf, discovery, fieldAt, jsonPatch, mergePatch,
  parseFieldSelector, parseLabelSelector, parseResourcePath, resourceAt, selects, strategicMergePatch,
} from './store.js';
import { tableOf, wantsTable } from './tables.js';

export { RESOURCES, type ResourceName } from './store.js';

type Obj = {
  metadata: {
    name: string; namespace?: string; resourceVersion?: string; uid?: string; creationTimestamp?: string; generateName?: string;
    labels?: Record<string, string>; deletionTimestamp?: string; deletionGracePeriodSeconds?: number;
  };
  status?: unknown;
} & Record<string, unknown>;

type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';
interface HistoryEntry { rv: number; resource: ResourceName; type: WatchType; object: Obj }
interface Filter { resource: ResourceName; namespace?: string; fields: Requirement[]; labels: Requirement[] }
interface Watcher extends Filter { res: ServerResponse; stalled?: boolean; /** kubectl get -w: each event carries a one-row Table. */ table?: boolean }

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

/** A request the server received, for assertions. */
/** A request as served: `user` when authenticated with a token, `status` when it was refused (a Status answer). */
export interface RecordedRequest { method: string; path: string; query: string; body?: unknown; user?: string; status?: number }

/** The lab control plane's behaviour (see the file comment). */
export interface LabOptions {
  /** Service CIDRs and the NodePort range (default DEFAULT_ALLOC). */
  alloc?: AllocConfig;
  /** Pod grace period when neither the delete nor the Pod names one (default 30 s, as the API's default). */
  defaultGraceSeconds?: number;
  /** How long an Event lives after its last write (kube-apiserver's --event-ttl; default 1 h). */
  eventTtlMs?: number;
  /** The clock Event expiry reads (ms since the epoch; default Date.now): tests move it. */
  clock?: () => number;
  /** The address the `kubernetes` Service's EndpointSlice points at (kube-apiserver's --advertise-address); none: the Service alone. */
  advertiseAddress?: string;
  /** LoadBalancer ingress IPs (IPv4 CIDR) the lab's controller hands out (loadbalancer.ts); none: no controller. */
  loadBalancerPool?: string;
}

/** Authentication and authorization: token -> user, and RBAC documents (YAML texts). */
export interface AuthOptions {
  tokens: Map<string, UserInfo>;
  rbacYaml: string[];
}

/** Options of the server; everything is off by default (the unit tests' fake). */
export interface LabApiServerOptions {
  /** How a too-old watch resourceVersion is refused: 'event' (the real server's way) or 'http'. */
  goneAs?: 'event' | 'http';
  /** Resources answered with 404, as for a CRD that is not installed. */
  notServed?: ResourceName[];
  /** Listen address (default 127.0.0.1) and port (default: a free one). */
  host?: string;
  port?: number;
  /** Serve HTTPS with this PEM certificate and key. */
  tls?: { cert: string; key: string };
  auth?: AuthOptions;
  lab?: LabOptions;
}
/** The unit tests' name for the options. */
export type FakeApiServerOptions = LabApiServerOptions;

const key = (ns: string | undefined, name: string) => `${ns ?? ''}/${name}`;
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
const MAX_BODY = 4 << 20;

/** Thrown inside request handling: answered as a Status. */
class HttpError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string) {
    super(message);
  }
}

/** The API server (see the file comment). */
export class LabApiServer {
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
  private readonly graceTimers = new Map<string, NodeJS.Timeout>();
  private readonly staticRbac: RbacPolicy;
  private reconciling = false;
  /** The LoadBalancer controller's pool, every address (empty: no controller). */
  private readonly lbPool: string[];
  /** When each Event goes (resource/namespace/name -> ms), as kube-apiserver's etcd lease of --event-ttl. */
  private readonly eventExpiry = new Map<string, number>();

  private constructor(private readonly server: Server, private readonly opts: LabApiServerOptions) {
    for (const r of Object.keys(RESOURCES) as ResourceName[]) this.store.set(r, new Map());
    this.staticRbac = parseRbac(opts.auth?.rbacYaml ?? []);
    this.lbPool = opts.lab?.loadBalancerPool ? poolAddresses(opts.lab.loadBalancerPool) : [];
    server.on('connection', (s: Socket) => {
      if (this.isDown) {
        s.destroy();
        return;
      }
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.on('secureConnection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) sendStatus(res, 500, 'InternalError', `internal error: ${(e as Error).message}`);
        else res.destroy();
      });
    });
    if (opts.lab) {
      for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
        this.put('namespaces', { metadata: { name }, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } });
      }
      this.putKubernetesService(opts.lab);
    }
  }

  /**
   * The `kubernetes` Service in `default`, as kube-apiserver keeps it: the first address of the
   * primary service CIDR (alloc.ts never hands it out), https 443 to the server's own port, no
   * selector; with an advertise address, its EndpointSlice (written by the server, not the
   * EndpointSlice controller, which leaves selector-less Services alone).
   */
  private putKubernetesService(lab: LabOptions): void {
    const range = parseCidr((lab.alloc ?? DEFAULT_ALLOC).serviceCIDRs[0]!);
    const ip = formatIp(range.family, range.base + 1n);
    const a = this.server.address();
    const port = a && typeof a !== 'string' ? a.port : 443;
    this.put('services', {
      metadata: { name: 'kubernetes', namespace: 'default', labels: { component: 'apiserver', provider: 'kubernetes' } },
      spec: {
        type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ipFamilies: [range.family], ipFamilyPolicy: 'SingleStack',
        ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: port }], sessionAffinity: 'None', internalTrafficPolicy: 'Cluster',
      },
    });
    if (!lab.advertiseAddress) return;
    this.put('endpointslices', {
      metadata: { name: 'kubernetes', namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes' } },
      addressType: lab.advertiseAddress.includes(':') ? 'IPv6' : 'IPv4',
      endpoints: [{ addresses: [lab.advertiseAddress], conditions: { ready: true } }],
      ports: [{ name: 'https', port, protocol: 'TCP' }],
    });
  }

  /** Starts a server on `host` (default 127.0.0.1) and `port` (default a free one); rejects when it cannot listen. */
  static async start(opts: LabApiServerOptions = {}): Promise<LabApiServer> {
    const server = (opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }) : createServer()) as Server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
    });
    return new LabApiServer(server, opts);
  }

  /** The base URL (http or https, the listen address; 127.0.0.1 when listening on any address). */
  get url(): string {
    const a = this.server.address();
    if (!a || typeof a === 'string') throw new Error('not listening');
    const host = a.address === '0.0.0.0' || a.address === '::' ? '127.0.0.1' : a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `${this.opts.tls ? 'https' : 'http'}://${host}:${a.port}`;
  }

  /** The current resourceVersion. */
  get resourceVersion(): number {
    return this.rv;
  }

  /** Open watch connections. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Creates or replaces an object as given, without admission (ADDED or MODIFIED); returns it as stored. */
  put(resource: ResourceName, object: object): Obj {
    const o = structuredClone(object) as Obj;
    const m = this.store.get(resource)!;
    const k = key(o.metadata.namespace, o.metadata.name);
    const old = m.get(k);
    const info: ResourceInfo = RESOURCES[resource];
    o.apiVersion = apiVersionOf(info);
    o.kind = info.kind;
    o.metadata.uid = old?.metadata.uid ?? `uid-${++this.uid}`;
    o.metadata.creationTimestamp = old?.metadata.creationTimestamp ?? now();
    o.metadata.resourceVersion = String(++this.rv);
    m.set(k, o);
    if (this.opts.lab && RESOURCES[resource].kind === 'Event') {
      this.eventExpiry.set(`${resource}/${k}`, (this.opts.lab.clock ?? Date.now)() + (this.opts.lab.eventTtlMs ?? 3_600_000));
    }
    this.record(resource, old ? 'MODIFIED' : 'ADDED', o);
    this.afterWrite(resource);
    return o;
  }

  /** Creates an object through admission (defaulting, Service allocation), as a POST does; throws an Error (409 exists, 422 invalid). */
  create(resource: ResourceName, object: object): Obj {
    const o = structuredClone(object) as Obj;
    return this.createFrom(resource, o.metadata?.namespace, o);
  }

  /** Deletes an object at once (DELETED, with a new resourceVersion); false when it did not exist. */
  remove(resource: ResourceName, name: string, namespace?: string): boolean {
    const m = this.store.get(resource)!;
    const old = m.get(key(namespace, name));
    if (!old) return false;
    m.delete(key(namespace, name));
    clearTimeout(this.graceTimers.get(`${resource}/${key(namespace, name)}`));
    const o = structuredClone(old);
    o.metadata.resourceVersion = String(++this.rv);
    this.record(resource, 'DELETED', o);
    if (resource === 'namespaces') {
      for (const [r, objs] of this.store) {
        for (const x of [...objs.values()]) if (x.metadata.namespace === name) this.remove(r, x.metadata.name, name);
      }
    }
    this.afterWrite(resource);
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
      const info: ResourceInfo = RESOURCES[w.resource];
      w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { kind: info.kind, apiVersion: apiVersionOf(info), metadata: { resourceVersion: String(this.rv) } } })}\n`);
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

  /** Stops listening and resets every connection; pending pod grace timers are dropped. */
  async close(): Promise<void> {
    for (const t of this.graceTimers.values()) clearTimeout(t);
    this.down();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Deletes the Events whose TTL ran out since their last write (DELETED to watchers); run before every request. */
  expireEvents(): void {
    if (!this.opts.lab || this.eventExpiry.size === 0) return;
    const t = (this.opts.lab.clock ?? Date.now)();
    for (const [k, at] of this.eventExpiry) {
      if (at > t) continue;
      this.eventExpiry.delete(k);
      const [resource, ns, name] = k.split('/') as [ResourceName, string, string];
      this.remove(resource, name, ns || undefined);
    }
  }

  private record(resource: ResourceName, type: WatchType, object: Obj): void {
    this.history.push({ rv: this.rv, resource, type, object });
    const corrupt = this.corrupt.delete(resource);
    for (const w of this.watchers) {
      if (!matches(w, resource, object) || w.stalled) continue;
      const text = eventLine(w, type, object);
      w.res.write(corrupt ? `${text.slice(0, Math.floor(text.length / 2))}\n` : text);
    }
  }

  /**
   * The controllers: after a write of a Service, Pod or Node, the EndpointSlices follow; after a
   * Service write, LoadBalancer ingress IPs follow (when the lab has a pool).
   */
  private afterWrite(resource: ResourceName): void {
    if (!this.opts.lab || this.reconciling || !['services', 'pods', 'nodes', 'namespaces'].includes(resource)) return;
    this.reconciling = true;
    try {
      if (resource === 'services' && this.lbPool.length) {
        for (const [svc, ip] of reconcileLoadBalancers(this.list('services') as LbService[], this.lbPool)) {
          const cur = svc as Obj & LbService;
          this.put('services', { ...cur, status: { ...cur.status, loadBalancer: ip ? { ingress: [{ ip, ipMode: 'VIP' }] } : {} } });
        }
      }
      const pods = this.list('pods');
      const nodes = this.list('nodes');
      const want = new Map<string, SliceLike>();
      for (const svc of this.list('services')) {
        for (const s of buildEndpointSlices(svc as never, pods as never, nodes as never)) want.set(key(s.metadata.namespace, s.metadata.name), s);
      }
      for (const cur of this.list('endpointslices')) {
        if (cur.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) continue;
        if (!want.has(key(cur.metadata.namespace, cur.metadata.name))) this.remove('endpointslices', cur.metadata.name, cur.metadata.namespace);
      }
      for (const [k, s] of want) {
        const cur = this.store.get('endpointslices')!.get(k);
        const same = cur && JSON.stringify([cur.metadata.labels, cur.addressType, cur.endpoints, cur.ports]) ===
          JSON.stringify([s.metadata.labels, s.addressType, s.endpoints, s.ports]);
        if (!same) this.put('endpointslices', { ...s, metadata: { ...cur?.metadata, ...s.metadata } });
      }
    } finally {
      this.reconciling = false;
    }
  }

  /** Defaulting and validation of a write (lab only): Services get their allocations; throws HttpError 422. */
  private admit(resource: ResourceName, o: Obj, old: Obj | undefined): Obj {
    if (!this.opts.lab) return o;
    if (resource === 'services') {
      const others = this.list('services').filter((s) => !(s.metadata.name === o.metadata.name && s.metadata.namespace === o.metadata.namespace));
      const r = allocateService(o as ServiceLike, old as ServiceLike | undefined, others as ServiceLike[], this.opts.lab.alloc ?? DEFAULT_ALLOC);
      if (!r.ok) throw new HttpError(422, 'Invalid', `Service "${o.metadata.name}" is invalid: ${r.message}`);
      return r.service as Obj;
    }
    if (resource === 'pods' && !old) {
      const pod = o as Obj & { status?: { phase?: string } };
      pod.status = { phase: 'Pending', ...(pod.status as object | undefined) };
    }
    return o;
  }

  private policy(): RbacPolicy {
    const roles = this.list('clusterroles');
    const bindings = this.list('clusterrolebindings');
    if (!roles.length && !bindings.length) return this.staticRbac;
    const dynamic = parseRbac([[...roles, ...bindings].map((o) => JSON.stringify(o)).join('\n---\n')]);
    return { roles: new Map([...this.staticRbac.roles, ...dynamic.roles]), bindings: [...this.staticRbac.bindings, ...dynamic.bindings] };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    let body: unknown;
    try {
      body = await readBody(req, req.headers['content-type'] ?? '');
    } catch (e) {
      const err = e instanceof HttpError ? e : new HttpError(400, 'BadRequest', `the request body is invalid: ${(e as Error).message}`);
      return sendStatus(res, err.code, err.reason, err.message);
    }
    const rec: RecordedRequest = { method, path: url.pathname, query: url.search, ...(body !== undefined ? { body } : {}) };
    this.requests.push(rec);
    this.expireEvents();
    try {
      await this.serve(req, res, url, method, body, rec);
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      rec.status = e.code;
      sendStatus(res, e.code, e.reason, e.message);
    }
  }

  private async serve(req: IncomingMessage, res: ServerResponse, url: URL, method: string, body: unknown, rec: RecordedRequest): Promise<void> {
    const path = url.pathname;
    if (['/healthz', '/readyz', '/livez'].includes(path)) return sendText(res, 200, 'ok');
    if (path === '/version') {
      return send(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0-ipvs-operator-lab', platform: `${process.platform}/${process.arch}` });
    }
    const user = this.authenticate(req);
    if (user) rec.user = user.name;
    if (method === 'GET' && path.startsWith('/openapi/')) {
      const doc = openApi().document(path);
      if (doc === undefined) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(doc);
    }
    const route = parseResourcePath(path);
    if (!route) {
      const doc = method === 'GET' ? discovery(path) : undefined;
      if (doc) return send(res, 200, doc);
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
    }
    const isWatch = !route.name && method === 'GET' && ['true', '1'].includes(url.searchParams.get('watch') ?? '');
    const verb = method === 'GET' ? (route.name ? 'get' : isWatch ? 'watch' : 'list') : ({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: route.name ? 'delete' : 'deletecollection' } as Record<string, string>)[method];
    if (!verb) throw new HttpError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${method})`);
    let fields: Requirement[];
    let labels: Requirement[];
    try {
      fields = parseFieldSelector(url.searchParams.get('fieldSelector'));
      labels = parseLabelSelector(url.searchParams.get('labelSelector'));
    } catch (e) {
      throw new HttpError(400, 'BadRequest', (e as Error).message);
    }
    const nameForAuthz = route.name ?? (['list', 'watch'].includes(verb) ? fields.find((f) => f.key === 'metadata.name' && f.op === '=')?.values[0] : undefined);
    const attrs: RequestAttributes = { verb, group: route.group, resource: route.plural, ...(route.subresource ? { subresource: route.subresource } : {}),
      ...(route.namespace ? { namespace: route.namespace } : {}), ...(nameForAuthz ? { name: nameForAuthz } : {}) };
    if (user && !authorize(this.policy(), user, attrs)) throw new HttpError(403, 'Forbidden', forbiddenMessage(user, attrs));

    const resource = resourceAt(route.group, route.version, route.plural);
    if (!resource || this.opts.notServed?.includes(resource)) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
    const info: ResourceInfo = RESOURCES[resource];
    if (route.subresource && !(route.subresource === 'status' && info.status)) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${method} ${path})`);
    const namespace = info.namespaced ? route.namespace : undefined;
    const faultVerb = verb === 'watch' ? 'watch' : verb === 'list' ? 'list' : 'other';
    const fault = this.faults.find((f) => f.left > 0 && (f.resource ?? resource) === resource && (f.verb ?? faultVerb) === faultVerb);
    if (fault) {
      fault.left--;
      if (fault.status === 0) return;
      const reason = STATUS_REASONS[fault.status] ?? 'InternalError';
      return sendStatus(res, fault.status, reason, fault.message ?? `${reason}: injected for ${faultVerb} ${resource}`,
        fault.retryAfterSeconds !== undefined ? { 'retry-after': String(fault.retryAfterSeconds) } : {});
    }
    const filter: Filter = { resource, ...(namespace ? { namespace } : {}), fields, labels };
    if (verb === 'watch') {
      const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
      return this.watch(res, { ...filter, res, ...(wantsTable(req.headers.accept) ? { table: true } : {}) }, url.searchParams.get('resourceVersion') ?? '', timeout > 0 ? timeout : undefined);
    }
    if (verb === 'list') return this.sendList(req, res, url, filter);
    const checkFields = (o: unknown) => validateFields(res, resource, o, url.searchParams.get('fieldValidation'));
    if (verb === 'create') {
      checkFields(body);
      return send(res, 201, this.createFrom(resource, namespace, body));
    }
    if (verb === 'deletecollection') throw new HttpError(405, 'MethodNotAllowed', 'deletecollection is not supported by the lab API server');
    const name = route.name!;
    const current = this.get(resource, name, namespace);
    const isApply = verb === 'patch' && String(req.headers['content-type']).startsWith('application/apply-patch');
    if (!current && isApply && !route.subresource) {
      checkFields(body);
      return send(res, 201, this.createFrom(resource, namespace, { ...(body as object), metadata: { ...(body as Obj).metadata, name } }));
    }
    if (!current) throw new HttpError(404, 'NotFound', `${resource} "${name}" not found`);
    if (verb === 'get') return wantsTable(req.headers.accept) ? send(res, 200, tableOf(resource, [current], true)) : send(res, 200, current);
    if (verb === 'delete') return this.deleteFrom(res, resource, current, url, body);
    let next: Obj;
    if (verb === 'update') {
      next = asObject(body);
      const rv = next.metadata?.resourceVersion;
      if (rv && rv !== current.metadata.resourceVersion) throw conflict(resource, name);
    } else {
      next = this.patched(current, body, String(req.headers['content-type'] ?? ''));
      const rv = (body as Obj | undefined)?.metadata?.resourceVersion;
      if (!Array.isArray(body) && rv && rv !== current.metadata.resourceVersion) throw conflict(resource, name);
    }
    // The status subresource changes only status; the main resource never changes status.
    // Clients never set or clear deletionTimestamp themselves (the real server ignores them too).
    const deletion = { deletionTimestamp: current.metadata.deletionTimestamp, deletionGracePeriodSeconds: current.metadata.deletionGracePeriodSeconds };
    next = route.subresource === 'status' ? { ...structuredClone(current), status: next.status }
      : { ...next, metadata: { ...next.metadata, ...dropUndefined(deletion), name, ...(namespace ? { namespace } : {}) }, status: current.status };
    if (!deletion.deletionTimestamp) delete next.metadata.deletionTimestamp;
    checkFields(next);
    if (!route.subresource) next = this.admit(resource, next, current);
    return send(res, 200, this.put(resource, next));
  }

  private authenticate(req: IncomingMessage): UserInfo | undefined {
    if (!this.opts.auth) return undefined;
    const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    const user = m ? this.opts.auth.tokens.get(m[1]!) : undefined;
    if (!user) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
    return userGroups(user);
  }

  private sendList(req: IncomingMessage, res: ServerResponse, url: URL, filter: Filter): void {
    const { resource } = filter;
    const items = this.list(resource).filter((o) => matches(filter, resource, o))
      .sort((a, b) => key(a.metadata.namespace, a.metadata.name).localeCompare(key(b.metadata.namespace, b.metadata.name)));
    const limit = Number(url.searchParams.get('limit') ?? 0);
    const token = url.searchParams.get('continue');
    let from = { offset: 0, rv: this.rv };
    if (token) {
      try {
        from = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { offset: number; rv: number };
      } catch {
        throw new HttpError(400, 'BadRequest', 'continue key is not valid');
      }
    }
    const page = limit > 0 ? items.slice(from.offset, from.offset + limit) : items.slice(from.offset);
    const more = limit > 0 && from.offset + limit < items.length;
    const next = more ? Buffer.from(JSON.stringify({ offset: from.offset + limit, rv: from.rv })).toString('base64') : undefined;
    const meta = { resourceVersion: String(from.rv), ...(next ? { continue: next } : {}) };
    if (wantsTable(req.headers.accept)) return send(res, 200, { ...tableOf(resource, page, url.searchParams.get('includeObject') !== 'None'), metadata: meta });
    const info: ResourceInfo = RESOURCES[resource];
    send(res, 200, { apiVersion: apiVersionOf(info), kind: `${info.kind}List`, metadata: meta, items: page });
  }

  private createFrom(resource: ResourceName, namespace: string | undefined, body: unknown): Obj {
    const o = asObject(body);
    const info: ResourceInfo = RESOURCES[resource];
    if (info.namespaced) {
      if (o.metadata.namespace && namespace && o.metadata.namespace !== namespace) {
        throw new HttpError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
      }
      o.metadata.namespace = namespace ?? o.metadata.namespace ?? 'default';
    } else {
      delete o.metadata.namespace;
    }
    if (!o.metadata.name && o.metadata.generateName) o.metadata.name = `${o.metadata.generateName}${Math.random().toString(36).slice(2, 7)}`;
    if (!o.metadata.name) throw new HttpError(422, 'Invalid', `${info.kind} "" is invalid: metadata.name: Required value: name or generateName is required`);
    if (this.get(resource, o.metadata.name, o.metadata.namespace)) throw new HttpError(409, 'AlreadyExists', `${resource} "${o.metadata.name}" already exists`);
    delete o.metadata.resourceVersion;
    return this.put(resource, this.admit(resource, o, undefined));
  }

  private deleteFrom(res: ServerResponse, resource: ResourceName, current: Obj, url: URL, body: unknown): void {
    const { name, namespace } = current.metadata;
    const asked = url.searchParams.get('gracePeriodSeconds') ?? (body as { gracePeriodSeconds?: number } | undefined)?.gracePeriodSeconds;
    const spec = current.spec as { nodeName?: string; terminationGracePeriodSeconds?: number } | undefined;
    const grace = asked !== undefined && asked !== null ? Number(asked) : spec?.terminationGracePeriodSeconds ?? this.opts.lab?.defaultGraceSeconds ?? 30;
    if (resource !== 'pods' || !this.opts.lab || !spec?.nodeName || !(grace > 0)) {
      this.remove(resource, name, namespace);
      return send(res, 200, current);
    }
    // Graceful Pod deletion: terminating until the grace ends (or a delete with grace 0, the kubelet's).
    const end = Date.now() + grace * 1000;
    const was = current.metadata.deletionTimestamp ? Date.parse(current.metadata.deletionTimestamp) : Infinity;
    if (end >= was) return send(res, 200, current);
    const next = structuredClone(current);
    next.metadata.deletionTimestamp = new Date(end).toISOString().replace(/\.\d+Z$/, 'Z');
    next.metadata.deletionGracePeriodSeconds = grace;
    const stored = this.put('pods', next);
    const timerKey = `pods/${key(namespace, name)}`;
    clearTimeout(this.graceTimers.get(timerKey));
    const timer = setTimeout(() => {
      this.graceTimers.delete(timerKey);
      this.remove('pods', name, namespace);
    }, grace * 1000);
    timer.unref();
    this.graceTimers.set(timerKey, timer);
    send(res, 200, stored);
  }

  private patched(current: Obj, body: unknown, contentType: string): Obj {
    const base = structuredClone(current);
    try {
      if (contentType.startsWith('application/json-patch+json')) {
        if (!Array.isArray(body)) throw new HttpError(400, 'BadRequest', 'a JSON patch must be a list of operations');
        return asObject(jsonPatch(base, body));
      }
      if (contentType.startsWith('application/strategic-merge-patch+json')) return asObject(strategicMergePatch(base, body));
      if (contentType.startsWith('application/merge-patch+json') || contentType.startsWith('application/apply-patch')) return asObject(mergePatch(base, body));
    } catch (e) {
      if (e instanceof HttpError) throw e;
      throw new HttpError(422, 'Invalid', `the patch could not be applied: ${(e as Error).message}`);
    }
    throw new HttpError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`);
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
      for (const o of this.list(w.resource)) if (matches(w, w.resource, o)) res.write(eventLine(w, 'ADDED', o));
    } else {
      for (const h of this.history) {
        if (h.rv > from && matches(w, h.resource, h.object)) res.write(eventLine(w, h.type, h.object));
      }
    }
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }
}

/** The unit tests' name for the server (the same class; every lab behaviour is off unless asked for). */
export { LabApiServer as FakeApiServer };

/** The operator's API client pointing at the server (TLS not verified), with `token` as bearer token if given. */
export function clientFor(server: LabApiServer, token?: string): KubeClient {
  return KubeClient.fromCredentials({ server: server.url, insecureSkipTLSVerify: true, ...(token ? { token } : {}) });
}

/** A kubeconfig file's text for kubectl: the server, its CA (or insecure-skip-tls-verify), a bearer token. */
export function kubeconfigYaml(url: string, token: string, caFile?: string): string {
  const tls = url.startsWith('https') ? (caFile ? `    certificate-authority: ${caFile}\n` : '    insecure-skip-tls-verify: true\n') : '';
  return `apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: ${url}\n${tls}users:\n- name: lab\n  user:\n    token: ${token}\n` +
    'contexts:\n- name: lab\n  context:\n    cluster: lab\n    user: lab\ncurrent-context: lab\n';
}

let openApiDocs: OpenApiDocuments | undefined;

/** The OpenAPI documents (built on first use, the same for every server: the built-ins and crds/). */
function openApi(): OpenApiDocuments {
  openApiDocs ??= new OpenApiDocuments(buildDefinitions(PROJECT_CRDS.map((c) => readCrd(c))));
  return openApiDocs;
}

/**
 * Field validation of a written object as kube-apiserver does it for `directive` (openapi.ts):
 * Strict throws a 400 naming the unknown fields, Warn drops them with a Warning header each,
 * Ignore drops them; no directive: nothing.
 */
function validateFields(res: ServerResponse, resource: ResourceName, obj: unknown, directive: string | null): void {
  if (directive === null || directive === '') return;
  if (!['Strict', 'Warn', 'Ignore'].includes(directive)) throw new HttpError(400, 'BadRequest', `fieldValidation must be one of Ignore, Warn, Strict, got "${directive}"`);
  const info: ResourceInfo = RESOURCES[resource];
  const defs: Definitions = openApi().defs;
  const def = definitionOf(defs, info.group, info.version, info.kind);
  if (!def) return;
  const mode = directive as FieldValidation;
  const unknown = unknownFields(defs, def, obj, mode !== 'Strict');
  if (!unknown.length || mode === 'Ignore') return;
  const named = unknown.map((f) => `unknown field "${f}"`);
  if (mode === 'Strict') {
    throw new HttpError(400, 'BadRequest', `${info.kind} in version "${info.version}" cannot be handled as a ${info.kind}: strict decoding error: ${named.join(', ')}`);
  }
  res.setHeader('Warning', named.map((w) => `299 - ${JSON.stringify(w)}`));
}

/** One watch event line: the object, or for a Table watch a one-row Table of it. */
function eventLine(w: Watcher, type: WatchType, o: Obj): string {
  return `${JSON.stringify({ type, object: w.table ? tableOf(w.resource, [o], true) : o })}\n`;
}

function matches(f: Omit<Filter, 'fields' | 'labels'> & Partial<Filter>, resource: ResourceName, o: Obj): boolean {
  return f.resource === resource && (f.namespace === undefined || o.metadata.namespace === f.namespace) &&
    selects(f.fields ?? [], (k) => fieldAt(o, k)) && selects(f.labels ?? [], (k) => o.metadata.labels?.[k]);
}

async function readBody(req: IncomingMessage, contentType: string): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new HttpError(413, 'RequestEntityTooLarge', 'the request body is too large');
    chunks.push(c as Buffer);
  }
  if (!chunks.length) return undefined;
  if (contentType.includes('protobuf')) {
    // kubectl's typed generators (`kubectl create service ...`) send protobuf; only JSON and YAML are decoded here.
    throw new HttpError(415, 'UnsupportedMediaType', 'the lab API server decodes JSON and YAML bodies only, not protobuf (use kubectl create/apply -f)');
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text.trim()) return undefined;
  // Server-side apply bodies are YAML (JSON is YAML too); everything else is JSON.
  return contentType.startsWith('application/apply-patch+yaml') || contentType.startsWith('application/yaml') ? parseYaml(text) : JSON.parse(text);
}

/** The body as an object with metadata, or a 400. */
function asObject(body: unknown): Obj {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'BadRequest', 'the request body must be a JSON object');
  const o = body as Obj;
  if (o.metadata !== undefined && (typeof o.metadata !== 'object' || o.metadata === null || Array.isArray(o.metadata))) {
    throw new HttpError(400, 'BadRequest', 'metadata must be an object');
  }
  o.metadata ??= { name: '' };
  if (o.metadata.name !== undefined && typeof o.metadata.name !== 'string') throw new HttpError(400, 'BadRequest', 'metadata.name must be a string');
  return o;
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function conflict(resource: string, name: string): HttpError {
  return new HttpError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`);
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

function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'content-type': 'text/plain' });
  res.end(text);
}

function sendStatus(res: ServerResponse, code: number, reason: string, message: string, headers: Record<string, string> = {}): void {
  send(res, code, statusObject(code, reason, message), headers);
}
