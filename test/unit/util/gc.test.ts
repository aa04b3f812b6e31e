// util/gc.ts hands over V8's collector without `--expose-gc` on node's command line: the test
// process runs without it, so this is the path a node's process takes.
import { describe, expect, it } from '@jest/globals';
import { getHeapSpaceStatistics } from 'node:v8';
import { SECOND_OVER, exposedCollector, youngBytes as ourYoungBytes, youngCollector } from '../../../src/util/gc.js';

const youngBytes = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_used_size;

describe('exposedCollector', () => {
  it('empties the young generation, promoting what is still live', () => {
    const collect = exposedCollector();
    expect(collect).toBeInstanceOf(Function);
    const live = Array.from({ length: 50_000 }, (_, i) => ({ i }));
    expect(youngBytes()).toBeGreaterThan(1 << 20);
    collect!();
    // Empty but for what the collection allocated and what stays young after one scavenge (V8
    // promotes most of it at once: under 1 KB in a plain node process, 66 KB once under jest).
    expect(youngBytes()).toBeLessThan(256 << 10);
    expect(live[49_999]).toEqual({ i: 49_999 });
  });

  it('collects a second time only when the first left more than SECOND_OVER young', () => {
    for (const [left, calls] of [[100 << 10, 1], [SECOND_OVER, 1], [SECOND_OVER + 1, 2], [8 << 20, 2]] as const) {
      const types: unknown[] = [];
      youngCollector((o) => types.push(o?.type), () => left)();
      expect(types).toEqual(Array(calls).fill('minor'));
    }
  });

  it('reads the young generation\'s use as V8 reports it', () => {
    const used = ourYoungBytes();
    expect(used).toBeGreaterThan(0);
    expect(Math.abs(used - youngBytes())).toBeLessThan(256 << 10);
  });

  it('leaves the flag as it was: a context made after it has no gc', async () => {
    exposedCollector();
    const { runInNewContext } = await import('node:vm');
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
