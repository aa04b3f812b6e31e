// src/util/serial.ts: calls run one at a time, in order, whatever the previous one did.
import { describe, expect, it } from '@jest/globals';
import { Serial } from '../../../src/util/serial.js';

describe('Serial', () => {
  it('runs calls one after another in order; a rejection neither stops the queue nor leaks into the next', async () => {
    const q = new Serial();
    const log: string[] = [];
    let running = 0;
    const step = (name: string, ms: number, fail = false) => q.run(async () => {
      running++;
      expect(running).toBe(1);
      log.push(`start ${name}`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`end ${name}`);
      running--;
      if (fail) throw new Error(name);
      return name;
    });
    const results = await Promise.allSettled([step('a', 20), step('b', 1, true), step('c', 5)]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual(['a', 'b', 'c']);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });
});
