// A small Kubernetes API server over real HTTP(S): the unit tests' fake (client-node's real
// informers, watch and generated API clients exercised end to end, nothing of client-node mocked)
// and the lab cluster's control plane (`lab` options, apiserver-main.ts). Lab tooling: never
// imported by the operator. What it keeps of kube-apiserver, its rooms (objects, watch,
// admission, rbac, http) and its test controls: docs/lab-cluster.md. This file puts the rooms
// together behind the server's API.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { KubeClient } from '../../src/kube/client.js';
import { LabControlPlane } from './admission.js';
import type { Change, Fault, LabApiServerOptions, Obj, RecordedRequest } from './api-types.js';
import { EtcdStore, type StoredState } from './etcd.js';
import { handleUpgrade } from './exec.js';
import { type ApiCore, Faults, createFrom, handleRequest } from './http.js';
import { ObjectStore } from './objects.js';
import { type RbacPolicy, parseRbac, withStored } from './rbac.js';
import { sendStatus } from './status.js';
import type { ResourceName } from './store.js';
import { WatchHub } from './watch.js';

export { RESOURCES, type ResourceName } from './store.js';
export type { AuthOptions, Fault, LabApiServerOptions, LabOptions, RecordedRequest } from './api-types.js';
/** The unit tests' name for the options. */
export type FakeApiServerOptions = LabApiServerOptions;

/** The API server (see the file comment). */
export class LabApiServer implements ApiCore {
  readonly requests: RecordedRequest[] = [];
  readonly faults = new Faults();
  readonly watches: WatchHub;
  private readonly store: ObjectStore;
  private readonly controlPlane: LabControlPlane | undefined;
  private readonly staticRbac: RbacPolicy;
  private readonly sockets = new Set<Socket>();
  private isDown = false;

  private constructor(private readonly server: Server, readonly opts: LabApiServerOptions, private readonly etcd?: { store: EtcdStore; state: StoredState }) {
    this.store = new ObjectStore((c: Change) => this.watches.publish(c), {
      ...(etcd ? { persisted: { state: etcd.state, sink: etcd.store } } : {}), ...(opts.lab?.clock ? { clock: opts.lab.clock } : {}),
    });
    this.watches = new WatchHub(this.store, opts.goneAs);
    this.staticRbac = parseRbac(opts.auth?.rbacYaml ?? []);
    this.controlPlane = opts.lab ? new LabControlPlane(opts.lab, this) : undefined;
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
      handleRequest(this, req, res).catch((e: unknown) => {
        if (!res.headersSent) sendStatus(res, 500, 'InternalError', `internal error: ${(e as Error).message}`);
        else res.destroy();
      });
    });
    // kubectl exec: an upgrade to WebSocket (exec.ts).
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => handleUpgrade(this, req, socket, head));
    const a = server.address();
    this.controlPlane?.bootstrap(a && typeof a !== 'string' ? a.port : 443);
  }

  /**
   * Starts a server on `host` (default 127.0.0.1) and `port` (default a free one), with `etcd`
   * from what etcd holds; rejects when it cannot listen or etcd cannot be read.
   */
  static async start(opts: LabApiServerOptions = {}): Promise<LabApiServer> {
    let etcd: { store: EtcdStore; state: StoredState } | undefined;
    if (opts.etcd) {
      const store = new EtcdStore(opts.etcd);
      etcd = { store, state: await store.load() };
    }
    const server = (opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }) : createServer()) as Server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
    });
    return new LabApiServer(server, opts, etcd);
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
    return this.store.resourceVersion;
  }

  /** Open watch connections. */
  get openWatches(): number {
    return this.watches.open;
  }

  /** Creates or replaces an object as given, without admission (ADDED or MODIFIED); returns it as stored. */
  put(resource: ResourceName, object: object): Obj {
    const o = this.store.put(resource, object);
    this.controlPlane?.written(resource, o);
    return o;
  }

  /** Creates an object through admission (defaulting, Service allocation), as a POST does; throws an Error (409 exists, 422 invalid). */
  create(resource: ResourceName, object: object): Obj {
    const o = structuredClone(object) as Obj;
    return createFrom(this, resource, o.metadata?.namespace, o);
  }

  /** Deletes an object at once (DELETED, with a new resourceVersion); false when it did not exist. A Namespace takes its objects along. */
  remove(resource: ResourceName, name: string, namespace?: string): boolean {
    if (!this.store.remove(resource, name, namespace)) return false;
    if (resource === 'namespaces') {
      for (const [r, x] of this.store.inNamespace(name)) this.remove(r, x.metadata.name, name);
    }
    this.controlPlane?.removed(resource, name, namespace);
    return true;
  }

  /** An object as stored, or undefined. */
  get(resource: ResourceName, name: string, namespace?: string): Obj | undefined {
    return this.store.get(resource, name, namespace);
  }

  /** Every object of a resource. */
  list(resource: ResourceName): Obj[] {
    return this.store.list(resource);
  }

  admit(resource: ResourceName, o: Obj, old: Obj | undefined): Obj {
    return this.controlPlane ? this.controlPlane.admit(resource, o, old) : o;
  }

  delete(resource: ResourceName, current: Obj, asked: string | number | null | undefined): Obj {
    if (this.controlPlane) return this.controlPlane.delete(resource, current, asked);
    this.remove(resource, current.metadata.name, current.metadata.namespace);
    return current;
  }

  /** The RBAC policy: the static documents and the ClusterRoles/Bindings created through the API. */
  policy(): RbacPolicy {
    return withStored(this.staticRbac, [...this.list('clusterroles'), ...this.list('clusterrolebindings')]);
  }

  beforeRequest(): void {
    this.expireEvents();
  }

  /** Ends every open watch: `abrupt` resets the connections, otherwise they end cleanly (as at a watch timeout). */
  dropWatches(abrupt = false): void {
    this.watches.drop(abrupt);
  }

  /** Resets every connection and refuses (resets) new ones until up(). */
  down(): void {
    this.isDown = true;
    this.watches.forget();
    for (const s of this.sockets) s.destroy();
  }

  up(): void {
    this.isDown = false;
  }

  /** Forgets the history: watches from any resourceVersion before now get 410 Gone. */
  compact(): void {
    this.store.compact();
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch. */
  bookmark(): void {
    this.watches.bookmark();
  }

  /** Answers matching requests with an error until clearFaults() (or `times` requests). */
  fail(fault: Fault): void {
    this.faults.add(fault);
  }

  /** Removes every injected fault (stalls and pending corruptions included). */
  clearFaults(): void {
    this.faults.clear();
    this.watches.clearFaults();
  }

  /** The next watch event of `resource` reaches its watchers as a malformed (truncated) JSON line. */
  corruptNextEvent(resource: ResourceName): void {
    this.watches.corruptNext(resource);
  }

  /** Watches of `resource`, open and new, stay connected but send nothing until unstall(). */
  stall(resource: ResourceName): void {
    this.watches.stall(resource);
  }

  /** New events reach new watches again (watches that stalled missed theirs for good, as on a dead link). */
  unstall(resource: ResourceName): void {
    this.watches.unstall(resource);
  }

  /** When an object was last written (ms), or undefined when it does not exist. */
  writtenAt(resource: ResourceName, name: string, namespace?: string): number | undefined {
    return this.store.writtenAt(resource, name, namespace);
  }

  /** Resolves once every change so far is in etcd (at once without etcd). */
  async flushed(): Promise<void> {
    await this.etcd?.store.flush();
  }

  /** Stops listening and resets every connection; pending pod grace timers are dropped; every change is in etcd before it resolves. */
  async close(): Promise<void> {
    this.controlPlane?.stop();
    this.down();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.etcd?.store.close();
  }

  /** Deletes the Events whose TTL ran out since their last write (DELETED to watchers); run before every request. */
  expireEvents(): void {
    this.controlPlane?.expireEvents();
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
