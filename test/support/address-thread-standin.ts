// A stand-in for the address job (src/rtnl/address-thread.ts) in unit tests
// (test/unit/rtnl/address-batches.test.ts), run on a helper thread: the first message's nlmsg_type
// says what to do. 0xdead: the thread ends (exit code 3) without an answer; 0xbad: the batch fails
// as a socket error would; else every message is answered with errno 17 (EEXIST) when its
// nlmsg_flags has 0x400 set, 0 otherwise, and echoed as sent when asked.
import type { AddressBatch, BatchAnswer } from '../../src/rtnl/address-batch.js';

export function run(b: AddressBatch, post: (a: BatchAnswer) => void): void {
  const all = Buffer.from(b.bytes);
  const type = all.length >= 6 ? all.readUInt16LE(4) : 0;
  if (type === 0xdead) process.exit(3);
  if (type === 0xbad) {
    post({ id: b.id, error: { op: 'send', errno: 105, code: 'ENOBUFS', message: 'send: no buffer space' } });
    return;
  }
  const errnos: number[] = [];
  let at = 0;
  for (const n of b.lengths) {
    errnos.push(all.readUInt16LE(at + 6) & 0x400 ? 17 : 0);
    at += n;
  }
  post({ id: b.id, errnos, ...(b.record ? { recorded: all } : {}) });
}
