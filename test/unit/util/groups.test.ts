// src/util/groups.ts: values grouped by key, a group of one held without a Map.
import { describe, expect, it } from '@jest/globals';
import { Groups } from '../../../src/util/groups.js';

interface Item { readonly name: string; readonly n: number }

describe('Groups', () => {
  it('keeps each group\'s values by member as members come, replace and go', () => {
    const g = new Groups<string, string, Item>((v) => v.name);
    expect([g.has('k'), g.size('k'), g.values('k'), g.get('k', 'a')]).toEqual([false, 0, [], undefined]);

    g.set('k', { name: 'a', n: 1 });
    g.set('k', { name: 'a', n: 2 }); // same member: replaced, still one
    expect([g.size('k'), g.values('k'), g.get('k', 'a'), g.get('k', 'b')])
      .toEqual([1, [{ name: 'a', n: 2 }], { name: 'a', n: 2 }, undefined]);
    expect([...g.several()]).toEqual([]);

    g.set('k', { name: 'b', n: 3 });
    g.set('k', { name: 'c', n: 4 });
    g.set('k', { name: 'b', n: 5 });
    g.set('other', { name: 'b', n: 6 });
    expect(g.values('k')).toEqual([{ name: 'a', n: 2 }, { name: 'b', n: 5 }, { name: 'c', n: 4 }]);
    expect([g.get('k', 'b'), g.get('other', 'b'), g.get('other', 'a')]).toEqual([{ name: 'b', n: 5 }, { name: 'b', n: 6 }, undefined]);
    expect([...g.several()]).toEqual([['k', g.values('k')]]);

    expect(g.delete('k', 'x')).toBe(false);
    expect(g.delete('k', 'a')).toBe(true);
    expect(g.delete('k', 'a')).toBe(false);
    expect(g.delete('k', 'c')).toBe(true);
    expect([g.size('k'), g.values('k'), [...g.several()]]).toEqual([1, [{ name: 'b', n: 5 }], []]);

    // A group of one again: a member it does not hold is not removed, and adding one splits it anew.
    expect(g.delete('k', 'a')).toBe(false);
    g.set('k', { name: 'd', n: 7 });
    expect(g.values('k')).toEqual([{ name: 'b', n: 5 }, { name: 'd', n: 7 }]);
    expect([g.delete('k', 'b'), g.delete('k', 'd'), g.has('k'), g.size('k')]).toEqual([true, true, false, 0]);
    expect([g.has('missing'), g.delete('missing', 'a')]).toEqual([false, false]);
  });

  it('names members by any key, including empty ones', () => {
    const g = new Groups<number, string, Item>((v) => v.name);
    g.set(1, { name: '', n: 1 });
    expect(g.get(1, '')).toEqual({ name: '', n: 1 });
    g.set(1, { name: 'x', n: 2 });
    expect([g.size(1), g.get(1, '')]).toEqual([2, { name: '', n: 1 }]);
    expect(g.delete(1, '')).toBe(true);
    expect(g.values(1)).toEqual([{ name: 'x', n: 2 }]);
  });
});
