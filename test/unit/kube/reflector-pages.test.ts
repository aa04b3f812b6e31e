// The Reflector's first list emits each page as it arrives (issue 29: the operator builds while the
// rest is listed), yet counts as synced only once the list is whole; a later list keeps the
// whole-list diff, so nothing is deleted before the list is complete. A fake client whose list
// pages the test releases one at a time.
import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Reflector } from '../../../src/kube/reflector.js';
import { defaultApiLimits } from '../../../src/kube/transport.js';

const obj = (name: string, rv = '1'): KubernetesObject => ({ metadata: { namespace: 'default', name, resourceVersion: rv } });

/** Answers each list request with the next page the test pushes; watches stay open until aborted. */
class PagedClient {
  readonly limits = defaultApiLimits;
  readonly asked: Array<string | undefined> = [];
  private waiting: Array<(page: unknown) => void> = [];
  private queued: unknown[] = [];

  request<T>(_method: string, _path: string, opts: { query?: Record<string, unknown> } = {}): Promise<T> {
    this.asked.push(opts.query?.continue as string | undefined);
    const next = this.queued.shift();
    if (next !== undefined) return Promise.resolve(next as T);
    return new Promise<T>((resolve) => this.waiting.push(resolve as (page: unknown) => void));
  }

  /** The next list page: its items, and a continue token when more follow. */
  page(items: KubernetesObject[], cont?: string): void {
    const page = { metadata: { resourceVersion: '100', ...(cont ? { continue: cont } : {}) }, items };
    const w = this.waiting.shift();
    if (w) w(page);
    else this.queued.push(page);
  }

  watchStream(): { done: Promise<void>; abort(err?: Error): void } {
    let end: () => void = () => undefined;
    const done = new Promise<void>((resolve) => { end = resolve; });
    return { done, abort: () => end() };
  }
}

const tick = () => new Promise((r) => setImmediate(r));

function reflector(client: PagedClient, seen: string[]) {
  return new Reflector<KubernetesObject>({
    name: 'services', path: '/api/v1/services', pageSize: 2, client: client as never, log: () => undefined,
    handlers: { upsert: (o) => seen.push(`+${o.metadata!.name}`), delete: (o) => seen.push(`-${o.metadata!.name}`) },
    healing: { backoff: { initialMs: 10, maxMs: 50, jitter: 0 }, relistMs: 0, idleMs: 0, watchTimeoutSeconds: 0, maxRetryAfterMs: 1000 },
  });
}

describe('Reflector list pages', () => {
  it('emits the first list page by page, synced only after the last page, each object once', async () => {
    const client = new PagedClient();
    const seen: string[] = [];
    const r = reflector(client, seen);
    let synced = false;
    r.start();
    void r.synced().then(() => { synced = true; });
    try {
      client.page([obj('a'), obj('b')], 'c1');
      await tick();
      expect({ seen, synced }).toEqual({ seen: ['+a', '+b'], synced: false });
      client.page([obj('c'), obj('d')], 'c2');
      await tick();
      expect({ seen, synced }).toEqual({ seen: ['+a', '+b', '+c', '+d'], synced: false });
      client.page([obj('e')]);
      await r.synced();
      expect(seen).toEqual(['+a', '+b', '+c', '+d', '+e']);
      expect(client.asked).toEqual([undefined, 'c1', 'c2']);
    } finally {
      await r.stop();
    }
  });

  it('a relist diffs the whole list before it emits: deletes wait for the last page', async () => {
    const client = new PagedClient();
    const seen: string[] = [];
    const r = reflector(client, seen);
    r.start();
    try {
      client.page([obj('a'), obj('b')], 'c1');
      client.page([obj('c')]);
      await r.synced();
      seen.length = 0;
      let relisted = false;
      for (let i = 0; i < 20 && !relisted; i++) {
        await tick();
        relisted = r.relistNow();
      }
      expect(relisted).toBe(true);
      // Page one of the relist lacks "a" and changes "b"; nothing is emitted until the list is whole.
      client.page([obj('b', '2'), obj('c')], 'c9');
      for (let i = 0; i < 5; i++) await tick();
      expect(seen).toEqual([]);
      client.page([obj('d')]);
      for (let i = 0; i < 20 && seen.length < 3; i++) await tick();
      expect(seen).toEqual(['-a', '+b', '+d']);
    } finally {
      await r.stop();
    }
  });
});
