// What the operator's event loop and the address job (address-thread.ts, on the helper thread)
// post each other, which batches the thread sends, and the numbering of a batch's messages: pure.
import { NLMSG_HDRLEN } from '../netlink/constants.js';
import type { RouteRequest } from './socket.js';

/**
 * Batches of at least this many addresses are sent from the helper thread (src/util/
 * helper-thread.ts, ended when idle). Smaller ones, a change's few VIPs, are sent from the
 * event loop, where a few adds cost less than a hop each way. The thread's memory (about 15 MB of
 * RSS: the lab VM's operator at 10 000 Services, 186 MB against 170 when it had no thread) is paid
 * during a full sync anyway, which reads the kernel's listing through it.
 */
export const THREAD_MIN_ADDRESSES = 1024;

/** A batch of address requests, packed into one buffer handed over to the thread. */
export interface AddressBatch {
  id: number;
  /** The messages, back to back. */
  bytes: ArrayBuffer;
  /** Each message's length, in order. */
  lengths: Int32Array;
  /** Whether to post back the messages as sent (NetlinkSocket.recorder is set on the event loop). */
  record: boolean;
}

/** What a failed batch posts: its NetlinkError's fields. */
export interface PostedError {
  op: string;
  errno: number;
  code: string;
  message: string;
}

/**
 * The thread's answer to a batch: each message's errno (0 = ACK), with `recorded` the datagrams
 * as sent when the batch asked (`record`); or the socket's error.
 */
export type BatchAnswer =
  | { id: number; errnos: number[]; recorded?: Buffer }
  | { id: number; error: PostedError };

/** One buffer holding `messages` back to back, and their lengths. */
export function packMessages(messages: readonly Buffer[]): { bytes: ArrayBuffer; lengths: Int32Array } {
  const lengths = new Int32Array(messages.length);
  let total = 0;
  messages.forEach((m, i) => { lengths[i] = m.length; total += m.length; });
  const bytes = new ArrayBuffer(total);
  const view = Buffer.from(bytes);
  let at = 0;
  for (const m of messages) at += m.copy(view, at);
  return { bytes, lengths };
}

/**
 * The messages packed in `all` (views on it, not copies). Throws on lengths that do not add up to
 * the buffer, or on a message shorter than its header.
 */
export function unpackMessages(all: Buffer, lengths: Int32Array): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const n of lengths) {
    if (n < NLMSG_HDRLEN || at + n > all.length) {
      throw new RangeError(`address batch: a message of ${n} bytes at ${at}`);
    }
    out.push(all.subarray(at, (at += n)));
  }
  if (at !== all.length) throw new RangeError(`address batch: ${all.length - at} bytes left over`);
  return out;
}

/**
 * Each message numbered in place for the socket that sends it: nlmsg_seq (offset 8) from `seq()`,
 * nlmsg_pid (offset 12) set to `port`.
 */
export function numberMessages(messages: readonly Buffer[], seq: () => number, port: number): RouteRequest[] {
  return messages.map((bytes) => {
    const s = seq();
    bytes.writeUInt32LE(s >>> 0, 8);
    bytes.writeUInt32LE(port >>> 0, 12);
    return { seq: s, bytes };
  });
}
