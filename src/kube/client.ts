// The operator's connection to the Kubernetes API: where the server is, how to trust it, who we
// are, and plain JSON requests. client-node's generated API classes and its KubeConfig pull in
// its whole generated client (about 1 000 modules: ~0.5 s of start-up on the host, several
// seconds under TCG, and ~45 MB of RSS on every node) for the eight calls the operator makes, so
// those are made here, and so are the lists and watches (reflector.ts), every one with deadlines
// and size bounds (docs/kube-client.md). Only client-node's public API is used.
//
// Credentials, as client-go resolves them: `--kubeconfig`; else the in-cluster service account
// (KUBERNETES_SERVICE_HOST/PORT, its CA and a token file re-read every minute, since bound tokens
// rotate); else $KUBECONFIG or ~/.kube/config. A kubeconfig this class does not read itself
// (exec or auth-provider users, proxy-url, several files in $KUBECONFIG, no file at all) is
// handed to client-node's KubeConfig, loaded only then, whose headers and agent are used as is.
import { closeSync, constants, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { Agent as HttpAgent, type IncomingHttpHeaders, type IncomingMessage, STATUS_CODES, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { parse as parseYaml } from 'yaml';

/** An API answer other than 2xx: `code` and `headers` as client-node's ApiException has them (informer.ts reads both). */
export class KubeApiError extends Error {
  constructor(readonly code: number, readonly body: string, readonly headers: Record<string, string>, what: string) {
    super(`${what}: HTTP ${code} ${STATUS_CODES[code] ?? ''}`.trimEnd());
    this.name = 'KubeApiError';
  }
}

/** What a request needs besides method and path. */
export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as application/json. */
  body?: unknown;
  /** Aborting it drops the request (stop() of an informer waiting on a silent server). */
  signal?: AbortSignal;
}

/** Where the server is and who we are, resolved from a kubeconfig or the service account. */
export interface Credentials {
  server: string;
  /** PEM text. */
  ca?: string;
  cert?: string;
  key?: string;
  insecureSkipTLSVerify?: boolean;
  tlsServerName?: string;
  token?: string;
  /** Re-read at most once a minute (client-go does the same for rotated service-account tokens). */
  tokenFile?: string;
  username?: string;
  password?: string;
}

/** What client-node's KubeConfig offers that Watch and this class use (a loaded KubeConfig satisfies it). */
export interface FetchConfig {
  getCurrentCluster(): { server: string } | null;
  applyToFetchOptions(opts: object): Promise<{ agent?: unknown; headers?: unknown }>;
}

const TOKEN_REREAD_MS = 60_000;
/** Certificates, keys, tokens and kubeconfigs are small: a larger "file" is refused. */
const MAX_CREDENTIAL_BYTES = 1 << 20;

/** No kubeconfig was found and this is not a pod: the message names what was looked for. */
export class NoCredentialsError extends Error {
  override name = 'NoCredentialsError';
}

/**
 * A small regular file's text, read through one descriptor opened non-blocking (a FIFO in its
 * place never blocks start-up) and at most `max` bytes.
 */
export function readSmallFile(path: string, max = MAX_CREDENTIAL_BYTES): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (let r = 1; r > 0 && n <= max; n += r) r = readSync(fd, buf, n, max + 1 - n, null);
    if (n > max) throw new Error(`${path} is larger than ${max} bytes`);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** How long a request may take, step by step (a watch's open-ended body has only the first two). */
export interface Deadlines { connectMs: number; firstByteMs: number; totalMs: number }
/** 10 s to connect, 30 s to the answer's headers, 60 s for the whole answer (client-go's defaults are in that range). */
export const defaultDeadlines: Deadlines = { connectMs: 10_000, firstByteMs: 30_000, totalMs: 60_000 };

/** The deadlines for a whole-request bound of `totalMs` (`--api-timeout`): the steps keep their defaults when shorter. */
export function deadlinesFor(totalMs: number): Deadlines {
  return { connectMs: Math.min(defaultDeadlines.connectMs, totalMs), firstByteMs: Math.min(defaultDeadlines.firstByteMs, totalMs), totalMs };
}
/** What one answer may hold: the memory the API edge can be made to use. */
export interface ApiLimits { maxResponseBytes: number; maxWatchLineBytes: number; maxPages: number }
/** 256 MiB per answer (a page of 500 objects is far less), 16 MiB per watch line, 10 000 pages per list. */
export const defaultApiLimits: ApiLimits = { maxResponseBytes: 256 * 1024 * 1024, maxWatchLineBytes: 16 * 1024 * 1024, maxPages: 10_000 };

/** A watch that sent nothing for the idle timeout: the connection is presumed dead. */
export class WatchStalledError extends Error {
  constructor(readonly idleMs: number) {
    super(`watch stalled (no data for ${idleMs} ms)`);
  }
}

function headerMap(headers: IncomingHttpHeaders): Record<string, string> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) h[k] = Array.isArray(v) ? v.join(', ') : v;
  return h;
}

/** At most `max` bytes of a response body as text (an error answer's Status). */
function readCapped(res: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => { if (size < max) { chunks.push(c); size += c.length; } });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
    res.on('error', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
    res.on('close', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
  });
}

/** The Kubernetes API over HTTP(S), plain JSON in and out. */
export class KubeClient implements FetchConfig {
  readonly server: string;
  private readonly agent: HttpAgent | HttpsAgent;
  private token: { value: string; readAt: number } | undefined;
  /** Deadlines of every request (watches: connect and first byte only); settable before use. */
  deadlines: Deadlines = { ...defaultDeadlines };
  /** Bounds on what one answer may hold. */
  limits: ApiLimits = { ...defaultApiLimits };

  private constructor(private readonly creds: Credentials | undefined, private readonly delegate: FetchConfig | undefined) {
    this.server = (creds?.server ?? delegate?.getCurrentCluster()?.server ?? '').replace(/\/+$/, '');
    if (!this.server) throw new Error('the kubeconfig names no server');
    let url: URL;
    try {
      url = new URL(this.server);
    } catch {
      throw new Error(`the kubeconfig's cluster.server ${JSON.stringify(this.server)} is not a URL (expected https://HOST:PORT)`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`the Kubernetes API server ${this.server} is not an http(s) URL`);
    this.agent = url.protocol === 'https:'
      ? new HttpsAgent({
        keepAlive: true, ca: creds?.ca, cert: creds?.cert, key: creds?.key, servername: creds?.tlsServerName,
        ...(creds?.insecureSkipTLSVerify ? { rejectUnauthorized: false } : {}),
      })
      : new HttpAgent({ keepAlive: true });
  }

  /** A client for these credentials. */
  static fromCredentials(creds: Credentials): KubeClient {
    return new KubeClient(creds, undefined);
  }

  /** A client whose headers and agent come from client-node's KubeConfig (auth plugins, proxies). */
  static fromKubeConfig(kc: FetchConfig): KubeClient {
    return new KubeClient(undefined, kc);
  }

  /** For client-node's Watch: the server it connects to. */
  getCurrentCluster(): { name: string; server: string; skipTLSVerify: boolean } {
    return { name: 'current', server: this.server, skipTLSVerify: this.creds?.insecureSkipTLSVerify ?? false };
  }

  /** For client-node's Watch (node-fetch options): the agent and the Authorization header. */
  async applyToFetchOptions(_opts: object = {}): Promise<{ agent: HttpAgent | HttpsAgent; headers: Record<string, string> }> {
    if (this.delegate) {
      const o = await this.delegate.applyToFetchOptions({});
      return { agent: (o.agent as HttpAgent | undefined) ?? this.agent, headers: headerRecord(o.headers) };
    }
    const auth = this.authorization();
    return { agent: this.agent, headers: auth ? { Authorization: auth } : {} };
  }

  /**
   * One request; resolves with the parsed JSON body, rejects with KubeApiError for non-2xx answers.
   * Bounded: the connection within `deadlines.connectMs`, the answer's headers within
   * `firstByteMs`, the whole body within `totalMs` and `limits.maxResponseBytes`; past any of
   * them the connection is dropped and the promise rejects (`timedOut` or `tooLarge` set).
   */
  async request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const body = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const { res, what, abort } = await this.open(method, path, opts.query, body, true, opts.signal);
    return new Promise<T>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > this.limits.maxResponseBytes) {
          abort(Object.assign(new Error(`${what}: the answer passed ${this.limits.maxResponseBytes} bytes; dropped`), { tooLarge: true }));
          return;
        }
        chunks.push(c);
      });
      res.on('error', reject);
      res.on('close', () => { if (!res.complete) reject(new Error(`${what}: the connection ended before the whole answer`)); });
      res.on('end', () => {
        abort(undefined);
        const text = Buffer.concat(chunks).toString('utf8');
        const code = res.statusCode ?? 0;
        if (code < 200 || code > 299) {
          reject(new KubeApiError(code, text, headerMap(res.headers), what));
          return;
        }
        try {
          resolve((text ? JSON.parse(text) : {}) as T);
        } catch {
          reject(new Error(`${what}: the answer is not JSON: ${text.slice(0, 200)}`));
        }
      });
    });
  }

  /**
   * A watch: GET `path` with `query`, the body read line by line. `onLine` gets each line (at most
   * `limits.maxWatchLineBytes`; a longer one ends the watch with an error). The connection and the
   * answer's headers have the request deadlines; after that the stream is open-ended, and `idleMs`
   * (> 0) ends it with WatchStalledError when no byte arrives for that long. `done` resolves when
   * the server ends the stream, rejects on any failure or `abort(err)`; `abort()` alone resolves it.
   */
  watchStream(path: string, query: RequestOptions['query'], onLine: (line: string) => void, idleMs: number, onOpen?: () => void): { done: Promise<void>; abort(err?: Error): void } {
    let abortIt: ((err: Error | undefined) => void) | undefined;
    let aborted: { err: Error | undefined } | undefined;
    const done = (async () => {
      const { res, what, abort } = await this.open('GET', path, query, undefined, false);
      // Ending a watch always drops its connection (an error or not), so no old stream lingers.
      const drop = (err: Error | undefined) => abort(err ?? Object.assign(new Error(`${what}: watch ended`), { stopped: true }));
      abortIt = drop;
      if (aborted) drop(aborted.err);
      const code = res.statusCode ?? 0;
      if (code < 200 || code > 299) {
        const text = await readCapped(res, 65_536);
        abort(undefined);
        throw new KubeApiError(code, text, headerMap(res.headers), what);
      }
      onOpen?.();
      await new Promise<void>((resolve, reject) => {
        let pending: Buffer[] = [];
        let pendingBytes = 0;
        let idle: NodeJS.Timeout | undefined;
        const arm = () => {
          if (idleMs <= 0) return;
          clearTimeout(idle);
          idle = setTimeout(() => abort(new WatchStalledError(idleMs)), idleMs);
          idle.unref?.();
        };
        arm();
        res.on('data', (c: Buffer) => {
          arm();
          let start = 0;
          for (let nl = c.indexOf(10); nl !== -1; nl = c.indexOf(10, start)) {
            const piece = c.subarray(start, nl);
            const line = pendingBytes ? Buffer.concat([...pending, piece]).toString('utf8') : piece.toString('utf8');
            pending = [];
            pendingBytes = 0;
            start = nl + 1;
            if (line.trim()) onLine(line);
          }
          if (start < c.length) {
            pending.push(c.subarray(start));
            pendingBytes += c.length - start;
            if (pendingBytes > this.limits.maxWatchLineBytes) {
              abort(Object.assign(new Error(`${what}: a watch line passed ${this.limits.maxWatchLineBytes} bytes; dropped`), { tooLarge: true }));
            }
          }
        });
        const end = (err?: Error) => {
          clearTimeout(idle);
          if (err) reject(err);
          else resolve();
        };
        res.on('error', (e) => end(e));
        res.on('end', () => end());
        res.on('close', () => end(res.complete ? undefined : new Error(`${what}: the watch connection closed`)));
        abortIt = (err) => { drop(err); end(err); };
        if (aborted) abortIt(aborted.err);
      });
    })();
    return {
      done,
      abort: (err?: Error) => {
        aborted ??= { err };
        abortIt?.(err);
      },
    };
  }

  /**
   * Sends a request and resolves with the response once its headers arrive, within the connect
   * and first-byte deadlines. `abort(err)` drops the connection (`err` undefined: just clears
   * the timers); with `total`, the whole-request deadline also applies until abort().
   */
  private async open(method: string, path: string, query: RequestOptions['query'], body: Buffer | undefined, total: boolean, signal?: AbortSignal):
    Promise<{ res: IncomingMessage; what: string; abort(err: Error | undefined): void }> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const { agent, headers } = await this.applyToFetchOptions();
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const what = `${method} ${url.pathname}`;
    const d = this.deadlines;
    return new Promise((resolve, reject) => {
      const timers: NodeJS.Timeout[] = [];
      const clear = () => { for (const t of timers) clearTimeout(t); timers.length = 0; };
      const fail = (err: Error) => { clear(); req.destroy(err); reject(err); };
      const late = (ms: number, step: string) => Object.assign(new Error(`${what}: ${step} within ${ms / 1000} s`), { timedOut: true });
      const req = send(url, {
        method, agent,
        headers: {
          ...headers, Accept: 'application/json',
          ...(body ? { 'Content-Type': 'application/json', 'Content-Length': body.length } : {}),
        },
      }, (res) => {
        clearTimeout(firstByte);
        resolve({ res, what, abort: (err) => { clear(); if (err) { req.destroy(err); res.destroy(err); } } });
      });
      req.on('socket', (s) => {
        if (!s.connecting) return;
        const t = setTimeout(() => fail(late(d.connectMs, 'no connection')), d.connectMs).unref();
        timers.push(t);
        s.once('connect', () => clearTimeout(t));
      });
      const firstByte = setTimeout(() => fail(late(d.firstByteMs, 'no answer')), d.firstByteMs).unref();
      timers.push(firstByte);
      if (total) timers.push(setTimeout(() => fail(late(d.totalMs, 'the answer did not end')), d.totalMs).unref());
      req.on('error', (e) => { clear(); reject(e); });
      if (signal) {
        const onAbort = () => fail(Object.assign(new Error(`${what}: aborted`), { aborted: true }));
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        req.on('close', () => signal.removeEventListener('abort', onAbort));
      }
      req.end(body);
    });
  }

  /** Ends the kept-alive connections (the watches end with their own requests). */
  close(): void {
    this.agent.destroy();
  }

  private authorization(): string | undefined {
    const c = this.creds!;
    if (c.tokenFile) {
      const now = Date.now();
      if (!this.token || now - this.token.readAt >= TOKEN_REREAD_MS) {
        try {
          const value = readSmallFile(c.tokenFile).trim();
          if (!value) throw new Error('it is empty');
          this.token = { value, readAt: now };
        } catch (e) {
          // A token being rotated can be missing or empty for a moment: the last good one is used
          // meanwhile, and read again at the next request.
          if (!this.token) throw new Error(`reading the token file ${c.tokenFile}: ${(e as Error).message}`);
        }
      }
      return `Bearer ${this.token.value}`;
    }
    if (c.token) return `Bearer ${c.token}`;
    if (c.username !== undefined) return `Basic ${Buffer.from(`${c.username}:${c.password ?? ''}`).toString('base64')}`;
    return undefined;
  }
}

/** node-fetch's Headers, a plain record or nothing, as a plain record. */
function headerRecord(h: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h || typeof h !== 'object') return out;
  const forEach = (h as { forEach?: unknown }).forEach;
  if (typeof forEach === 'function') {
    (h as { forEach(cb: (v: string, k: string) => void): void }).forEach((v, k) => { out[k] = v; });
  } else {
    for (const [k, v] of Object.entries(h as Record<string, unknown>)) if (typeof v === 'string' || typeof v === 'number') out[k] = String(v);
  }
  return out;
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The in-cluster service account's credentials (client-go's rest.InClusterConfig). */
export function inClusterCredentials(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT): Credentials {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set');
  const tokenFile = join(dir, 'token');
  if (!existsSync(tokenFile)) throw new Error(`in-cluster configuration: no service account token at ${tokenFile}`);
  const caFile = join(dir, 'ca.crt');
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ...(existsSync(caFile) ? { ca: readSmallFile(caFile) } : {}),
    tokenFile,
  };
}

/** Thrown when a kubeconfig asks for what only client-node's KubeConfig does (the caller hands it over). */
export class NeedsClientNode extends Error {}

type Rec = Record<string, unknown>;
const rec = (v: unknown): Rec => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Rec : {});

/**
 * The current context's credentials from a kubeconfig's text (kubectl's rules: file paths are
 * relative to the kubeconfig's directory; `-data` fields are base64). Throws NeedsClientNode for
 * exec and auth-provider users and proxy-url clusters; a plain Error for a broken file.
 */
export function kubeconfigCredentials(text: string, file: string): Credentials {
  let doc: Rec;
  try {
    doc = rec(parseYaml(text));
  } catch (e) {
    throw new Error(`kubeconfig ${file}: not YAML: ${(e as Error).message.split('\n')[0]}`);
  }
  // A field of the wrong type is an error naming it, as kubectl refuses to unmarshal it; absent or "" is unset.
  const str = (v: unknown, field = ''): string | undefined => {
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new Error(`kubeconfig ${file}: ${field} must be a string, not ${JSON.stringify(v)}`);
    return v;
  };
  const named = (list: unknown, name: string | undefined, what: string): Rec => {
    const found = Array.isArray(list) ? list.map(rec).find((e) => e.name === name) : undefined;
    if (!found) throw new Error(`kubeconfig ${file}: no ${what} named ${JSON.stringify(name ?? '')}`);
    return rec(found[what]);
  };
  const current = str(doc['current-context'], 'current-context');
  if (!current) throw new Error(`kubeconfig ${file}: no current-context`);
  const context = named(doc.contexts, current, 'context');
  const cluster = named(doc.clusters, str(context.cluster, 'context.cluster'), 'cluster');
  const userName = str(context.user, 'context.user');
  const user = userName ? named(doc.users, userName, 'user') : {};
  if (user.exec !== undefined || user['auth-provider'] !== undefined || cluster['proxy-url'] !== undefined) throw new NeedsClientNode();
  const server = str(cluster.server, 'cluster.server');
  if (!server) throw new Error(`kubeconfig ${file}: cluster ${JSON.stringify(context.cluster)} has no server`);
  const path = (p: string) => (isAbsolute(p) ? p : join(dirname(file), p));
  const pem = (data: unknown, fileField: unknown, what: string): string | undefined => {
    const d = str(data, `${what}-data`);
    if (d) return Buffer.from(d, 'base64').toString('utf8');
    const f = str(fileField, what);
    if (!f) return undefined;
    try {
      return readSmallFile(path(f));
    } catch (e) {
      throw new Error(`kubeconfig ${file}: reading ${what} ${f}: ${(e as Error).message}`);
    }
  };
  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') throw new Error(`kubeconfig ${file}: insecure-skip-tls-verify must be true or false, not ${JSON.stringify(insecure)}`);
  const tokenFile = str(user.tokenFile, 'tokenFile');
  return {
    server,
    ca: pem(cluster['certificate-authority-data'], cluster['certificate-authority'], 'certificate-authority'),
    cert: pem(user['client-certificate-data'], user['client-certificate'], 'client-certificate'),
    key: pem(user['client-key-data'], user['client-key'], 'client-key'),
    insecureSkipTLSVerify: insecure === true,
    tlsServerName: str(cluster['tls-server-name'], 'tls-server-name'),
    token: str(user.token, 'token'),
    tokenFile: tokenFile ? path(tokenFile) : undefined,
    username: str(user.username, 'username'),
    password: str(user.password, 'password'),
  };
}

/**
 * The operator's client (see the file comment): from `path` (--kubeconfig) when given; else the
 * in-cluster service account when KUBERNETES_SERVICE_HOST is set; else $KUBECONFIG or
 * ~/.kube/config. Throws when the file is unreadable or broken.
 */
export async function loadKubeClient(path?: string, env: NodeJS.ProcessEnv = process.env, serviceAccountDir = SERVICE_ACCOUNT): Promise<KubeClient> {
  if (!path && env.KUBERNETES_SERVICE_HOST) return KubeClient.fromCredentials(inClusterCredentials(env, serviceAccountDir));
  const file = path ?? env.KUBECONFIG ?? join(homedir(), '.kube', 'config');
  const several = !path && (env.KUBECONFIG ?? '').includes(':');
  if (!several && (path || existsSync(file))) {
    let text: string;
    try {
      text = readSmallFile(file);
    } catch (e) {
      throw new Error(`kubeconfig ${file}: ${(e as Error).message}`);
    }
    try {
      return KubeClient.fromCredentials(kubeconfigCredentials(text, file));
    } catch (e) {
      if (!(e instanceof NeedsClientNode)) throw e;
    }
  }
  // Never client-node's fallback to an unauthenticated http://localhost:8080.
  if (!path && !env.KUBECONFIG && !existsSync(file)) {
    throw new NoCredentialsError(`no Kubernetes credentials: no --kubeconfig, not in a pod (KUBERNETES_SERVICE_HOST unset), $KUBECONFIG unset and no ${file}`);
  }
  // What only client-node reads: merged $KUBECONFIG files, auth plugins, proxies.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return KubeClient.fromKubeConfig(kc);
}

/**
 * One page of a list: GET `path` with `limit`, `continue` and the other `query` fields, plain
 * JSON. An answer without an `items` array is an error naming the path (the informer retries it).
 */
export function pager<L extends { items: unknown[] }>(client: KubeClient, path: string, query: RequestOptions['query'] = {}): (cont: string | undefined) => Promise<L> {
  return async (cont) => {
    const page = await client.request<L>('GET', path, { query: { ...query, continue: cont } });
    if (!Array.isArray((page as { items?: unknown } | null)?.items)) throw new Error(`GET ${path}: the answer is not a list (no items array)`);
    return page;
  };
}
