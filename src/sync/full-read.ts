// The real servers of a full read: the kernel's listing from its start and GET_DEST dumps from the
// end, at once, until they meet. The listing (/proc/net/ip_vs, proc.ts) has every real server in
// one file, but the kernel walks its service table from the start for every read of a page or so
// (ip_vs_info_seq_start), so a read costs more the further in it is: 47 s for all of 30 000
// Services in the lab VM, against 34 s of dumps. A dump costs the same wherever its virtual server
// is. The virtual server dump and the listing walk the table in the same order, so the listing
// reads the cheap start while the dumps take the end, and each takes over where the other is dear.
import type { IpvsClient, ReadOptions } from '../ipvs/types.js';
import type { ListedServer, ListingReader } from '../ipvs/proc.js';
import { readDestMaps } from '../ipvs/read.js';
import { DUMP_SOCKETS } from '../ipvs/dump-pool.js';
import { type RealServer, type VirtualServer, realServerKey, virtualServerKey } from '../model/ipvs.js';
import type { DesiredTable } from '../model/desired.js';
import { settledAll, waitAtMost } from '../util/settled.js';

/**
 * How the sync's copy of the table reads the kernel: without the traffic counters, which it never
 * uses (the metrics and the cluster load view read their own), and which would double the heap of
 * the copy once the drift check has read every entry (ReadOptions).
 */
export const COPY_READ: ReadOptions = Object.freeze({ stats: false });

/** Virtual servers per batch of dumps from the end: the two meet to within about a batch. */
const DUMP_BATCH = 64;
/** How long the dumps wait for the listing's first record before they start anyway. */
export const FIRST_RECORD_WAIT_MS = 5000;

/** How a full read got its real servers. */
export interface FullReadCount {
  /** Virtual servers taken from the listing, and dumped. */
  listed: number;
  dumped: number;
  /** Whether the kernel's listing was opened at all. */
  listing: boolean;
}

/**
 * The real servers of each of `vss` (the kernel's virtual server dump, in its order), in order;
 * rejects with the first failed dump's error. A virtual server `desired` wants takes its real
 * servers from the listing when the listing shows them in full: no thresholds nor tunnel wanted,
 * none listed. The listing cannot show thresholds someone else set on such a real server: the
 * drift check's netlink reads in turn find them. Every other one is dumped.
 */
export async function readFullDests(
  ipvs: IpvsClient, vss: readonly VirtualServer[], desired?: DesiredTable, firstRecordWaitMs = FIRST_RECORD_WAIT_MS,
  opened?: Promise<ListingReader | undefined>,
): Promise<{ dests: Array<Map<string, RealServer>>; count: FullReadCount }> {
  const dests = new Array<Map<string, RealServer> | undefined>(vss.length);
  /** Taken by the dumps (read, or in a batch being read). */
  const claimed = new Uint8Array(vss.length);
  const index = new Map(vss.map((vs, i) => [virtualServerKey(vs), i] as const));
  // The listing opened for this read (`opened`, maybe long before: its thread reads ahead), else now.
  const reader = desired && vss.length ? await (opened ?? ipvs.listing?.()) : undefined;
  if (!reader) await closeListing(opened);
  let front = 0; // the listing has gone past every index below
  let back = vss.length; // the dumps have claimed every index from here
  let listed = 0;
  const seen = new Set<string>();

  let firstRead: () => void = () => {};
  const started = new Promise<void>((r) => { firstRead = r; });
  const fromListing = async () => {
    try {
      for (let got = await reader!.next(); got && front < back; got = await reader!.next()) {
        if (got.length) firstRead(); // a read that completed a record (the last completes at the end)
        if (!take(got)) break;
      }
    } finally {
      firstRead();
      await reader!.close();
    }
  };
  /** Takes what one read completed; false once the listing reached what the dumps claimed. */
  const take = (got: readonly ListedServer[]): boolean => {
    for (const { key, rss } of got) {
      const i = index.get(key);
      if (i === undefined) continue; // not in the virtual server dump (added since)
      if (claimed[i]) return false;
      front = Math.max(front, i + 1);
      if (seen.has(key)) { // listed twice: trust neither
        if (dests[i]) listed--;
        dests[i] = undefined;
        continue;
      }
      seen.add(key);
      const want = desired!.get(key);
      if (rss && want && shownInFull(want.dests) && shownInFull(rss)) {
        dests[i] = new Map(rss.map((rs) => [realServerKey(rs), rs]));
        listed++;
      }
    }
    return true;
  };
  const dumpFromEnd = async () => {
    // The listing's first read (the cheapest) is taken first: a small table is read by it alone.
    // A listing that gives no record within the wait is not waited for.
    if (reader) await waitAtMost(started, firstRecordWaitMs);
    for (let size = DUMP_SOCKETS; back > front; size = DUMP_BATCH) {
      const batch: number[] = [];
      while (batch.length < size && back > front) {
        claimed[--back] = 1;
        if (!dests[back]) batch.push(back);
      }
      await dump(batch);
    }
    // Everything is claimed or listed: a read the listing still waits for is of no use.
    await reader?.close();
  };
  const dump = async (batch: readonly number[]) => {
    const read = await readDestMaps(ipvs, batch.map((i) => vss[i]!), COPY_READ);
    batch.forEach((i, j) => { dests[i] = read[j]!; });
  };

  await settledAll([reader ? fromListing() : Promise.resolve(), dumpFromEnd()]);
  // What neither took: listed but not in full, listed twice or not listed (a mark, a line it could not read).
  const left = [...dests.keys()].filter((i) => !dests[i]);
  await dump(left);
  const count = { listed, dumped: vss.length - listed, listing: !!reader };
  return { dests: dests as Array<Map<string, RealServer>>, count };
}

/** Whether the listing shows these real servers in full: no thresholds, no tunnel settings. */
function shownInFull(rss: readonly RealServer[]): boolean {
  return rss.every((rs) => rs.forward !== 'tunnel' && rs.upperThreshold === 0 && rs.lowerThreshold === 0);
}

/** Closes a listing once it is open; a failure to close has nothing left to stop, so it is dropped. */
export async function closeListing(listing: Promise<ListingReader | undefined> | undefined): Promise<void> {
  await listing?.then((l) => l?.close()).catch(() => undefined);
}
