// A process that throws while the address thread sends a batch (test/unit/rtnl/address-batches.test.ts):
// it installs the CLI's handler of errors nothing caught (src/cli/fatal.ts), starts a batch of
// 60 000 adds on a link index that does not exist (the host kernel refuses each one; nothing
// changes), and throws once the thread's socket (one more socket among its fds) has answers queued
// (Rmem in /proc/self/net/netlink): the kernel is answering and the thread reading.
import { exitOnUncaught } from '../../src/cli/fatal.js';
import { AddressBatches } from '../../src/rtnl/address-batches.js';
import { encodeAddrRequest, parseHostAddress } from '../../src/rtnl/messages.js';
import { netlinkRows, socketInodes } from './netlink-sockets.js';

const NO_LINK = 0x7ffffff0;

/** Bytes queued on the netlink socket of `inode` (Rmem), 0 when it is not listed. */
function queued(inode: string): number {
  return netlinkRows().find((r) => r.inode === inode)?.rmem ?? 0;
}

exitOnUncaught();
const before = socketInodes();
const batches = new AddressBatches();
const adds = Array.from({ length: 60_000 }, (_, i) =>
  encodeAddrRequest('add', NO_LINK, parseHostAddress('add', `10.200.${i >> 8}.${i & 255}`), 0, 0));
void batches.exchange(adds).then(() => process.stdout.write('answered before the throw\n'), () => undefined);
const poll = setInterval(() => {
  const thread = socketInodes().find((s) => !before.includes(s));
  if (thread === undefined || queued(thread) === 0) return;
  clearInterval(poll);
  throw new Error('boom mid-batch');
}, 1);
