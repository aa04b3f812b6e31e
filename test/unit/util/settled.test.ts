// src/util/settled.ts: work started at once is all waited for, whatever fails.
import { describe, expect, it } from '@jest/globals';
import { settledAll, waitAtMost } from '../../../src/util/settled.js';

/** A promise the test settles by hand. */
function deferred<T>(): { p: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const p = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
  return { p, resolve, reject };
}

describe('settledAll', () => {
  it('resolves with every value in order', async () => {
    expect(await settledAll([Promise.resolve(1), Promise.resolve('a')] as const)).toEqual([1, 'a']);
  });

  it('rejects with the first rejection only once the others settled', async () => {
    const slow = deferred<number>();
    const late = deferred<number>();
    let settled = false;
    const all = settledAll([Promise.reject(new Error('first')), slow.p, late.p]).finally(() => { settled = true; });
    late.reject(new Error('second'));
    await new Promise((r) => setImmediate(r));
    // Still waiting for the slow one, though two have failed.
    expect(settled).toBe(false);
    slow.resolve(3);
    await expect(all).rejects.toThrow('first');
  });
});

describe('waitAtMost', () => {
  it('resolves when the promise does, or after the wait when it never settles', async () => {
    const never = deferred<number>();
    let done = false;
    const waited = waitAtMost(never.p, 30).then(() => { done = true; });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    await waited;
    expect(done).toBe(true);
    const soon = deferred<number>();
    const early = waitAtMost(soon.p, 60_000);
    soon.resolve(1);
    await early; // resolved long before its wait (jest would time out otherwise)
  });
});
