// FakeVipLink's batch semantics (the real link's: test/kernel/rtnl.test.ts, and the contract in
// test/support/vip-contract.ts), the address request encoding, and the route socket's pipelining
// against the host kernel on a link index that does not exist (every request is refused, nothing
// changes on the host).
import { describe, expect, it } from '@jest/globals';
import { Errno, isExists } from '../../../src/netlink/errors.js';
import { decodeMessages, parseAttrs } from '../../../src/netlink/framing.js';
import { RtnlError, isForeignLink } from '../../../src/rtnl/errors.js';
import { RTM_DELADDR, RTM_NEWADDR, encodeAddrRequest, parseHostAddress } from '../../../src/rtnl/messages.js';
import { CHUNK, RouteSocket } from '../../../src/rtnl/socket.js';
import { FakeVipLink, type VipResult } from '../../../src/rtnl/vips.js';

const LINK = 'ipvs-op0';
const codes = (rs: VipResult[]) => rs.map((e) => e?.code);

describe('FakeVipLink batches', () => {
  it('addMany: one result per address, in order; refused ones do not stop the others', async () => {
    const v = new FakeVipLink();
    await v.ensure(LINK);
    await v.add(LINK, '10.200.1.2');
    const rs = await v.addMany(LINK, ['10.200.1.1', '10.200.1.2', 'fd00:200::1', 'not-an-ip', '10.200.1.1', '10.200.1.3']);
    expect(codes(rs)).toEqual([undefined, 'EEXIST', undefined, 'EINVALARG', 'EEXIST', undefined]);
    expect(isExists(rs[1])).toBe(true);
    expect(rs[1]).toBeInstanceOf(RtnlError);
    expect(rs[1]!.op).toBe(`add-address ${LINK} 10.200.1.2`);
    expect((await v.list(LINK)).sort()).toEqual(['10.200.1.1', '10.200.1.2', '10.200.1.3', 'fd00:200::1']);
  });

  it('removeMany: EADDRNOTAVAIL for an address not on the link, the others removed', async () => {
    const v = new FakeVipLink();
    await v.ensure(LINK);
    await v.addMany(LINK, ['10.200.1.1', 'fd00:200::1']);
    const rs = await v.removeMany(LINK, ['10.200.1.1', '10.200.1.9', 'FD00:200:0::1', '10.200.1.1']);
    expect(codes(rs)).toEqual([undefined, 'EADDRNOTAVAIL', undefined, 'EADDRNOTAVAIL']);
    expect(await v.list(LINK)).toEqual([]);
  });

  it('add and remove are one-address batches: the same errors thrown', async () => {
    const v = new FakeVipLink();
    await v.ensure(LINK);
    await v.add(LINK, '10.200.1.1');
    expect(isExists(await v.add(LINK, '10.200.1.1').catch((e: unknown) => e))).toBe(true);
    await expect(v.remove(LINK, '10.200.1.9')).rejects.toMatchObject({ code: 'EADDRNOTAVAIL', errno: Errno.EADDRNOTAVAIL });
    await expect(v.add(LINK, '10.200.1')).rejects.toMatchObject({ code: 'EINVALARG' });
  });

  it.each([['addMany'], ['removeMany']] as const)('%s on a missing link rejects with ENODEV and changes nothing', async (m) => {
    const v = new FakeVipLink();
    await expect(v[m]('nope0', ['10.200.1.1'])).rejects.toMatchObject({ code: 'ENODEV' });
    expect(v.links.size).toBe(0);
  });

  it('an empty batch is no request: [] even on a missing link', async () => {
    const v = new FakeVipLink();
    expect(await v.addMany('nope0', [])).toEqual([]);
    expect(await v.removeMany('nope0', [])).toEqual([]);
  });

  it('a foreign link is still refused by ensure and list', async () => {
    const v = new FakeVipLink(new Map([['eth0', 'veth']]));
    expect(isForeignLink(await v.ensure('eth0').catch((e: unknown) => e))).toBe(true);
    expect(isForeignLink(await v.list('eth0').catch((e: unknown) => e))).toBe(true);
  });
});

describe('address requests', () => {
  it.each([
    ['add', '10.200.1.7', RTM_NEWADDR, 0x605, 2, 32, 0, 4],
    ['add', 'fd00:200::7', RTM_NEWADDR, 0x605, 10, 128, 0x02, 16],
    ['del', '10.200.1.7', RTM_DELADDR, 0x005, 2, 32, 0, 4],
    ['del', 'fd00:200::7', RTM_DELADDR, 0x005, 10, 128, 0, 16],
  ] as const)('%s %s: type, flags (request, ack, create|excl on add), ifaddrmsg, IFA_LOCAL = IFA_ADDRESS', (kind, ip, type, flags, family, prefix, ifaFlags, len) => {
    const a = parseHostAddress('t', ip);
    const [m, ...rest] = decodeMessages(encodeAddrRequest(kind, 7, a, 42, 99));
    expect(rest).toEqual([]);
    expect({ type: m!.type, flags: m!.flags, seq: m!.seq, port: m!.port }).toEqual({ type, flags, seq: 42, port: 99 });
    expect([...m!.payload.subarray(0, 4)]).toEqual([family, prefix, ifaFlags, 0]);
    expect(m!.payload.readUInt32LE(4)).toBe(7);
    const attrs = parseAttrs(m!.payload.subarray(8));
    expect(attrs.get(2)).toEqual(a.bytes);
    expect(attrs.get(1)).toEqual(a.bytes);
    expect(a.bytes.length).toBe(len);
  });

  it('refuses what is not an IP address', () => {
    expect(() => parseHostAddress('add-address x 10.1', '10.1')).toThrow(RtnlError);
  });
});

describe('RouteSocket', () => {
  it('pipelines more than a chunk of requests and matches every ACK to its request', async () => {
    // ifindex 0x7ffffff0 does not exist: the kernel refuses each add/delete (ENODEV as root, EPERM
    // otherwise) and nothing on the host changes.
    const s = new RouteSocket();
    try {
      const n = CHUNK * 2 + 5;
      const out = Array.from({ length: n }, (_, i) => {
        const seq = s.nextSeq();
        return { seq, bytes: encodeAddrRequest(i % 2 ? 'add' : 'del', 0x7ffffff0, parseHostAddress('t', `192.0.2.${i % 250}`), seq, s.port) };
      });
      const errnos = await s.exchange(out);
      expect(errnos).toHaveLength(n);
      expect(new Set(errnos).size).toBe(1);
      expect([Errno.ENODEV, Errno.EPERM]).toContain(errnos[0]);
    } finally {
      s.close();
    }
    await expect(s.exchange([{ seq: 1, bytes: Buffer.alloc(0) }])).rejects.toThrow('socket closed');
  });
});
