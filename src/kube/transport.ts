// One HTTP(S) request to the API server within its deadlines and size bounds, and the error an
// answer other than 2xx becomes. KubeClient (client.ts) adds the server, the agent and the
// credentials; the bounds and why they are what they are: docs/kube-client.md.
import type { Agent as HttpAgent, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import { http, https } from '../util/node-http.js';

/**
 * An API answer other than 2xx: `code` and `headers` as client-node's ApiException has them
 * (informer.ts reads both).
 */
export class KubeApiError extends Error {
  constructor(readonly code: number, readonly body: string, readonly headers: Record<string, string>, what: string) {
    super(`${what}: HTTP ${code} ${http.STATUS_CODES[code] ?? ''}`.trimEnd());
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

/** How long a request may take, step by step (a watch's open-ended body has only the first two). */
export interface Deadlines { connectMs: number; firstByteMs: number; totalMs: number }
/**
 * 10 s to connect, 30 s to the answer's headers, 60 s for the whole answer (client-go's defaults
 * are in that range).
 */
export const defaultDeadlines: Deadlines = { connectMs: 10_000, firstByteMs: 30_000, totalMs: 60_000 };

/**
 * The deadlines for a whole-request bound of `totalMs` (`--api-timeout`): the steps keep their
 * defaults when shorter.
 */
export function deadlinesFor(totalMs: number): Deadlines {
  return {
    connectMs: Math.min(defaultDeadlines.connectMs, totalMs),
    firstByteMs: Math.min(defaultDeadlines.firstByteMs, totalMs),
    totalMs,
  };
}
/** What one answer may hold: the memory the API edge can be made to use. */
export interface ApiLimits { maxResponseBytes: number; maxWatchLineBytes: number; maxPages: number }
/** 256 MiB per answer (a page of 500 objects is far less), 16 MiB per watch line, 10 000 pages per list. */
export const defaultApiLimits: ApiLimits = {
  maxResponseBytes: 256 * 1024 * 1024, maxWatchLineBytes: 16 * 1024 * 1024, maxPages: 10_000,
};

/** A response whose headers arrived; `abort(err)` drops it (`err` undefined: clears the timers). */
export interface Answer { res: IncomingMessage; what: string; abort(err: Error | undefined): void }

export function headerMap(headers: IncomingHttpHeaders): Record<string, string> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) h[k] = Array.isArray(v) ? v.join(', ') : v;
  return h;
}

/** At most `max` bytes of a response body as text (an error answer's Status). */
export function readCapped(res: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => { if (size < max) { chunks.push(c); size += c.length; } });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
    res.on('error', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
    res.on('close', () => resolve(Buffer.concat(chunks).toString('utf8').slice(0, max)));
  });
}

/** node-fetch's Headers, a plain record or nothing, as a plain record. */
export function headerRecord(h: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!h || typeof h !== 'object') return out;
  const forEach = (h as { forEach?: unknown }).forEach;
  if (typeof forEach === 'function') {
    (h as { forEach(cb: (v: string, k: string) => void): void }).forEach((v, k) => { out[k] = v; });
  } else {
    for (const [k, v] of Object.entries(h as Record<string, unknown>)) {
      if (typeof v === 'string' || typeof v === 'number') out[k] = String(v);
    }
  }
  return out;
}

/** `server + path` with the query's set fields (undefined and "" are left out). */
export function requestUrl(server: string, path: string, query: RequestOptions['query']): URL {
  const url = new URL(server + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
  return url;
}

/** How to send one request: the agent and headers of the client, its deadlines. */
export interface Sending {
  method: string;
  agent: HttpAgent | HttpsAgent;
  headers: Record<string, string>;
  body: Buffer | undefined;
  deadlines: Deadlines;
  /** Whether the whole-request deadline applies too (until abort()). */
  total: boolean;
  signal?: AbortSignal;
}

/**
 * Sends a request and resolves with the response once its headers arrive, within the connect
 * and first-byte deadlines. `abort(err)` drops the connection (`err` undefined: just clears
 * the timers); with `total`, the whole-request deadline also applies until abort().
 */
export function sendRequest(url: URL, s: Sending): Promise<Answer> {
  const { method, agent, headers, body, total, signal } = s;
  const send = url.protocol === 'https:' ? https.request : http.request;
  const what = `${method} ${url.pathname}`;
  const d = s.deadlines;
  return new Promise((resolve, reject) => {
    const timers: NodeJS.Timeout[] = [];
    const clear = () => { for (const t of timers) clearTimeout(t); timers.length = 0; };
    const fail = (err: Error) => { clear(); req.destroy(err); reject(err); };
    const late = (ms: number, step: string) =>
      Object.assign(new Error(`${what}: ${step} within ${ms / 1000} s`), { timedOut: true });
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
    req.on('socket', (sock) => {
      if (!sock.connecting) return;
      const t = setTimeout(() => fail(late(d.connectMs, 'no connection')), d.connectMs).unref();
      timers.push(t);
      sock.once('connect', () => clearTimeout(t));
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

/**
 * The parsed JSON body of an answer; rejects with KubeApiError for non-2xx answers, and drops
 * the connection once the body passes `limits.maxResponseBytes` (`tooLarge` set).
 */
export function readJsonAnswer<T>({ res, what, abort }: Answer, client: { readonly limits: ApiLimits }): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > client.limits.maxResponseBytes) {
        const max = client.limits.maxResponseBytes;
        abort(Object.assign(new Error(`${what}: the answer passed ${max} bytes; dropped`), { tooLarge: true }));
        return;
      }
      chunks.push(c);
    });
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error(`${what}: the connection ended before the whole answer`));
    });
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
