// A job module for the helper thread's unit tests (test/unit/util/helper-thread.test.ts). `data.do`
// says what to do: 'echo' posts `data.value` and the thread's id, and ends; 'wait' posts 'waiting',
// then ends once its signal aborts, posting 'aborted'; 'throw' throws; 'exit' ends the thread with
// exit code 4.
import { threadId } from 'node:worker_threads';

export async function run(
  data: { do: 'echo' | 'wait' | 'throw' | 'exit'; value?: unknown }, post: (m: unknown) => void, signal: AbortSignal,
): Promise<void> {
  if (data.do === 'echo') post({ value: data.value, threadId });
  if (data.do === 'throw') throw new Error('the job failed');
  if (data.do === 'exit') process.exit(4);
  if (data.do === 'wait') {
    post('waiting');
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    post('aborted');
  }
}
