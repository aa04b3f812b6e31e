// The helper thread's entry (started by helper-thread.ts): imports each job module on first use
// (or when asked to load it ahead), runs each job's run(data, post, signal) and posts the job's
// messages and its end. Jobs run at once on this thread's loop: a module that must not interleave
// its own jobs queues them itself. 'close' calls every module's close() and lets the thread end.
import { parentPort } from 'node:worker_threads';
import type { FromHelper, ToHelper } from './helper-thread.js';

/** What a job module exports. */
interface JobModule {
  run(data: unknown, post: (message: unknown, transfer?: ArrayBuffer[]) => void, signal: AbortSignal): unknown;
  close?(): void;
}

const port = parentPort!;
const modules = new Map<string, Promise<JobModule>>();
const running = new Map<number, AbortController>();

function load(href: string): Promise<JobModule> {
  let m = modules.get(href);
  if (!m) modules.set(href, (m = import(href) as Promise<JobModule>));
  return m;
}

const reply = (m: FromHelper, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);

async function runJob(id: number, href: string, data: unknown): Promise<void> {
  const abort = new AbortController();
  running.set(id, abort);
  try {
    const mod = await load(href);
    await mod.run(data, (message, transfer) => reply({ job: id, message }, transfer), abort.signal);
    reply({ job: id, done: true });
  } catch (e) {
    reply({ job: id, done: true, error: e instanceof Error ? e.message : String(e) });
  } finally {
    running.delete(id);
  }
}

port.on('message', (m: ToHelper) => {
  if (m === 'close') {
    for (const a of running.values()) a.abort();
    void Promise.all([...modules.values()].map((p) => p.then((mod) => mod.close?.(), () => undefined)))
      .finally(() => port.close());
    return;
  }
  if ('load' in m) void load(m.load).catch(() => undefined); // its job reports the failure
  else if ('cancel' in m) running.get(m.cancel)?.abort();
  else void runJob(m.job, m.module, m.data);
});
