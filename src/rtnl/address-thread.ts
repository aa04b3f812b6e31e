// The address batches' job, run on the helper thread (src/util/helper-thread.ts) by
// address-batches.ts: it sends each batch it is given, in turn, on a route-netlink socket
// (socket.ts) of the batch's own, so the kernel's work for each address (done inside sendmsg())
// runs on that thread, not on the operator's event loop. It numbers the messages itself
// (nlmsg_seq and nlmsg_pid are its socket's) and posts back each one's errno, or the error that
// failed the socket. With `record`, it also posts back the messages as sent (the bench's kernel
// floor, bench/replay.ts). A batch cancelled while sent has its socket closed; close() closes the
// socket in use before the thread ends.
import { setTimeout as delay } from 'node:timers/promises';
import { NetlinkError } from '../netlink/errors.js';
import { NetlinkSocket } from '../netlink/socket.js';
import { Serial } from '../util/serial.js';
import { type AddressBatch, type BatchAnswer, numberMessages, unpackMessages } from './address-batch.js';
import { RouteSocket } from './socket.js';

/** The socket of the batch being sent, if any. */
let inUse: RouteSocket | undefined;
const turns = new Serial();

/**
 * Sends one batch on a socket of its own, closed as soon as it is answered: a thread that ends
 * (terminate(), or the process exiting) while a socket of the `netlink` package is open takes the
 * whole process down (SIGSEGV, or an abort on a Napi::Error, seen on the host with Node 24); with
 * every socket closed it ends cleanly. A socket costs one socket() and bind() beside the sendmsg()s.
 */
async function send(batch: AddressBatch, signal: AbortSignal): Promise<BatchAnswer> {
  const sent: Buffer[] = [];
  const cancel = () => inUse?.close();
  try {
    if (signal.aborted) throw new NetlinkError('address-batch', 0, 'ECANCELED', 'cancelled');
    const s = (inUse = new RouteSocket(false));
    signal.addEventListener('abort', cancel, { once: true });
    const out = numberMessages(unpackMessages(Buffer.from(batch.bytes), batch.lengths), () => s.nextSeq(), s.port);
    NetlinkSocket.recorder = batch.record ? (_protocol, datagram) => { sent.push(Buffer.from(datagram)); } : undefined;
    const errnos = await s.exchange(out);
    return { id: batch.id, errnos, ...(batch.record ? { recorded: Buffer.concat(sent) } : {}) };
  } catch (e) {
    const err = e instanceof NetlinkError ? e : NetlinkError.fromPackageError('address-batch', e);
    return { id: batch.id, error: { op: err.op, errno: err.errno, code: err.code, message: err.message } };
  } finally {
    signal.removeEventListener('abort', cancel);
    NetlinkSocket.recorder = undefined;
    inUse?.close();
    inUse = undefined;
  }
}

/** The helper thread's job: one batch, sent after the ones before it; posts its answer. */
export function run(batch: AddressBatch, post: (answer: BatchAnswer) => void, signal: AbortSignal): Promise<void> {
  return turns.run(async () => {
    const answer = await send(batch, signal);
    // The closed socket's handles are let go in the close phase of this turn of the loop; a timer
    // fires in a later turn, after it. Posted at once, the answer let a process that exited on it
    // end this thread first (an abort, seen on the host); after the timer, it ended cleanly.
    await delay(0);
    post(answer);
  });
}

/** Closes the socket in use: the helper thread is about to end. */
export function close(): void {
  inUse?.close();
}
