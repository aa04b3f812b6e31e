// Leader election's pure decisions (src/kube/lease.ts): what a candidate does with the Lease it
// observed, and when it reads the Lease next. Times in ms from 0; retry period 2 s, lease 15 s.
import { describe, expect, it } from '@jest/globals';
import { type Observed, leaseAction, nextRead } from '../../../src/kube/lease.js';

const held = (holder: string, observedAt: number): Observed => ({ record: { holderIdentity: holder }, resourceVersion: '1', annotations: {}, observedAt });

describe('leaseAction', () => {
  it('creates a missing Lease, renews its own, takes a free or expired one, else waits', () => {
    expect(leaseAction(undefined, 'a', 0, 15_000)).toBe('create');
    expect(leaseAction(held('a', 0), 'a', 1_000, 15_000)).toBe('renew');
    expect(leaseAction(held('', 0), 'a', 1_000, 15_000)).toBe('acquire');
    expect(leaseAction(held('b', 0), 'a', 14_999, 15_000)).toBe('wait');
    expect(leaseAction(held('b', 0), 'a', 15_000, 15_000)).toBe('acquire');
  });
});

describe('nextRead', () => {
  it('the leader and a candidate that does not watch read every retry period', () => {
    expect(nextRead(held('a', 0), true, true, 10_000, 2_000, 15_000)).toBe(12_000);
    expect(nextRead(held('b', 0), false, false, 10_000, 2_000, 15_000)).toBe(12_000);
  });

  it('a watching follower reads when the record it saw expires on its own clock', () => {
    // Renewals reach it as watch events and move observedAt; only a silent holder makes it read.
    expect(nextRead(held('b', 9_000), false, true, 10_000, 2_000, 15_000)).toBe(24_000);
  });

  it('a watching follower reads at once when there is no Lease or nobody holds it (a release)', () => {
    expect(nextRead(undefined, false, true, 10_000, 2_000, 15_000)).toBe(10_000);
    expect(nextRead(held('', 9_000), false, true, 10_000, 2_000, 15_000)).toBe(10_000);
  });
});
