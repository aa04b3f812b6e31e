// The netlink socket (src/netlink/socket.ts) against the host kernel's route netlink, with requests
// that change nothing: NLMSG_NOOP, which the kernel only acknowledges. What the socket promises when
// it fails: every exchange still waiting rejects, not only the last one sent.
import { afterEach, describe, expect, it } from '@jest/globals';
import { NLM_F_ACK, NLM_F_REQUEST } from '../../../src/netlink/constants.js';
import { NetlinkError } from '../../../src/netlink/errors.js';
import { type OutgoingBytes, NetlinkSocket } from '../../../src/netlink/socket.js';
import { RtnlError } from '../../../src/rtnl/errors.js';
import { NETLINK_ROUTE } from '../../../src/rtnl/socket.js';

const NLMSG_NOOP = 1;

/** A NOOP asking for an ACK, numbered for `s`. */
const noop = (s: NetlinkSocket): OutgoingBytes => {
  const bytes = Buffer.alloc(16);
  const seq = s.nextSeq();
  bytes.writeUInt32LE(16, 0);
  bytes.writeUInt16LE(NLMSG_NOOP, 4);
  bytes.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK, 6);
  bytes.writeUInt32LE(seq, 8);
  bytes.writeUInt32LE(s.port, 12);
  return { seq, bytes, dump: false };
};

let open: NetlinkSocket[] = [];
const socket = () => {
  const s = new NetlinkSocket(NETLINK_ROUTE, RtnlError);
  open.push(s);
  return s;
};
afterEach(() => {
  for (const s of open) s.close();
  open = [];
});

describe('a netlink socket on the host kernel', () => {
  it('answers 300 acknowledged NOOPs, in order, over three datagrams', async () => {
    const s = socket();
    const replies = await s.exchange(Array.from({ length: 300 }, () => noop(s)));
    expect(replies).toHaveLength(300);
    expect(replies.every((r) => r.errno === 0 && r.messages.length === 0 && !r.interrupted)).toBe(true);
  });

  it('rejects every exchange still waiting when it is closed, then refuses new ones', async () => {
    const s = socket();
    const first = s.exchange([noop(s), noop(s)]);
    const second = s.exchange([noop(s)]);
    s.close(); // before any reply can be read: both wait
    const settled = await Promise.allSettled([first, second]);
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    for (const r of settled) {
      const reason = (r as PromiseRejectedResult).reason as NetlinkError;
      expect(reason).toBeInstanceOf(RtnlError);
      expect(reason.message).toMatch(/socket closed/);
    }
    await expect(s.exchange([noop(s)])).rejects.toThrow(/socket closed/);
  });

  it('keeps answering after an exchange ends, with no failure recorded', async () => {
    const s = socket();
    const [a, b] = await Promise.all([s.exchange([noop(s)]), s.exchange([noop(s), noop(s)])]);
    expect([a!.length, b!.length]).toEqual([1, 2]);
    expect([...a!, ...b!].map((r) => r.errno)).toEqual([0, 0, 0]);
    expect(s.failed).toBeUndefined();
  });
});
