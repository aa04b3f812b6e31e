// Retries of virtual servers whose ops the kernel refused, as a value: per virtual server key, how
// many tries failed and when the next is due (1 s doubling to 5 min), and the Service it belongs to
// so the failure is that Service's Problem. Every refused op is retried, by planning its virtual
// server again once due (after re-reading it from the kernel). The plan carries what the update
// needs (RetryPlan: the Services of the keys it plans, the keys nobody wants any more), decided
// before the sync; updateRetries applies it to the sync's results. A key whose ops all went
// through, or that nobody wants and the kernel does not have, leaves the state. pure: no I/O.
import type { Problem } from '../desired/types.js';
import { type IpvsOp, formatOp, sameServerKeys, virtualServerKey } from '../model/ipvs.js';

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

/** The retry policy of one plan, decided before it is carried out. */
export interface RetryPlan {
  now: number;
  /** The Service ("namespace/name") of each planned key a Service wants: a refusal becomes its Problem. */
  services: ReadonlyMap<string, string>;
  /** Keys in the retry state that nobody wants and the kernel does not have: they need no retry. */
  drop: readonly string[];
}

/** The retry policy for planning `keys`, from the retry state, the desired table and the kernel's table now. */
export function planRetries(
  state: RetryState, now: number, keys: Iterable<string>,
  desired: ReadonlyMap<string, { origin: { namespace: string; name: string } }>, actual: ReadonlyMap<string, unknown>,
): RetryPlan {
  const services = new Map<string, string>();
  for (const key of keys) {
    const o = desired.get(key)?.origin;
    if (o) services.set(key, `${o.namespace}/${o.name}`);
  }
  const drop = [...state.keys()].filter((key) => !desired.has(key) && !actual.has(key));
  return { now, services, drop };
}

/** The state after a sync that carried out `ops` under `plan`, the kernel refusing `refused` (see the file comment). */
export function updateRetries(
  state: RetryState, plan: RetryPlan, ops: readonly IpvsOp[], refused: readonly RefusedOp[],
): RetryState {
  const next = new Map(state);
  const first = new Map<string, RefusedOp>();
  for (const r of refused) {
    const key = virtualServerKey(r.op.vs);
    if (!first.has(key)) first.set(key, r);
  }
  const keyOf = sameServerKeys();
  for (const op of ops) {
    const key = keyOf(op.vs);
    if (!first.has(key)) next.delete(key);
  }
  for (const key of plan.drop) next.delete(key);
  for (const [key, r] of first) {
    const attempts = (state.get(key)?.attempts ?? 0) + 1;
    next.set(key, {
      attempts,
      retryAt: plan.now + Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempts - 1)),
      service: plan.services.get(key) ?? '',
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
    out.push(
      { service: r.service, reason: 'IPVSOpRefused', message: `the kernel refused ${r.error}; retrying with backoff` });
  }
  return out;
}
