// Retries of virtual servers whose ops the kernel refused, as a value: per virtual server key, how
// many tries failed and when the next is due (1 s doubling to 5 min), and the Service it belongs to
// so the failure is that Service's Problem. The operator plans a due key again (after re-reading
// it from the kernel); a key whose ops all went through, or that nobody wants and the kernel does
// not have, leaves the state. pure: no I/O.
import type { Problem } from '../desired/types.js';
import { type IpvsOp, formatOp, virtualServerKey } from '../model/ipvs.js';

/** One virtual server's failed tries. */
export interface RetryEntry {
  attempts: number;
  retryAt: number;
  /** "namespace/name" of the Service that wants it ("" when none does any more). */
  service: string;
  /** The first refused op and the kernel's answer. */
  error: string;
}

/** Retry entries by virtual server key. */
export type RetryState = ReadonlyMap<string, RetryEntry>;

/** First retry after 1 s, doubling, at most 5 minutes apart. */
export const RETRY_BASE_MS = 1000;
export const RETRY_MAX_MS = 5 * 60_000;

/** An op the kernel refused, with its message. */
export interface RefusedOp {
  op: IpvsOp;
  error: { message: string };
}

/** What a sync tells the retry state. */
export interface RetryUpdate {
  now: number;
  /** The ops the sync applied. */
  ops: readonly IpvsOp[];
  refused: readonly RefusedOp[];
  /** The Service ("namespace/name") that wants a key, if any. */
  serviceOf: (key: string) => string | undefined;
  /** Whether a key is still wanted or still in the kernel (else it needs no retry). */
  exists: (key: string) => boolean;
}

/** The state after a sync (see the file comment). */
export function updateRetries(state: RetryState, u: RetryUpdate): RetryState {
  const next = new Map(state);
  const refused = new Map<string, RefusedOp>();
  for (const r of u.refused) {
    const key = virtualServerKey(r.op.vs);
    if (!refused.has(key)) refused.set(key, r);
  }
  for (const op of u.ops) {
    const key = virtualServerKey(op.vs);
    if (!refused.has(key)) next.delete(key);
  }
  for (const key of next.keys()) if (!u.exists(key)) next.delete(key);
  for (const [key, r] of refused) {
    const attempts = (state.get(key)?.attempts ?? 0) + 1;
    next.set(key, {
      attempts,
      retryAt: u.now + Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempts - 1)),
      service: u.serviceOf(key) ?? '',
      error: `${formatOp(r.op)}: ${r.error.message}`,
    });
  }
  return next;
}

/** Keys due for a retry at `now`. */
export function dueRetries(state: RetryState, now: number): Set<string> {
  const due = new Set<string>();
  for (const [key, r] of state) if (r.retryAt <= now) due.add(key);
  return due;
}

/** When the earliest retry is due; undefined when none is pending. */
export function nextRetryAt(state: RetryState): number | undefined {
  let next: number | undefined;
  for (const r of state.values()) if (next === undefined || r.retryAt < next) next = r.retryAt;
  return next;
}

/** One IPVSOpRefused Problem per Service with a pending retry (the first key's error). */
export function retryProblems(state: RetryState): Problem[] {
  const out: Problem[] = [];
  const seen = new Set<string>();
  for (const r of state.values()) {
    if (!r.service || seen.has(r.service)) continue;
    seen.add(r.service);
    out.push({ service: r.service, reason: 'IPVSOpRefused', message: `the kernel refused ${r.error}; retrying with backoff` });
  }
  return out;
}
