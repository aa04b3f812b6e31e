// Reading the kernel's listing, /proc/net/ip_vs, in turn: the file side of proc.ts, which parses it.
// The kernel walks its table from the start for every read of a page or so, so the reads are dear
// (47 s for 30 000 Services in the lab VM): the helper thread (src/util/helper-thread.ts, the job
// proc-thread.ts) makes them, and the event loop, busy with the dumps of the same full read, only
// parses what the thread posted.
import { access, constants } from 'node:fs/promises';
import { HelperThread } from '../util/helper-thread.js';
import { type ListedServer, type ListingReader, ListingParser } from './proc.js';

/** Where the kernel lists the reader's IPVS table. */
export const PROC_IPVS = '/proc/net/ip_vs';
/** The job the helper thread runs for a listing. */
export const LISTING_JOB = new URL('./proc-thread.js', import.meta.url);

/**
 * The kernel's listing, read in turn by the helper thread from now on; undefined where there is
 * none (no ip_vs, no /proc). A read that fails, or a thread that dies, ends it as undefined;
 * close() stops the thread's reads.
 */
export async function openProcListing(path = PROC_IPVS, thread?: HelperThread): Promise<ListingReader | undefined> {
  try {
    await access(path, constants.R_OK);
  } catch {
    return undefined;
  }
  const parser = new ListingParser();
  const pieces: string[] = [];
  let state: 'reading' | 'ended' | 'failed' | 'closed' = 'reading';
  let wake = () => {};
  const on = thread ?? HelperThread.shared();
  const job = on.start(LISTING_JOB, { path }, {
    message: (m) => {
      if (state === 'closed') return; // a piece read before the cancel arrived
      const { piece, bytes } = m as { piece: ArrayBuffer; bytes: number };
      pieces.push(Buffer.from(piece, 0, bytes).toString('latin1'));
      wake();
    },
    end: (error) => {
      if (state === 'reading') state = error ? 'failed' : 'ended';
      wake();
    },
  });
  const next = async (): Promise<ListedServer[] | undefined> => {
    while (!pieces.length && state === 'reading') await new Promise<void>((r) => { wake = r; });
    if (state === 'closed') return undefined;
    if (pieces.length) return parser.push(pieces.splice(0).join(''));
    if (state === 'failed') return undefined;
    state = 'closed';
    return parser.end();
  };
  const close = async () => {
    if (state === 'reading') on.cancel(job);
    state = 'closed';
    pieces.length = 0;
    wake();
  };
  return { next, close };
}
