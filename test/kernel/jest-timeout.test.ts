// The kernel run's timeout is really in effect (jest ignores `testTimeout` in a projects entry, so
// it is passed on the command line by lab/kernel-jest.ts): a test with no timeout of its own
// that takes longer than jest's 5 s default passes only when the configured timeout applies.
import { describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';

describe('the kernel project runs with the command-line testTimeout', () => {
  it('a test taking 6 s (more than jest\'s 5 s default) is not timed out', async () => {
    const start = Date.now();
    await sleep(6000);
    expect(Date.now() - start).toBeGreaterThanOrEqual(6000);
  });
});
