// What the process does with an error nothing caught (an uncaught exception, or a rejection no one
// handled): print it, end the helper thread (src/util/helper-thread.ts), then exit 1. Left to
// Node, the exit ended the thread while its `netlink` socket was open mid-batch, and the package's
// poll handler aborted the process ("FATAL ERROR: Error::Error napi_define_properties", exit 134)
// instead of exit 1. The thread is ended by closing its socket first; EXIT_BOUND_MS at most.
import { HelperThread } from '../util/helper-thread.js';

export const EXIT_BOUND_MS = 2000;

/** Ends the helper threads (bounded), then exits with `code`. */
export function exitAfterThreads(code: number): void {
  process.exitCode = code;
  void HelperThread.closeAll(EXIT_BOUND_MS).finally(() => process.exit(code));
}

/** Installs the handler; an error while it waits is printed and changes nothing. */
export function exitOnUncaught(write: (text: string) => void = (t) => process.stderr.write(t)): void {
  let exiting = false;
  process.on('uncaughtException', (e: unknown) => {
    write(`ipvs-operator: ${(e as Error)?.stack ?? String(e)}\n`);
    if (exiting) return;
    exiting = true;
    exitAfterThreads(1);
  });
}
