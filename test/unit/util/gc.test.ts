// util/gc.ts hands over V8's collector without `--expose-gc` on node's command line: the test
// process runs without it, so this is the path a node's process takes.
import { describe, expect, it } from '@jest/globals';
import { getHeapSpaceStatistics } from 'node:v8';
import { exposedCollector } from '../../../src/util/gc.js';

const youngBytes = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_used_size;

describe('exposedCollector', () => {
  it('empties the young generation, promoting what is still live', () => {
    const collect = exposedCollector();
    expect(collect).toBeInstanceOf(Function);
    const live = Array.from({ length: 50_000 }, (_, i) => ({ i }));
    expect(youngBytes()).toBeGreaterThan(1 << 20);
    collect!();
    // Empty but for what the collection itself allocated (a few hundred bytes on node 24).
    expect(youngBytes()).toBeLessThan(64 << 10);
    expect(live[49_999]).toEqual({ i: 49_999 });
  });

  it('leaves the flag as it was: a context made after it has no gc', async () => {
    exposedCollector();
    const { runInNewContext } = await import('node:vm');
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
