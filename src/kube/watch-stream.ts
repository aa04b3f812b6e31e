// A watch's answer read line by line: bounded line length, an idle timeout for a half-open
// connection, and an abort that always drops the connection. KubeClient.watchStream opens it;
// the Reflector (reflector.ts) parses the lines.
import { type Answer, type ApiLimits, KubeApiError, headerMap, readCapped } from './transport.js';

/** A watch that sent nothing for the idle timeout: the connection is presumed dead. */
export class WatchStalledError extends Error {
  constructor(readonly idleMs: number) {
    super(`watch stalled (no data for ${idleMs} ms)`);
  }
}

/** A watch in progress: `done` settles when it ends; `abort(err)` ends it. */
export interface WatchHandle { done: Promise<void>; abort(err?: Error): void }

/**
 * Opens a watch with `open` and feeds `onLine` each line (see KubeClient.watchStream for the
 * contract); `client.limits.maxWatchLineBytes` bounds a line.
 */
export function readWatchStream(
  open: () => Promise<Answer>, client: { readonly limits: ApiLimits },
  onLine: (line: string) => void, idleMs: number, onOpen?: () => void,
): WatchHandle {
  let abortIt: ((err: Error | undefined) => void) | undefined;
  let aborted: { err: Error | undefined } | undefined;
  const done = (async () => {
    const { res, what, abort } = await open();
    // Ending a watch always drops its connection (an error or not), so no old stream lingers.
    const drop = (err: Error | undefined) =>
      abort(err ?? Object.assign(new Error(`${what}: watch ended`), { stopped: true }));
    abortIt = drop;
    if (aborted) drop(aborted.err);
    const code = res.statusCode ?? 0;
    if (code < 200 || code > 299) {
      const text = await readCapped(res, 65_536);
      abort(undefined);
      throw new KubeApiError(code, text, headerMap(res.headers), what);
    }
    onOpen?.();
    await new Promise<void>((resolve, reject) => {
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      let idle: NodeJS.Timeout | undefined;
      const arm = () => {
        if (idleMs <= 0) return;
        clearTimeout(idle);
        idle = setTimeout(() => abort(new WatchStalledError(idleMs)), idleMs);
        idle.unref?.();
      };
      arm();
      res.on('data', (c: Buffer) => {
        arm();
        let start = 0;
        for (let nl = c.indexOf(10); nl !== -1; nl = c.indexOf(10, start)) {
          const piece = c.subarray(start, nl);
          const line = pendingBytes ? Buffer.concat([...pending, piece]).toString('utf8') : piece.toString('utf8');
          pending = [];
          pendingBytes = 0;
          start = nl + 1;
          if (line.trim()) onLine(line);
        }
        if (start < c.length) {
          pending.push(c.subarray(start));
          pendingBytes += c.length - start;
          if (pendingBytes > client.limits.maxWatchLineBytes) {
            const max = client.limits.maxWatchLineBytes;
            abort(Object.assign(new Error(`${what}: a watch line passed ${max} bytes; dropped`), { tooLarge: true }));
          }
        }
      });
      const end = (err?: Error) => {
        clearTimeout(idle);
        if (err) reject(err);
        else resolve();
      };
      res.on('error', (e) => end(e));
      res.on('end', () => end());
      res.on('close', () => end(res.complete ? undefined : new Error(`${what}: the watch connection closed`)));
      abortIt = (err) => { drop(err); end(err); };
      if (aborted) abortIt(aborted.err);
    });
  })();
  return {
    done,
    abort: (err?: Error) => {
      aborted ??= { err };
      abortIt?.(err);
    },
  };
}
