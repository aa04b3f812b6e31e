// The operator's connection to the Kubernetes API: one client for the eight calls it makes and
// its lists and watches, on node's http(s) rather than client-node's generated client (why, and
// the bounds on every request: docs/kube-client.md). Only client-node's public API is used, and
// its KubeConfig only for a kubeconfig credentials.ts does not read (loaded then, its headers
// and agent used as is). Credentials are looked for as client-go does: loadKubeClient below.
import type { Agent as HttpAgent } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import { http, https } from '../util/node-http.js';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  type Credentials, NeedsClientNode, NoCredentialsError, SERVICE_ACCOUNT, inClusterCredentials, kubeconfigCredentials,
  readSmallFile,
} from './credentials.js';
import {
  type Answer, type ApiLimits, type Deadlines, type RequestOptions, defaultApiLimits, defaultDeadlines, headerRecord,
  readJsonAnswer, requestUrl, sendRequest,
} from './transport.js';
import { type WatchHandle, readWatchStream } from './watch-stream.js';

/** What client-node's KubeConfig offers that Watch and this class use (a loaded KubeConfig satisfies it). */
export interface FetchConfig {
  getCurrentCluster(): { server: string } | null;
  applyToFetchOptions(opts: object): Promise<{ agent?: unknown; headers?: unknown }>;
}

const TOKEN_REREAD_MS = 60_000;

/** The Kubernetes API over HTTP(S), plain JSON in and out. */
export class KubeClient implements FetchConfig {
  readonly server: string;
  private readonly agent: HttpAgent | HttpsAgent;
  private token: { value: string; readAt: number } | undefined;
  /** Deadlines of every request (watches: connect and first byte only); settable before use. */
  deadlines: Deadlines = { ...defaultDeadlines };
  /** Bounds on what one answer may hold. */
  limits: ApiLimits = { ...defaultApiLimits };

  private constructor(
    private readonly creds: Credentials | undefined, private readonly delegate: FetchConfig | undefined,
  ) {
    this.server = (creds?.server ?? delegate?.getCurrentCluster()?.server ?? '').replace(/\/+$/, '');
    if (!this.server) throw new Error('the kubeconfig names no server');
    let url: URL;
    try {
      url = new URL(this.server);
    } catch {
      const server = JSON.stringify(this.server);
      throw new Error(`the kubeconfig's cluster.server ${server} is not a URL (expected https://HOST:PORT)`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new Error(`the Kubernetes API server ${this.server} is not an http(s) URL`);
    }
    this.agent = url.protocol === 'https:'
      ? new https.Agent({
        keepAlive: true, ca: creds?.ca, cert: creds?.cert, key: creds?.key, servername: creds?.tlsServerName,
        ...(creds?.insecureSkipTLSVerify ? { rejectUnauthorized: false } : {}),
      })
      : new http.Agent({ keepAlive: true });
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
  async applyToFetchOptions(
    _opts: object = {},
  ): Promise<{ agent: HttpAgent | HttpsAgent; headers: Record<string, string> }> {
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
    return readJsonAnswer<T>(await this.open(method, path, opts.query, body, true, opts.signal), this);
  }

  /**
   * A watch: GET `path` with `query`, the body read line by line. `onLine` gets each line (at most
   * `limits.maxWatchLineBytes`; a longer one ends the watch with an error). The connection and the
   * answer's headers have the request deadlines; after that the stream is open-ended, and `idleMs`
   * (> 0) ends it with WatchStalledError when no byte arrives for that long. `done` resolves when
   * the server ends the stream, rejects on any failure or `abort(err)`; `abort()` alone resolves it.
   */
  watchStream(
    path: string, query: RequestOptions['query'], onLine: (line: string) => void, idleMs: number, onOpen?: () => void,
  ): WatchHandle {
    return readWatchStream(() => this.open('GET', path, query, undefined, false), this, onLine, idleMs, onOpen);
  }

  /** Sends a request with this client's agent, headers and deadlines (transport.ts sendRequest). */
  private async open(
    method: string, path: string, query: RequestOptions['query'], body: Buffer | undefined, total: boolean,
    signal?: AbortSignal,
  ): Promise<Answer> {
    const url = requestUrl(this.server, path, query);
    const { agent, headers } = await this.applyToFetchOptions();
    return sendRequest(url, { method, agent, headers, body, deadlines: this.deadlines, total, signal });
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

/**
 * The operator's client (see the file comment): from `path` (--kubeconfig) when given; else the
 * in-cluster service account when KUBERNETES_SERVICE_HOST is set; else $KUBECONFIG or
 * ~/.kube/config. Throws when the file is unreadable or broken.
 */
export async function loadKubeClient(
  path?: string, env: NodeJS.ProcessEnv = process.env, serviceAccountDir = SERVICE_ACCOUNT,
): Promise<KubeClient> {
  if (!path && env.KUBERNETES_SERVICE_HOST) {
    return KubeClient.fromCredentials(inClusterCredentials(env, serviceAccountDir));
  }
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
    throw new NoCredentialsError('no Kubernetes credentials: no --kubeconfig, '
      + `not in a pod (KUBERNETES_SERVICE_HOST unset), $KUBECONFIG unset and no ${file}`);
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
export function pager<L extends { items: unknown[] }>(
  client: KubeClient, path: string, query: RequestOptions['query'] = {},
): (cont: string | undefined) => Promise<L> {
  return async (cont) => {
    const page = await client.request<L>('GET', path, { query: { ...query, continue: cont } });
    if (!Array.isArray((page as { items?: unknown } | null)?.items)) {
      throw new Error(`GET ${path}: the answer is not a list (no items array)`);
    }
    return page;
  };
}
