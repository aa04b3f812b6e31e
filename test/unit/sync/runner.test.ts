// The bounded-frequency runner's numbered contract, driven by a fake clock.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { BoundedFrequencyRunner, type Clock, type SyncReason, realClock } from '../../../src/sync/runner.js';
import { SyncTimers } from '../../../src/sync/timers.js';

/** A clock whose time moves only when the test says; timers fire in order. */
class FakeClock implements Clock {
  t = 0;
  private timers: Array<{ at: number; fn: () => void; id: number }> = [];
  private next = 1;
  now(): number { return this.t; }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.push({ at: this.t + ms, fn, id });
    return id;
  }
  clearTimeout(h: unknown): void { this.timers = this.timers.filter((x) => x.id !== h); }
  /** Moves time forward, firing due timers and letting promise callbacks run between them. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await flush();
      this.timers.sort((a, b) => a.at - b.at);
      const due = this.timers[0];
      if (!due || due.at > end) break;
      this.timers.shift();
      this.t = due.at;
      due.fn();
    }
    this.t = end;
    await flush();
  }
}
const flush = async () => { for (let i = 0; i < 10; i++) await Promise.resolve(); };

function setup(opts: { min: number; max: number; retry: number }, body?: (why: SyncReason, n: number) => Promise<void>) {
  const clock = new FakeClock();
  const runs: Array<{ at: number; why: SyncReason }> = [];
  const runner = new BoundedFrequencyRunner(async (why) => {
    runs.push({ at: clock.now(), why });
    await body?.(why, runs.length);
  }, { minIntervalMs: opts.min, maxIntervalMs: opts.max, retryIntervalMs: opts.retry, clock });
  return { clock, runs, runner };
}

describe('BoundedFrequencyRunner', () => {
  it('1: requests before a sync starts coalesce into one sync', async () => {
    const { clock, runs, runner } = setup({ min: 1000, max: 60_000, retry: 500 });
    runner.start();
    await clock.advance(0);
    expect(runs.map((r) => r.at)).toEqual([0]);
    for (let i = 0; i < 5; i++) runner.run();
    await clock.advance(999);
    expect(runs).toHaveLength(1);
    await clock.advance(1);
    expect(runs.map((r) => r.at)).toEqual([0, 1000]);
    await clock.advance(5000);
    expect(runs).toHaveLength(2);
  });

  it('2: syncs start at least minInterval apart and never overlap', async () => {
    let release: () => void = () => undefined;
    let active = 0;
    let maxActive = 0;
    const { clock, runs, runner } = setup({ min: 1000, max: 60_000, retry: 500 }, async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise<void>((r) => { release = r; });
      active--;
    });
    runner.start();
    await clock.advance(0);
    runner.run();
    await clock.advance(3000); // the first sync is still running
    expect(runs).toHaveLength(1);
    release();
    await clock.advance(0); // ended at 3000 > 0 + 1000: the pending request runs at once
    expect(runs.map((r) => r.at)).toEqual([0, 3000]);
    release();
    await clock.advance(0);
    expect(maxActive).toBe(1);
  });

  it('3: the periodic sync comes maxInterval after the last one ended, marked periodic', async () => {
    const { clock, runs, runner } = setup({ min: 1000, max: 30_000, retry: 500 });
    runner.start();
    await clock.advance(65_000);
    expect(runs.map((r) => r.at)).toEqual([0, 30_000, 60_000]);
    expect(runs.map((r) => r.why.periodic)).toEqual([false, true, true]);
  });

  it('4: a failed sync is retried after retryInterval, requests do not bring it forward', async () => {
    const errors: unknown[] = [];
    const clock = new FakeClock();
    const runs: number[] = [];
    const runner = new BoundedFrequencyRunner(async (why) => {
      runs.push(clock.now());
      if (runs.length === 1) throw new Error('kernel said no');
      expect(why.retry).toBe(runs.length === 2);
    }, { minIntervalMs: 100, maxIntervalMs: 60_000, retryIntervalMs: 5000, clock, onError: (e) => errors.push(e) });
    runner.start();
    await clock.advance(0);
    runner.run();
    runner.run();
    await clock.advance(4999);
    expect(runs).toEqual([0]);
    await clock.advance(1);
    expect(runs).toEqual([0, 5000]);
    expect(errors).toHaveLength(1);
  });

  it('stop() waits for the running sync and nothing runs after it', async () => {
    const { clock, runs, runner } = setup({ min: 0, max: 1000, retry: 10 });
    runner.start();
    await clock.advance(0);
    await runner.stop();
    runner.run();
    await clock.advance(10_000);
    expect(runs).toHaveLength(1);
  });

  it('refuses contradictory intervals', () => {
    expect(() => new BoundedFrequencyRunner(async () => undefined, { minIntervalMs: 10, maxIntervalMs: 5, retryIntervalMs: 1 })).toThrow(/minInterval/);
  });
});

describe('BoundedFrequencyRunner.setIntervals', () => {
  it('re-arms the periodic sync with the new maxInterval', async () => {
    const { clock, runs, runner } = setup({ min: 1000, max: 30_000, retry: 500 });
    runner.start();
    await clock.advance(0);
    runner.setIntervals({ minIntervalMs: 100, maxIntervalMs: 2000, retryIntervalMs: 100 });
    await clock.advance(7000);
    expect(runs.map((r) => r.at)).toEqual([0, 2000, 4000, 6000]);
  });
});

describe('SyncTimers.armDeadline', () => {
  it('asks for one sync at the earliest deadline given; none given: no timer', async () => {
    const clock = new FakeClock();
    const runs: number[] = [];
    const timers = new SyncTimers(async () => { runs.push(clock.now()); },
      { minIntervalMs: 10, maxIntervalMs: 1_000_000, retryIntervalMs: 10, clock }, clock);
    timers.runner.start();
    await clock.advance(0);
    timers.armDeadline(undefined, 5000, undefined, 3000);
    await clock.advance(10_000);
    expect(runs).toEqual([0, 3000]);
    timers.armDeadline(20_000);
    timers.armDeadline(undefined, undefined); // re-arming replaces the earlier timer
    await clock.advance(20_000);
    expect(runs).toEqual([0, 3000]);
    await timers.stop();
  });
});

describe('realClock', () => {
  const turn = () => new Promise<void>((r) => setImmediate(r));

  it('runs a timer due now within the loop\'s next turn (setTimeout waits 1 ms at least)', async () => {
    let fired = false;
    realClock.setTimeout(() => { fired = true; }, 0);
    await turn(); // an immediate queued after the clock's: the clock's has run by then
    expect(fired).toBe(true);
  });

  // A sync asked for from a timer's callback (a drain's deadline, a retry, a ramp's step) or from
  // a top-level await: an unref'd immediate does not keep the loop's poll from blocking, so it ran
  // only when something else woke the loop (the bench saw 0.8-1.3 s; an idle node, its next
  // periodic sync). Run in a process of its own: jest's own handles wake the loop and hide it.
  it.each([
    ['a timer\'s callback', 'setTimeout(ask, 1);'],
    ['the module\'s top level', 'ask();'],
  ])('runs a timer due now, asked for from %s, before a later timer wakes the loop', (_where, how) => {
    const runner = JSON.stringify(new URL('../../../src/sync/runner.js', import.meta.url).href);
    const code = `import { BoundedFrequencyRunner, realClock } from ${runner};
      const order = [];
      const end = () => { console.log(JSON.stringify(order)); process.exit(0); };
      // The loop's only other work, as on an idle node: a timer far off (its next periodic sync).
      // When the loop wakes for it, the immediates run before the timer: so the sync says whether
      // that time had come.
      const farAt = Date.now() + 20_000;
      const later = setTimeout(() => { order.push('the far timer'); end(); }, 20_000);
      const sync = async () => {
        order.push(Date.now() < farAt ? 'sync' : 'sync, once the far timer was due');
        clearTimeout(later); end();
      };
      const r = new BoundedFrequencyRunner(sync,
        { minIntervalMs: 0, maxIntervalMs: 3_600_000, retryIntervalMs: 1000, clock: realClock });
      const ask = () => { order.push('asked'); r.start(); };
      ${how}`;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual(['asked', 'sync']);
  });

  it('cancels a timer due now and a later one', async () => {
    const fired: string[] = [];
    realClock.clearTimeout(realClock.setTimeout(() => fired.push('now'), 0));
    realClock.clearTimeout(realClock.setTimeout(() => fired.push('later'), 2));
    const kept = realClock.setTimeout(() => fired.push('kept'), 2);
    await new Promise((r) => setTimeout(r, 20));
    expect(fired).toEqual(['kept']);
    realClock.clearTimeout(kept); // already fired: a no-op
  });
});
