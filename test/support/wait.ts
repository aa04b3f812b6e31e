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

/**
 * Takes `read` between two reads of `fence` that agree (JSON of `key` of each), so nothing the
 * fence sees moved while `read` ran: the kernel's counters fold and its timers end connections at
 * any moment. Tries `tries` times; the last try's values are returned whether or not they agree.
 */
export async function betweenAgreeing<F, T>(fence: () => Promise<F> | F, read: () => Promise<T> | T,
  key: (f: F) => unknown = (f) => f, tries = 20): Promise<{ fence: F; got: T }> {
  for (let n = 1; ; n++) {
    const before = await fence();
    const got = await read();
    const after = await fence();
    if (n >= tries || bigintJson(key(before)) === bigintJson(key(after))) return { fence: before, got };
  }
}

/** JSON that also writes bigints (the kernel's 64-bit counters) as `<digits>n`. */
export function bigintJson(x: unknown): string {
  return JSON.stringify(x, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}
