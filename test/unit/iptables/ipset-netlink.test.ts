// The ipset netlink codec (src/iptables/ipset-netlink.ts) on messages laid out as ip_set_core.c
// and the hash/bitmap types of Linux 6.1 send them; the kernel's own answers against `ipset save`:
// test/kernel/ipset-sync.test.ts.
import { describe, expect, it } from '@jest/globals';
import { decodeMessages, type NlMessage } from '../../../src/netlink/framing.js';
import {
  IPSET_ADD, IPSET_DEL, IPSET_LIST, IpsetError, decodeCounts, decodeNames, decodeSet, encodeList, encodeMember,
} from '../../../src/iptables/ipset-netlink.js';
import type { SavedSets } from '../../../src/iptables/ipset-save.js';

const NESTED = 0x8000;
const NET = 0x4000;
/** One attribute, padded. */
function at(type: number, payload: Buffer | number[]): Buffer {
  const p = Buffer.from(payload);
  const b = Buffer.alloc((4 + p.length + 3) & ~3);
  b.writeUInt16LE(4 + p.length, 0);
  b.writeUInt16LE(type, 2);
  p.copy(b, 4);
  return b;
}
const str = (s: string) => Buffer.from(`${s}\0`);
const be = (v: number, n: 2 | 4) => { const b = Buffer.alloc(n); if (n === 2) b.writeUInt16BE(v); else b.writeUInt32BE(v); return b; };
const ip4 = (type: number, a: string) => at(type | NESTED, at(1 | NET, a.split('.').map(Number)));
const ip6 = (type: number, bytes: number[]) => at(type | NESTED, at(2 | NET, bytes));
const port = (p: number) => at(4 | NET, be(p, 2));
const proto = (p: number) => at(7, [p]);
const elem = (...attrs: Buffer[]) => at(7 | NESTED, Buffer.concat(attrs));
/** A list answer: nfgenmsg, protocol, name, then `attrs`. */
function answer(name: string, ...attrs: Buffer[]): NlMessage {
  return { type: IPSET_LIST, flags: 2, seq: 1, port: 0, payload: Buffer.concat([Buffer.from([2, 0, 0, 0]), at(1, [6]), at(2, str(name)), ...attrs]) };
}
/** A set's first answer: type, family, revision, header. */
const first = (name: string, type: string, family: number, header: Buffer[], ...rest: Buffer[]) =>
  answer(name, at(3, str(type)), at(5, [family]), at(4, [0]), at(7 | NESTED, Buffer.concat(header)), ...rest);
const hashHeader = (maxelem: number) => [at(18 | NET, be(1024, 4)), at(19 | NET, be(maxelem, 4)), at(25 | NET, be(1, 4)),
  at(26 | NET, be(400, 4)), at(24 | NET, be(2, 4))];
const adt = (...elems: Buffer[]) => at(8 | NESTED, Buffer.concat(elems));
const decode = (...ms: NlMessage[]): SavedSets => { const out: SavedSets = { sets: new Map(), garbage: [] }; decodeSet(ms, out); return out; };
const V6 = [0xfd, 0, 2, 0, 0, 7, ...Array<number>(9).fill(0), 0x0a];

describe('ipset list requests', () => {
  it('one set: LIST|subsys 6, request|dump, nfgenmsg AF_INET, protocol 6, the name NUL-terminated', () => {
    const [m, ...rest] = decodeMessages(encodeList(42, 99, { set: 'IPVSOP-VIPS' }));
    expect(rest).toEqual([]);
    expect({ type: m!.type, flags: m!.flags, seq: m!.seq, port: m!.port }).toEqual({ type: 0x0607, flags: 0x301, seq: 42, port: 99 });
    expect([...m!.payload.subarray(0, 4)]).toEqual([2, 0, 0, 0]);
    expect(m!.payload.subarray(4)).toEqual(Buffer.concat([at(1, [6]), at(2, str('IPVSOP-VIPS'))]));
  });

  it('every name: no set name, IPSET_FLAG_LIST_SETNAME in network order', () => {
    const [m] = decodeMessages(encodeList(1, 2, 'names'));
    expect(m!.payload.subarray(4)).toEqual(Buffer.concat([at(1, [6]), at(6 | NET, be(2, 4))]));
  });

  it('every header: no set name, IPSET_FLAG_LIST_HEADER', () => {
    const [m] = decodeMessages(encodeList(1, 2, 'headers'));
    expect(m!.payload.subarray(4)).toEqual(Buffer.concat([at(1, [6]), at(6 | NET, be(4, 4))]));
  });
});

describe('ipset list answers', () => {
  it('names in the order the kernel sent them', () => {
    expect(decodeNames([answer('KUBE-CLUSTER-IP'), answer('IPVSOP-VIPS')])).toEqual(['KUBE-CLUSTER-IP', 'IPVSOP-VIPS']);
  });

  it('members per set from the headers: ELEMENTS, sets without it left out', () => {
    const counts = decodeCounts([first('A', 'hash:ip', 2, hashHeader(65536)), first('B', 'bitmap:port', 0, [at(24 | NET, be(7, 4))]),
      first('C', 'hash:ip', 2, [at(19 | NET, be(9, 4))])]);
    expect([...counts]).toEqual([['A', 2], ['B', 7]]);
  });

  it('each of our types, members as ipset save prints them, continued over messages', () => {
    const out = decode(
      first('S-IP', 'hash:ip', 2, hashHeader(65536), adt(elem(ip4(1, '10.0.0.1')), elem(ip4(1, '10.0.0.2')))),
      answer('S-IP', adt(elem(ip4(1, '10.0.0.3')))),
      first('S-IPPORT', 'hash:ip,port', 10, hashHeader(70000), adt(elem(ip6(1, V6), port(80), proto(132)))),
      first('S-IPPORTIP', 'hash:ip,port,ip', 2, hashHeader(65536),
        adt(elem(ip4(1, '10.10.7.2'), ip4(20, '10.10.7.2'), port(8080), proto(6)))),
      first('S-NET', 'hash:ip,port,net', 2, hashHeader(65536), adt(
        elem(ip4(1, '10.200.7.100'), ip4(20, '198.51.100.0'), at(21, [24]), port(80), proto(6)),
        elem(ip4(1, '10.200.7.100'), ip4(20, '198.51.100.9'), at(21, [32]), port(80), proto(17)))),
      first('S-NP', 'bitmap:port', 0, [at(4 | NET, be(0, 2)), at(5 | NET, be(65535, 2)), at(25 | NET, be(1, 4))],
        adt(elem(port(30070)), elem(port(30071)))),
    );
    const view = [...out.sets.values()].map((s) => ({ ...s, members: [...s.members] }));
    expect(view).toEqual([
      { name: 'S-IP', type: 'hash:ip', family: 'inet', maxelem: 65536, options: [], members: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] },
      { name: 'S-IPPORT', type: 'hash:ip,port', family: 'inet6', maxelem: 70000, options: [], members: ['fd00:200:7::a,sctp:80'] },
      { name: 'S-IPPORTIP', type: 'hash:ip,port,ip', family: 'inet', maxelem: 65536, options: [], members: ['10.10.7.2,tcp:8080,10.10.7.2'] },
      { name: 'S-NET', type: 'hash:ip,port,net', family: 'inet', maxelem: 65536, options: [],
        members: ['10.200.7.100,tcp:80,198.51.100.0/24', '10.200.7.100,udp:80,198.51.100.9'] },
      { name: 'S-NP', type: 'bitmap:port', range: '0-65535', options: [], members: ['30070', '30071'] },
    ]);
  });

  it('a header option (timeout, counters) is kept as an option; an unknown family as its number', () => {
    const out = decode(first('T', 'hash:ip', 2, [...hashHeader(65536), at(6 | NET, be(300, 4)), at(8 | NET, be(8, 4))]),
      first('F', 'hash:ip', 7, hashHeader(65536)));
    expect(out.sets.get('T')!.options).toEqual(['attribute-6', 'attribute-8']);
    expect(out.sets.get('F')!.family).toBe('7');
  });

  it('marks the set odd for a member extension, a nomatch member, another protocol or a type not ours', () => {
    const odd = (type: string, e: Buffer) => decode(first('X', type, 2, hashHeader(65536), adt(e))).sets.get('X')!;
    const timeout = odd('hash:ip', elem(ip4(1, '10.0.0.1'), at(6 | NET, be(30, 4))));
    expect(timeout.odd).toMatch(/extensions \(attribute 6\)/);
    expect(timeout.members.size).toBe(0);
    expect(odd('hash:ip,port,net', elem(ip4(1, '10.0.0.1'), ip4(20, '10.1.0.0'), at(21, [16]), port(1), proto(6),
      at(8 | NET, be(4, 4)))).odd).toMatch(/nomatch/);
    expect(odd('hash:ip,port', elem(ip4(1, '10.0.0.1'), port(2048), proto(1))).odd).toMatch(/not understood/);
    expect(odd('hash:net', elem(ip4(1, '10.0.0.0'))).odd).toMatch(/not understood in a hash:net set/);
  });

  it('refuses torn or headless answers with IpsetError, and skips other message types', () => {
    const torn = first('X', 'hash:ip', 2, hashHeader(65536), adt(elem(ip4(1, '10.0.0.1'))));
    torn.payload.writeUInt16LE(0xfff0, torn.payload.length - 16);
    expect(() => decode(torn)).toThrow(IpsetError);
    expect(() => decode(answer('Y', adt(elem(ip4(1, '10.0.0.1')))))).toThrow(/members before its header/);
    expect(() => decode({ ...answer('Z'), payload: Buffer.from([2, 0]) })).toThrow(/shorter than an nfgenmsg/);
    expect(() => decodeNames([{ ...answer('Z'), payload: Buffer.concat([Buffer.from([2, 0, 0, 0]), at(1, [6])]) }])).toThrow(/without a set name/);
    expect(decode({ ...answer('W'), type: 3 }).sets.size).toBe(0);
  });
});

describe('ipset member adds and deletes (the SYN hold)', () => {
  const body = (b: Buffer) => ({ type: b.readUInt16LE(4), flags: b.readUInt16LE(6), seq: b.readUInt32LE(8), payload: b.subarray(16) });
  it('an IPv4 hash:ip,port member: protocol, set name, and the element nested as ip_set_get_ipaddr4 wants it', () => {
    const b = encodeMember(IPSET_ADD, 9, 77, 'IPVSOP-HOLD', { family: 'IPv4', address: '10.200.1.10', protocol: 'tcp', port: 80 });
    expect(b.readUInt32LE(0)).toBe(b.length);
    expect(body(b)).toEqual({
      type: (6 << 8) | 9, flags: 0x1 | 0x4, seq: 9,
      payload: Buffer.concat([Buffer.from([2, 0, 0, 0]), at(1, [6]), at(2, str('IPVSOP-HOLD')),
        elem(ip4(1, '10.200.1.10'), port(80), proto(6))]),
    });
  });
  it('an IPv6 member as a delete, no NLM_F_EXCL (absent is no error, as -exist)', () => {
    const b = encodeMember(IPSET_DEL, 3, 0, 'IPVSOP6-HOLD', { family: 'IPv6', address: 'fd00:200:7::a', protocol: 'tcp', port: 443 });
    expect(body(b)).toEqual({
      type: (6 << 8) | 10, flags: 0x1 | 0x4, seq: 3,
      payload: Buffer.concat([Buffer.from([2, 0, 0, 0]), at(1, [6]), at(2, str('IPVSOP6-HOLD')),
        elem(ip6(1, [0xfd, 0, 2, 0, 0, 7, ...Array<number>(9).fill(0), 0x0a]), port(443), proto(6))]),
    });
  });
  it('refuses what is no member before anything is sent', () => {
    for (const m of [
      { family: 'IPv4' as const, address: 'fd00::1', protocol: 'tcp' as const, port: 80 },
      { family: 'IPv4' as const, address: '10.0.0.1', protocol: 'tcp' as const, port: 70000 },
      { family: 'IPv4' as const, address: '10.0.0.1', protocol: 'icmp' as 'tcp', port: 80 },
    ]) expect(() => encodeMember(IPSET_ADD, 1, 0, 'S', m)).toThrow(IpsetError);
  });
});
