// settleSync (src/plan/settle.ts): a plan and the kernel's answer to each of its ops give the next
// retry state, the ownership record and the op counts, as the plan decided beforehand.
// Address ranges: fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';
import { Errno } from '../../../src/netlink/errors.js';
import { settleSync } from '../../../src/plan/settle.js';
import type { SyncPlan } from '../../../src/plan/sync.js';

const web = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'rr' });
const old = makeVirtualServer({ family: 'IPv4', address: '10.200.1.99', port: 80, scheduler: 'rr' });
const refused = IpvsError.fromErrno('add-dest', Errno.EINVAL);

function plan(): SyncPlan {
  return {
    full: false, planned: 2, draining: new Map(), vips: undefined, iptables: undefined, conntrack: [], holds: [],
    ops: [
      { kind: 'add-service', vs: web },
      { kind: 'add-dest', vs: web, rs: makeRealServer({ address: '10.10.1.3', port: 8080 }) },
      { kind: 'delete-service', vs: old },
    ],
    retry: { now: 5000, services: new Map([['TCP 10.200.1.10:80', 'default/web']]), drop: [] },
    record: { add: [{ key: 'TCP 10.200.1.10:80', op: 0 }], remove: [{ key: 'TCP 10.200.1.99:80', op: 2 }] },
  };
}

describe('settleSync', () => {
  it('everything applied: the record takes the created key and loses the deleted one, no retry', () => {
    const s = settleSync(plan(), [undefined, undefined, undefined], { retries: new Map(), record: new Set(['TCP 10.200.1.99:80']) });
    expect(s.refused).toEqual([]);
    expect(s.retries.size).toBe(0);
    expect(s.record).toEqual(new Set(['TCP 10.200.1.10:80']));
    expect(s.counts).toEqual([
      { kind: 'add-service', result: 'ok', n: 1 }, { kind: 'add-dest', result: 'ok', n: 1 }, { kind: 'delete-service', result: 'ok', n: 1 },
    ]);
  });

  it('a refused op: retried for its Service after 1 s, counted as an error; the record follows only what was applied', () => {
    const s = settleSync(plan(), [undefined, refused, undefined], { retries: new Map(), record: new Set(['TCP 10.200.1.99:80']) });
    expect(s.refused.map((r) => r.op.kind)).toEqual(['add-dest']);
    expect(s.retries.get('TCP 10.200.1.10:80')).toEqual({
      attempts: 1, retryAt: 6000, service: 'default/web', error: `add-dest TCP 10.200.1.10:80 -> 10.10.1.3:8080 w=1 masq: ${refused.message}`,
    });
    expect(s.counts).toContainEqual({ kind: 'add-dest', result: 'error', n: 1 });
    expect(s.record).toEqual(new Set(['TCP 10.200.1.10:80']));
    const deleteRefused = settleSync(plan(), [undefined, undefined, refused], { retries: new Map(), record: new Set(['TCP 10.200.1.99:80']) });
    expect(deleteRefused.record).toEqual(new Set(['TCP 10.200.1.10:80', 'TCP 10.200.1.99:80']));
  });

  it('a plan without record changes leaves the record alone (undefined), unless there is none yet', () => {
    const p = { ...plan(), record: { add: [], remove: [] } };
    expect(settleSync(p, [undefined, undefined, undefined], { retries: new Map(), record: new Set(['x']) }).record).toBeUndefined();
    expect(settleSync(p, [undefined, undefined, undefined], { retries: new Map(), record: undefined }).record).toEqual(new Set());
  });
});
