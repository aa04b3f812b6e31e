// The helper thread (src/util/helper-thread.ts, helper-main.ts): jobs of several modules on one
// thread, their messages routed to each, a cancel, a job that throws, a thread that dies, the
// process's shared thread replaced after it; and the two jobs it runs for the operator, a listing
// and an address batch, at once on one thread.
import { afterEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openProcListing } from '../../../src/ipvs/proc-read.js';
import { AddressBatches } from '../../../src/rtnl/address-batches.js';
import { HelperThread, THREAD_NAME } from '../../../src/util/helper-thread.js';

const JOB = new URL('../../support/helper-job-standin.js', import.meta.url);
const ADDRESS_STANDIN = new URL('../../support/address-thread-standin.js', import.meta.url);

/** A job's messages and its end, as a promise of both. */
function startJob(thread: HelperThread, data: unknown): { id: number; messages: unknown[]; ended: Promise<Error | undefined> } {
  const messages: unknown[] = [];
  let id = 0;
  const ended = new Promise<Error | undefined>((resolve) => {
    id = thread.start(JOB, data, { message: (m) => messages.push(m), end: resolve });
  });
  return { id, messages, ended };
}

/** This process's OS threads named as the helper thread (its worker's name). */
const helperThreads = () => readdirSync('/proc/self/task')
  .filter((tid) => { try { return readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === THREAD_NAME; } catch { return false; } })
  .length;

const started: HelperThread[] = [];
const own = () => {
  const t = new HelperThread();
  started.push(t);
  return t;
};
afterEach(() => {
  for (const t of started.splice(0)) t.close();
});

describe('HelperThread', () => {
  it('runs jobs at once on one thread, each with its own messages, in order', async () => {
    const t = own();
    const jobs = [1, 2, 3].map((value) => startJob(t, { do: 'echo', value }));
    expect(await Promise.all(jobs.map((j) => j.ended))).toEqual([undefined, undefined, undefined]);
    expect(jobs.map((j) => (j.messages[0] as { value: number }).value)).toEqual([1, 2, 3]);
    expect(new Set(jobs.map((j) => (j.messages[0] as { threadId: number }).threadId)).size).toBe(1);
  });

  it('aborts a job\'s signal on cancel; a job that throws ends with its error and the thread goes on', async () => {
    const t = own();
    const waiting = startJob(t, { do: 'wait' });
    const failing = startJob(t, { do: 'throw' });
    expect((await failing.ended)?.message).toBe('the job failed');
    while (!waiting.messages.length) await new Promise((r) => setTimeout(r, 5));
    t.cancel(waiting.id);
    expect(await waiting.ended).toBeUndefined();
    expect(waiting.messages).toEqual(['waiting', 'aborted']);
    expect(await startJob(t, { do: 'echo', value: 'after' }).ended).toBeUndefined();
    expect(t.failed).toBeUndefined();
  });

  it('ends every job when the thread dies, refuses later ones, and shared() starts another', async () => {
    const first = HelperThread.shared();
    expect(HelperThread.shared()).toBe(first);
    const waiting = startJob(first, { do: 'wait' });
    const dying = startJob(first, { do: 'exit' });
    expect((await dying.ended)?.message).toBe('thread ended (exit code 4)');
    expect((await waiting.ended)?.message).toBe('thread ended (exit code 4)');
    expect(first.failed?.message).toBe('thread ended (exit code 4)');
    expect((await startJob(first, { do: 'echo' }).ended)?.message).toBe('thread ended (exit code 4)');
    const next = HelperThread.shared();
    expect(next).not.toBe(first);
    expect(await startJob(next, { do: 'echo', value: 1 }).ended).toBeUndefined();
  });

  it('does not keep a process alive: one that started it and had a module loaded exits by itself', () => {
    const code = `import { HelperThread } from ${JSON.stringify(new URL('../../../src/util/helper-thread.js', import.meta.url).href)};
      HelperThread.shared().load(new URL(${JSON.stringify(JOB.href)})); console.log('started');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 20_000 });
    expect({ status: r.status, signal: r.signal, out: r.stdout.trim() }).toEqual({ status: 0, signal: null, out: 'started' });
  });

  it('ends once it had no job for its idle time, never while a job runs; shared() then starts another', async () => {
    const before = helperThreads();
    const t = new HelperThread(undefined, 150);
    started.push(t);
    const waiting = startJob(t, { do: 'wait' });
    while (!waiting.messages.length) await new Promise((r) => setTimeout(r, 5));
    expect(helperThreads()).toBe(before + 1);
    // Four idle times with a job running: the job holds it.
    await new Promise((r) => setTimeout(r, 600));
    expect(t.retired).toBe(false);
    t.cancel(waiting.id);
    expect(await waiting.ended).toBeUndefined();
    // With no job left, it ends by itself: the OS thread goes.
    while (!t.retired) await new Promise((r) => setTimeout(r, 10));
    expect(t.failed?.message).toBe('ended after 150 ms with no job');
    while (helperThreads() > before) await new Promise((r) => setTimeout(r, 10));
    expect((await startJob(t, { do: 'echo' }).ended)?.message).toBe('ended after 150 ms with no job');
    const next = HelperThread.shared();
    expect(next).not.toBe(t);
    expect(await startJob(next, { do: 'echo', value: 1 }).ended).toBeUndefined();
  });

  it('a job whose module cannot load ends with why; the thread goes on', async () => {
    const t = own();
    const ended = new Promise<Error | undefined>((end) => {
      t.start(new URL('../../support/no-such-job.js', import.meta.url), {}, { message: () => {}, end });
    });
    expect((await ended)?.message).toMatch(/Cannot find module|ERR_MODULE_NOT_FOUND/);
    expect(await startJob(t, { do: 'echo' }).ended).toBeUndefined();
  });
});

describe('the operator\'s jobs on one thread', () => {
  it('reads a listing while address batches are answered, and both on the same thread', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'helper-'));
    try {
      // 600 KB of text: about ten pieces, each a turn of the thread's loop.
      const text = `${'x'.repeat(99)}\n`.repeat(6000);
      writeFileSync(join(dir, 'file'), text, 'latin1');
      const t = own();
      const batches = new AddressBatches(ADDRESS_STANDIN, t);
      const b = Buffer.alloc(20);
      b.writeUInt32LE(20, 0);
      const reader = (await openProcListing(join(dir, 'file'), t))!;
      const answers = await Promise.all([1, 2, 3].map(() => batches.exchange([b])));
      expect(answers).toEqual([[0], [0], [0]]);
      // The listing parses nothing of this text (no virtual server in it), and reads it to its end.
      for (let got = await reader.next(); got; got = await reader.next()) expect(got).toEqual([]);
      expect(t.failed).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
