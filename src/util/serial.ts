// One call at a time: calls queued on a Serial run in order, each after the previous settled
// (whether it resolved or rejected). Used where one socket or one restore must not interleave.

/** A queue of async calls run one after another. */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `fn` once every call queued before it has settled; resolves or rejects as `fn` does. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
