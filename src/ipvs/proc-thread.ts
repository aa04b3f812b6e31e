// The listing's reading thread, started by proc-read.ts: reads /proc/net/ip_vs to its end with
// blocking reads, off the operator's event loop, and posts what it read in pieces of up to 64 KiB
// (the kernel gives a page or so a read). Posts { piece, bytes } with the piece's buffer handed
// over, then { end: true }, or { error } when the file cannot be opened or read.
import { closeSync, openSync, readSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';

const PIECE_BYTES = 1 << 16;
/** A piece is posted once less than this is left in it: a read rarely gives more. */
const READ_ROOM = 8192;

const { path } = workerData as { path: string };
let fd = -1;
try {
  fd = openSync(path, 'r');
  let buf = Buffer.allocUnsafeSlow(PIECE_BYTES);
  let used = 0;
  for (;;) {
    const n = readSync(fd, buf, used, PIECE_BYTES - used, null);
    used += n;
    if (used > 0 && (n === 0 || PIECE_BYTES - used < READ_ROOM)) {
      const piece = buf.buffer as ArrayBuffer;
      parentPort!.postMessage({ piece, bytes: used }, [piece]);
      buf = Buffer.allocUnsafeSlow(PIECE_BYTES);
      used = 0;
    }
    if (n === 0) break;
  }
  parentPort!.postMessage({ end: true });
} catch (err) {
  parentPort!.postMessage({ error: err instanceof Error ? err.message : String(err) });
} finally {
  if (fd >= 0) closeSync(fd);
}
