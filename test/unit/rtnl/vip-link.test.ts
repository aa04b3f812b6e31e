// FakeVipLink's batch semantics (the real link's: test/kernel/rtnl.test.ts, and the contract in
// test/support/vip-contract.ts), the address request encoding, and the route socket's pipelining
// against the host kernel on a link index that does not exist (every request is refused, nothing
// changes on the host), the address dump's encoding and decoding, and one dump of the host's
// loopback addresses read back against iproute2 (read-only).
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { Errno, isExists } from '../../../src/netlink/errors.js';
import { decodeMessages, parseAttrs } from '../../../src/netlink/framing.js';
import { RtnlError, isForeignLink } from '../../../src/rtnl/errors.js';
import { Rtnl } from '../../../src/rtnl/links.js';
import {
  RTM_DELADDR, RTM_GETADDR, RTM_NEWADDR, decodeAddrMessage, encodeAddrDump, encodeAddrRequest, parseHostAddress,
} from '../../../src/rtnl/messages.js';
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

describe('address dump', () => {
  /** An RTM_NEWADDR as the kernel sends one: ifaddrmsg, then the attributes given. */
  const newaddr = (family: number, prefix: number, index: number, attrs: Array<[number, number[]]>, type = RTM_NEWADDR) => {
    const body = Buffer.concat(attrs.map(([t, bytes]) => {
      const a = Buffer.alloc((4 + bytes.length + 3) & ~3);
      a.writeUInt16LE(4 + bytes.length, 0);
      a.writeUInt16LE(t, 2);
      Buffer.from(bytes).copy(a, 4);
      return a;
    }));
    const payload = Buffer.concat([Buffer.from([family, prefix, 0, 0, 0, 0, 0, 0]), body]);
    payload.writeUInt32LE(index, 4);
    return { type, flags: 2, seq: 1, port: 0, payload };
  };
  const v6 = [0xfd, 0, 2, 0, ...Array<number>(11).fill(0), 0x10];

  it('asks for every address of both families: RTM_GETADDR, request|dump, an ifaddrmsg of zeros', () => {
    const [m, ...rest] = decodeMessages(encodeAddrDump(42, 99));
    expect(rest).toEqual([]);
    expect({ type: m!.type, flags: m!.flags, seq: m!.seq, port: m!.port }).toEqual({ type: RTM_GETADDR, flags: 0x301, seq: 42, port: 99 });
    expect([...m!.payload]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('decodes IFA_LOCAL before IFA_ADDRESS (a peer), IFA_ADDRESS alone (IPv6), with link and prefix', () => {
    expect(decodeAddrMessage(newaddr(2, 32, 7, [[1, [10, 9, 9, 9]], [2, [10, 200, 1, 7]], [3, [108, 111, 0]]])))
      .toEqual({ index: 7, address: '10.200.1.7', prefixLength: 32 });
    expect(decodeAddrMessage(newaddr(10, 128, 0x7ffffff0, [[1, v6]]))).toEqual({ index: 0x7ffffff0, address: 'fd00:200::10', prefixLength: 128 });
  });

  it('skips other message types, other families and messages without an address', () => {
    expect(decodeAddrMessage(newaddr(2, 32, 7, [[2, [10, 0, 0, 1]]], RTM_DELADDR))).toBeUndefined();
    expect(decodeAddrMessage(newaddr(17, 0, 7, [[2, [1, 2, 3, 4]]]))).toBeUndefined();
    expect(decodeAddrMessage(newaddr(2, 32, 7, [[3, [108, 111, 0]]]))).toBeUndefined();
  });

  it('refuses garbage as RtnlError: a short ifaddrmsg, a torn attribute, an address of the wrong size', () => {
    const short = { ...newaddr(2, 32, 7, []), payload: Buffer.from([2, 32, 0, 0]) };
    const torn = newaddr(2, 32, 7, [[2, [10, 0, 0, 1]]]);
    torn.payload.writeUInt16LE(40, 8);
    for (const m of [short, torn, newaddr(2, 32, 7, [[2, v6]]), newaddr(10, 128, 7, [[1, [10, 0, 0, 1]]])]) {
      expect(() => decodeAddrMessage(m)).toThrow(RtnlError);
    }
    expect(() => decodeAddrMessage(short)).toThrow(/shorter than an ifaddrmsg/);
  });

  it("lists the host's loopback addresses as iproute2 does (one dump, read only)", async () => {
    const [lo] = JSON.parse(execFileSync('ip', ['-j', 'addr', 'show', 'dev', 'lo'], { encoding: 'utf8' })) as
      Array<{ addr_info: Array<{ local: string; prefixlen: number }> }>;
    const rtnl = Rtnl.open();
    try {
      const ours = await rtnl.listAddresses('lo');
      expect(ours.map((a) => `${a.address}/${a.prefixLength}`)).toEqual(lo!.addr_info.map((a) => `${a.local}/${a.prefixlen}`));
      expect(ours.length).toBeGreaterThan(0);
    } finally {
      rtnl.close();
    }
  });
});
