// Reading the kernel's listing, /proc/net/ip_vs, in turn: the file side of proc.ts, which parses it.
// The kernel walks its table from the start for every read of a page or so, so the reads are dear
// (47 s for 30 000 Services in the lab VM): a thread of their own (proc-thread.ts) makes them, and
// the event loop, busy with the dumps of the same full read, only parses what the thread posted.
import { access, constants } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import { type ListedServer, type ListingReader, ListingParser } from './proc.js';

/** Where the kernel lists the reader's IPVS table. */
export const PROC_IPVS = '/proc/net/ip_vs';

type Posted = { piece: ArrayBuffer; bytes: number } | { end: true } | { error: string };

/**
 * The kernel's listing, read in turn by a thread from now on; undefined where there is none (no
 * ip_vs, no /proc). A read that fails, or a thread that dies, ends it as undefined; close() stops
 * the thread.
 */
export async function openProcListing(path = PROC_IPVS): Promise<ListingReader | undefined> {
  try {
    await access(path, constants.R_OK);
  } catch {
    return undefined;
  }
  const parser = new ListingParser();
  const pieces: string[] = [];
  let state: 'reading' | 'ended' | 'failed' | 'closed' = 'reading';
  let wake = () => {};
  const settle = (to: 'ended' | 'failed') => {
    if (state === 'reading') state = to;
    wake();
  };
  const thread = new Worker(new URL('./proc-thread.js', import.meta.url), { workerData: { path } });
  thread.on('message', (m: Posted) => {
    if ('piece' in m) {
      pieces.push(Buffer.from(m.piece, 0, m.bytes).toString('latin1'));
      wake();
    } else settle('end' in m ? 'ended' : 'failed');
  });
  thread.on('error', () => settle('failed'));
  thread.on('exit', () => settle('failed')); // after its end: no change
  const next = async (): Promise<ListedServer[] | undefined> => {
    while (!pieces.length && state === 'reading') await new Promise<void>((r) => { wake = r; });
    if (state === 'closed') return undefined;
    if (pieces.length) return parser.push(pieces.splice(0).join(''));
    if (state === 'failed') return undefined;
    state = 'closed';
    return parser.end();
  };
  const close = async () => {
    state = 'closed';
    pieces.length = 0;
    wake();
    await thread.terminate();
  };
  return { next, close };
}
