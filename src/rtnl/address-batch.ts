// What the operator's event loop and the address thread (address-thread.ts) post each other, and
// the numbering of a batch's messages: pure, no I/O.
import type { RouteRequest } from './socket.js';

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

/** The thread's answer to a batch: each message's errno (0 = ACK), or the socket's error. */
export type BatchAnswer =
  | { id: number; errnos: number[]; recorded?: Buffer; recordedLengths: number[] }
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
 * The messages packed in `all`, each numbered in place for the socket that sends them: nlmsg_seq
 * (offset 8) from `seq()`, nlmsg_pid (offset 12) set to `port`. Throws on lengths that do not
 * add up to the buffer or on a message shorter than its header.
 */
export function numberMessages(
  all: Buffer, lengths: Int32Array, seq: () => number, port: number,
): RouteRequest[] {
  const out: RouteRequest[] = [];
  let at = 0;
  for (const n of lengths) {
    if (n < 16 || at + n > all.length) throw new RangeError(`address batch: a message of ${n} bytes at ${at}`);
    const bytes = all.subarray(at, (at += n));
    const s = seq();
    bytes.writeUInt32LE(s >>> 0, 8);
    bytes.writeUInt32LE(port >>> 0, 12);
    out.push({ seq: s, bytes });
  }
  if (at !== all.length) throw new RangeError(`address batch: ${all.length - at} bytes left over`);
  return out;
}
