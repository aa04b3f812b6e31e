// Polling helpers for tests of asynchronous sources.

/** Resolves once `check` returns true (polled every 10 ms); rejects with `what` after `ms`. */
export async function waitFor(check: () => boolean, what: string, ms = 4000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** A promise resolved after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
