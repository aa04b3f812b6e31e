// The listing's job, run on the helper thread (src/util/helper-thread.ts) by proc-read.ts: reads
// /proc/net/ip_vs to its end with blocking reads, off the operator's event loop, and posts what it
// read in pieces of up to 64 KiB (the kernel gives a page or so a read). Posts { piece, bytes } with
// the piece's buffer handed over, and throws (the job's error) when the file cannot be opened or
// read. Between pieces it lets the thread's loop turn, so a cancel (the listing closed) or another
// job's answer is not kept waiting for the whole file.
import { closeSync, openSync, readSync } from 'node:fs';
import { setImmediate as turn } from 'node:timers/promises';

const PIECE_BYTES = 1 << 16;
/** A piece is posted once less than this is left in it: a read rarely gives more. */
const READ_ROOM = 8192;

/** Reads `path` until its end, or until `signal` aborts. */
export async function run(
  { path }: { path: string }, post: (m: { piece: ArrayBuffer; bytes: number }, transfer: ArrayBuffer[]) => void,
  signal: AbortSignal,
): Promise<void> {
  const fd = openSync(path, 'r');
  try {
    let buf = Buffer.allocUnsafeSlow(PIECE_BYTES);
    let used = 0;
    while (!signal.aborted) {
      const n = readSync(fd, buf, used, PIECE_BYTES - used, null);
      used += n;
      if (used > 0 && (n === 0 || PIECE_BYTES - used < READ_ROOM)) {
        const piece = buf.buffer as ArrayBuffer;
        post({ piece, bytes: used }, [piece]);
        buf = Buffer.allocUnsafeSlow(PIECE_BYTES);
        used = 0;
        await turn();
      }
      if (n === 0) break;
    }
  } finally {
    closeSync(fd);
  }
}
