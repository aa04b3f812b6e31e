// What every request to the Kubernetes API shares: backoff with jitter, the status, Retry-After
// and description of a failure, a timeout around a promise, a failure log that says each kind
// once, and a bounded pager for lists read once. The informers' loop is reflector.ts.
import { http } from '../util/node-http.js';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { Log } from '../util/log.js';

/**
 * Delays between restarts: initialMs, doubling up to maxMs, each varied by ±jitter/2 (spreads many
 * nodes' reconnects).
 */
export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** 0..1; 0 for exact delays. */
  jitter: number;
}

export const defaultBackoff: Backoff = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };

/** How an informer heals itself; production defaults in `defaultHealing`. */
export interface Healing {
  backoff: Backoff;
  /** Periodic relist interval (varied by ±backoff.jitter/2); 0 turns it off. */
  relistMs: number;
  /** A watch that sends nothing (no event, no bookmark) for this long is ended and restarted; 0 turns it off. */
  idleMs: number;
  /** Asked of the server (timeoutSeconds): it ends each watch cleanly after this, and ListWatch re-watches. */
  watchTimeoutSeconds: number;
  /** A 429's Retry-After is honoured up to this. */
  maxRetryAfterMs: number;
}

/**
 * Relist every 5 min (±10 %), restart a watch silent for 6 min, ask the server to end watches after
 * 5 min, Retry-After up to 5 min.
 */
export const defaultHealing: Healing = { backoff: defaultBackoff, relistMs: 300_000, idleMs: 360_000,
  watchTimeoutSeconds: 300, maxRetryAfterMs: 300_000 };

/** The n-th (0-based) delay of a backoff. */
export function backoffDelay(b: Backoff, n: number, random: () => number = Math.random): number {
  const base = Math.min(b.maxMs, b.initialMs * 2 ** Math.min(n, 30));
  return Math.round(base * (1 + b.jitter * (random() - 0.5)));
}

/** The HTTP status of a client-node error (ApiException.code, Watch's statusCode), if any. */
export function httpStatus(e: unknown): number | undefined {
  const o = e as { code?: unknown; statusCode?: unknown } | undefined;
  if (typeof o?.code === 'number') return o.code;
  if (typeof o?.statusCode === 'number') return o.statusCode;
  return undefined;
}

/** A 429/503 answer's Retry-After in ms (client-node's ApiException keeps the headers), if any. */
export function retryAfterMs(e: unknown): number | undefined {
  const headers = (e as { headers?: unknown } | undefined)?.headers;
  if (!headers || typeof headers !== 'object') return undefined;
  const entry = Object.entries(headers as Record<string, unknown>).find(([k]) => k.toLowerCase() === 'retry-after');
  const seconds = Number(entry?.[1]);
  return entry && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** "403 Forbidden: <the Status message>" for API errors, the first line of the message otherwise. */
export function describeError(e: unknown): string {
  const status = httpStatus(e);
  if (status === undefined) return firstLine(e);
  const body = (e as { body?: unknown }).body;
  let message: unknown;
  try {
    message = (typeof body === 'string' ? (JSON.parse(body) as { message?: unknown })
      : (body as { message?: unknown } | undefined))?.message;
  } catch { /* a body that is not JSON */ }
  const text = http.STATUS_CODES[status] ?? 'Error';
  return `${status} ${text}${typeof message === 'string' && message ? `: ${message}` : ''}`;
}

/** The first line of an error's message (client-node's ApiException messages carry headers after it). */
export function firstLine(e: unknown): string {
  return ((e as Error)?.message ?? String(e)).split('\n')[0] ?? '';
}

/** `p`, or a rejection "<what> did not answer within N s" after `ms` (the request itself is not cancelled). */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} did not answer within ${ms / 1000} s`),
      { timedOut: true })), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
    p.catch(() => undefined); // a failure after the timeout is not an unhandled rejection
  }
}

/**
 * What kind of failure an API call met, to log each kind once: the HTTP status, "timeout", or the
 * network error code.
 */
export function failureKind(e: unknown): string {
  const status = httpStatus(e);
  if (status !== undefined) return String(status);
  if ((e as { timedOut?: unknown })?.timedOut) return 'timeout';
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' ? code : firstLine(e);
}

/** Logs a failure once per kind (warn), repeats at debug, and one info line when calls succeed again. */
export class FailureLog {
  private readonly seen = new Set<string>();

  constructor(private readonly log: Log, private readonly what: string) {}

  failed(e: unknown, fields: Record<string, unknown> = {}): void {
    const kind = failureKind(e);
    const first = !this.seen.has(kind);
    this.seen.add(kind);
    this.log(first ? 'warn' : 'debug', `${this.what} failed: ${describeError(e)}; will retry`, { ...fields,
      error: describeError(e), kind });
  }

  succeeded(): void {
    if (this.seen.size === 0) return;
    this.seen.clear();
    this.log('info', `${this.what} works again`);
  }
}

/**
 * Lists every page (`limit` per request, following `continue`): the items of all pages with the
 * first page's resourceVersion (a continued list is a snapshot at it). A server that repeats a
 * continue token, or whose list does not end within `maxPages`, gets an error, not a loop.
 */
export async function listAllPages<T extends KubernetesObject>(
  page: (cont: string | undefined) => Promise<KubernetesListObject<T>>, maxPages = 10_000,
): Promise<KubernetesListObject<T>> {
  // Plain JSON lists (client.ts): the token is `continue` (client-node's typed lists called it `_continue`).
  const next = (l: KubernetesListObject<T>) => (l.metadata as { continue?: string } | undefined)?.continue;
  const first = await page(undefined);
  const items = [...first.items];
  let cont = next(first);
  const seen = new Set<string>();
  for (let n = 1; cont; n++) {
    if (seen.has(cont)) throw new Error('the server repeated a continue token; the list is abandoned');
    if (n >= maxPages) throw new Error(`the list did not end within ${maxPages} pages`);
    seen.add(cont);
    const more = await page(cont);
    items.push(...more.items);
    cont = next(more);
  }
  const { continue: _c, ...metadata } = (first.metadata ?? {}) as Record<string, unknown>;
  return { ...first, metadata, items };
}
