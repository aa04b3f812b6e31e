// Waiting for work started at once: every promise settles before the caller goes on or fails, so
// none is left running behind a failure or with its rejection unobserved.

/** Resolves with every value, in order, once all settled; else rejects with the first rejection. */
export async function settledAll<T extends readonly unknown[]>(
  ps: { readonly [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const results = await Promise.allSettled(ps);
  for (const r of results) if (r.status === 'rejected') throw r.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Resolves when `p` does or after `ms`, whichever is first; never rejects for the wait. */
export async function waitAtMost(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<void>((r) => { timer = setTimeout(r, ms); })]);
  clearTimeout(timer);
}
