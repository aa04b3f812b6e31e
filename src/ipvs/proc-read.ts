// Reading the kernel's listing, /proc/net/ip_vs, in turn: the file side of proc.ts, which parses it.
import { type FileHandle, open } from 'node:fs/promises';
import { type ListingReader, ListingParser } from './proc.js';

/** Where the kernel lists the reader's IPVS table. */
export const PROC_IPVS = '/proc/net/ip_vs';

/** How much of the listing one read asks for (the kernel answers a page or so a read). */
const READ_BYTES = 1 << 16;

/** The kernel's listing, opened to be read in turn; undefined where there is none (no ip_vs, no /proc). */
export async function openProcListing(path = PROC_IPVS): Promise<ListingReader | undefined> {
  let file: FileHandle;
  try {
    file = await open(path, 'r');
  } catch {
    return undefined;
  }
  const parser = new ListingParser();
  const buf = Buffer.allocUnsafe(READ_BYTES);
  let ended = false;
  const close = async () => {
    ended = true;
    await file.close().catch(() => undefined);
  };
  return {
    next: async () => {
      if (ended) return undefined;
      try {
        const n = (await file.read(buf, 0, READ_BYTES, null)).bytesRead;
        if (n > 0) return parser.push(buf.toString('latin1', 0, n));
        await close();
        return parser.end();
      } catch {
        await close();
        return undefined;
      }
    },
    close,
  };
}
