// The manifest directory as the files source reads it (files.ts): which names are listed, the
// directory's identity (a new directory under the same name), and one file read through one
// descriptor within a size bound. Why each guard: docs/hardening.md.
import { constants } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** Files larger than this are refused unread (a manifest directory holds YAML, not data). */
export const MAX_FILE_BYTES = 16 << 20;

/** Bytes read at a time past the size fstat gave (a file that grew since). */
const GROWTH_CHUNK = 64 << 10;

/** Files up to this size are read into a ReadBuffer's one buffer; a larger one gets its own each read. */
const KEPT_BUFFER_BYTES = 1 << 20;

/**
 * One buffer kept across the reads of one reader that reads a file at a time (the files source:
 * its reads are queued), so that its rescans allocate nothing per file. What readRegularBytes
 * returns from it is valid until the next read through it.
 */
export class ReadBuffer {
  buf: Buffer = Buffer.alloc(0);
  /** Whether a read of its owner holds it (the owner's to set: a second reader reads without it). */
  held = false;
}

/**
 * Reads a regular file through one descriptor, opened non-blocking (a FIFO put in its place
 * never blocks the process), checked with fstat on that descriptor (no stat-then-open race) and
 * read at most `max` bytes (a file swapped for a bigger one is refused on what was read). Not a
 * regular file: ENOENT when `skipOthers` (the scan lists files only), else an error.
 *
 * One buffer of the size fstat gave, plus a byte to see the end, and no copy: the files source
 * reads every file again at each rescan (every 30 s), and the 1 MiB buffers read into before,
 * freed by the collector, stayed in malloc's arenas: 100 files of 270 KB read 20 times left the
 * process 30-40 MB larger outside the V8 heap (docs/performance.md, "The files source's rescans").
 * With `kept`, that buffer is the ReadBuffer's (grown to the largest file up to
 * KEPT_BUFFER_BYTES), and the bytes returned are a view of it. Only a file that grew since its
 * fstat (or a size-0 file with content) is read on in chunks, into a buffer of its own.
 */
export async function readRegularBytes(
  path: string, max: number, skipOthers: boolean, kept?: ReadBuffer,
): Promise<Buffer> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw Object.assign(new Error('not a regular file'), { code: skipOthers ? 'ENOENT' : 'ENOTREG' });
    if (st.size > max) throw new Error(`larger than ${max} bytes`);
    let first: Buffer;
    if (kept && st.size < KEPT_BUFFER_BYTES) {
      if (kept.buf.length < st.size + 1) kept.buf = Buffer.allocUnsafe(st.size + 1);
      first = kept.buf;
    } else first = Buffer.allocUnsafe(st.size + 1);
    const end = st.size + 1; // the buffer may be longer (kept): read no more than fstat's size and a byte
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(first, total, end - total, null);
      if (bytesRead === 0) return first.subarray(0, total);
      total += bytesRead;
      if (total > max) throw new Error(`larger than ${max} bytes`);
      if (total === end) break; // more than fstat said: read on
    }
    const chunks: Buffer[] = [first.subarray(0, total)];
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(GROWTH_CHUNK, max + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > max) throw new Error(`larger than ${max} bytes`);
      chunks.push(buf.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total);
  } finally {
    await fh.close();
  }
}

/**
 * The *.yaml / *.yml entries of `dir` that are not directories, following symlinks, sorted; hidden
 * ones skipped. A FIFO or device under such a name is listed so that reading it is refused as a
 * problem (its file's last good objects stay) rather than taken for a deleted file.
 */
export async function yamlFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const d of await readdir(dir, { withFileTypes: true })) {
    if (d.name.startsWith('.') || !/\.ya?ml$/.test(d.name)) continue;
    if (d.isFile() || d.isFIFO() || d.isSocket() || d.isCharacterDevice() || d.isBlockDevice()) out.push(d.name);
    else if (d.isSymbolicLink()) {
      // A ConfigMap volume's files are symlinks into ..data; a dangling one is a file that is gone.
      const target = await stat(join(dir, d.name)).catch(() => undefined);
      if (target?.isFile()) out.push(d.name);
    }
  }
  return out.sort();
}

/**
 * The directory's identity (device, inode, birth time: a directory created again may get the
 * inode number of the one removed), undefined when it does not exist.
 */
export async function dirId(dir: string): Promise<string | undefined> {
  const s = await stat(dir).catch(() => undefined);
  return s?.isDirectory() ? `${s.dev}:${s.ino}:${s.birthtimeMs}` : undefined;
}
