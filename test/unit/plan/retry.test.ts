// The retry state of refused ops (src/plan/retry.ts): backoff per virtual server, cleared by a
// success or when nobody wants the key, one Problem per Service.
import { describe, expect, it } from '@jest/globals';
import { type IpvsOp, makeRealServer, makeVirtualServer, virtualServerKey } from '../../../src/model/ipvs.js';
import { RETRY_MAX_MS, type RetryPlan, type RetryState, dueRetries, nextRetryAt, planRetries, retryProblems, updateRetries } from '../../../src/plan/retry.js';

const a = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
const b = makeVirtualServer({ family: 'IPv4', address: '10.200.1.11', port: 80, scheduler: 'rr' });
const addDest = (vs: typeof a): IpvsOp => ({ kind: 'add-dest', vs, rs: makeRealServer({ address: '10.10.1.3', port: 8080 }) });
const services = new Map([[virtualServerKey(a), 'default/web'], [virtualServerKey(b), 'default/api']]);
const policy = (now: number, drop: readonly string[] = []): RetryPlan => ({ now, services, drop });

describe('planRetries', () => {
  it('names the Service of each planned key a Service wants, and drops keys nobody wants that the kernel lacks', () => {
    const origin = (name: string) => ({ origin: { namespace: 'default', name } });
    const state: RetryState = new Map([[virtualServerKey(a), { attempts: 1, retryAt: 1000, service: 'default/web', error: 'x' }],
      [virtualServerKey(b), { attempts: 1, retryAt: 1000, service: 'default/api', error: 'x' }]]);
    const p = planRetries(state, 5, [virtualServerKey(a), virtualServerKey(b)], new Map([[virtualServerKey(a), origin('web')]]), new Map());
    expect(p).toEqual({ now: 5, services: new Map([[virtualServerKey(a), 'default/web']]), drop: [virtualServerKey(b)] });
  });
});

describe('updateRetries', () => {
  it('backs off 1 s, 2 s, 4 s ... per virtual server, capped at 5 minutes', () => {
    let s: RetryState = new Map();
    const seen: number[] = [];
    for (let i = 0; i < 12; i++) {
      s = updateRetries(s, policy(0), [addDest(a)], [{ op: addDest(a), error: { message: 'ESRCH' } }]);
      seen.push(s.get(virtualServerKey(a))!.retryAt);
    }
    expect(seen.slice(0, 5)).toEqual([1000, 2000, 4000, 8000, 16000]);
    expect(seen.at(-1)).toBe(RETRY_MAX_MS);
    expect(dueRetries(s, RETRY_MAX_MS - 1)).toEqual(new Set());
    expect(dueRetries(s, RETRY_MAX_MS)).toEqual(new Set([virtualServerKey(a)]));
  });

  it('a success clears only its own key; one Problem per Service names the refused op', () => {
    let s: RetryState = updateRetries(new Map(), policy(0), [addDest(a), addDest(b)],
      [{ op: addDest(a), error: { message: 'no such virtual server (ESRCH)' } }, { op: addDest(b), error: { message: 'EINVAL' } }]);
    expect(retryProblems(s)).toEqual([
      { service: 'default/web', reason: 'IPVSOpRefused', message: 'the kernel refused add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq: no such virtual server (ESRCH); retrying with backoff' },
      { service: 'default/api', reason: 'IPVSOpRefused', message: 'the kernel refused add-dest TCP 10.200.1.11:80 -> 10.10.1.3:8080 w=1 masq: EINVAL; retrying with backoff' },
    ]);
    expect(nextRetryAt(s)).toBe(1000);
    s = updateRetries(s, policy(1000), [addDest(a)], []);
    expect([...s.keys()]).toEqual([virtualServerKey(b)]);
    // Nobody wants b any more and the kernel does not have it: the plan drops it, no retry.
    const drop = planRetries(s, 2000, [], new Map(), new Map()).drop;
    expect(drop).toEqual([virtualServerKey(b)]);
    expect(planRetries(s, 2000, [], new Map(), new Map([[virtualServerKey(b), {}]])).drop).toEqual([]);
    s = updateRetries(s, policy(2000, drop), [], []);
    expect(s.size).toBe(0);
    expect(nextRetryAt(s)).toBeUndefined();
  });
});
