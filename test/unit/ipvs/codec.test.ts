// Codec: what we encode decodes back to the same value, for every command and object; decoding
// garbage or truncated bytes yields an IpvsError and never another exception.
// Address ranges: VIPs 10.200.1.0/24 and fd00:200::/64, pods 10.10.0.0/16 and fd00:10::/64.
import { describe, expect, it } from '@jest/globals';
import {
  type IpvsOp, type RealServer, type VirtualServer, SvcFlag, makeRealServer, makeVirtualServer,
} from '../../../src/model/ipvs.js';
import {
  decodeDest, decodeInfo, decodeService, decodeServiceMessage, decodeDestMessage, decodeStats, decodeTimeouts,
} from '../../../src/ipvs/decode.js';
import {
  encodeRequest, listDestsRequest, opMessage, opRequest, setTimeoutsRequest, zeroRequest,
} from '../../../src/ipvs/requests.js';
import {
  type NlMessage, decodeErrno, decodeFamily, decodeMessages, encodeGenlMessage, genlAttrs, nla, nlaNested, parseAttrs,
} from '../../../src/netlink/framing.js';
import { Cmd, CmdAttr, DestAttr, InfoAttr, StatsAttr, SvcAttr } from '../../../src/ipvs/constants.js';
import { NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST } from '../../../src/netlink/constants.js';
import { IpvsError } from '../../../src/ipvs/errors.js';

const services: Array<[string, VirtualServer]> = [
  ['tcp v4 rr', makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000 })],
  ['udp v4 wrr', makeVirtualServer({ family: 'IPv4', protocol: 'UDP', address: '10.200.1.10', port: 53, scheduler: 'wrr' })],
  ['sctp v4 lc', makeVirtualServer({ family: 'IPv4', protocol: 'SCTP', address: '10.200.1.11', port: 3868, scheduler: 'lc' })],
  ['tcp v6 sed', makeVirtualServer({ family: 'IPv6', address: 'fd00:200::63', port: 443, scheduler: 'sed' })],
  ['persistent v4 /24', makeVirtualServer({
    family: 'IPv4', address: '10.200.1.12', port: 80, flags: SvcFlag.PERSISTENT, timeout: 10800, netmask: 0xffffff00,
  })],
  ['persistent v6 /64 sh flags', makeVirtualServer({
    family: 'IPv6', address: 'fd00:200::1', port: 80, scheduler: 'sh',
    flags: SvcFlag.PERSISTENT | SvcFlag.SCHED1 | SvcFlag.SCHED2, timeout: 300, netmask: 64,
  })],
  ['fwmark v4 mh', makeVirtualServer({ family: 'IPv4', fwmark: 0x4001, scheduler: 'mh' })],
  ['fwmark v6', makeVirtualServer({ family: 'IPv6', fwmark: 7 })],
  ['ops + pe', makeVirtualServer({
    family: 'IPv4', protocol: 'UDP', address: '10.200.1.13', port: 5060, flags: SvcFlag.ONEPACKET | SvcFlag.PERSISTENT,
    timeout: 60, peName: 'sip',
  })],
];

const dests: Array<[string, VirtualServer, RealServer]> = [
  ['masq v4', services[0]![1], makeRealServer({ address: '10.10.1.3', port: 80, weight: 3 })],
  ['route v4 thresholds', services[0]![1], makeRealServer({
    address: '10.10.1.4', port: 80, forward: 'route', upperThreshold: 100, lowerThreshold: 10,
  })],
  ['local v6', services[3]![1], makeRealServer({ address: 'fd00:10::3', port: 8443, forward: 'local', weight: 0 })],
  ['gue tunnel v6 behind v4', services[0]![1], makeRealServer({
    address: 'fd00:10::4', port: 80, forward: 'tunnel', tunnelType: 'gue', tunnelPort: 6080, tunnelFlags: 1,
  })],
  ['max weight', services[1]![1], makeRealServer({ address: '10.10.2.1', port: 5353, weight: 0x7fffffff })],
];

/** A dump reply as the kernel sends it: NEW_* message, the object in its nested attribute. */
function asReply(cmd: number, attrs: Buffer[]): NlMessage {
  const [m] = decodeMessages(encodeGenlMessage(0x20, cmd, 1, 0x2, 7, 0, attrs));
  return m!;
}

/** The nested attribute of `type` inside a request's attributes. */
function nested(req: { attrs: Buffer[] }, type: number): Buffer {
  const a = parseAttrs(Buffer.concat(req.attrs));
  const v = a.get(type);
  if (!v) throw new Error(`no attribute ${type}`);
  return v;
}

const strip = <T extends object>(o: T): T => {
  const out = { ...o } as Record<string, unknown>;
  for (const k of ['activeConns', 'inactiveConns', 'persistentConns', 'stats']) delete out[k];
  return out as T;
};

describe('service round trip', () => {
  it.each(services)('%s: add/update carry every setting', (_name, vs) => {
    for (const kind of ['add-service', 'update-service'] as const) {
      const req = opRequest({ kind, vs });
      expect(req.cmd).toBe(kind === 'add-service' ? Cmd.NEW_SERVICE : Cmd.SET_SERVICE);
      const back = decodeService(nested(req, CmdAttr.SERVICE));
      expect(back).toEqual(vs);
      // and as the kernel would send it back in a dump
      expect(decodeServiceMessage(asReply(Cmd.NEW_SERVICE, req.attrs))).toEqual(vs);
    }
  });

  it.each(services)('%s: delete carries only the identity', (_name, vs) => {
    const req = opRequest({ kind: 'delete-service', vs });
    expect(req.cmd).toBe(Cmd.DEL_SERVICE);
    const a = parseAttrs(nested(req, CmdAttr.SERVICE));
    const expected = vs.fwmark ? [SvcAttr.AF, SvcAttr.FWMARK] : [SvcAttr.AF, SvcAttr.PROTOCOL, SvcAttr.ADDR, SvcAttr.PORT];
    expect([...a.keys()].sort((x, y) => x - y)).toEqual(expected);
  });

  it('sends flags with an all-ones mask and the address as a 16-byte union', () => {
    const a = parseAttrs(nested(opRequest({ kind: 'add-service', vs: services[4]![1] }), CmdAttr.SERVICE));
    expect(a.get(SvcAttr.FLAGS)!.toString('hex')).toBe('01000000ffffffff');
    expect(a.get(SvcAttr.ADDR)!.toString('hex')).toBe('0ac8010c000000000000000000000000');
    expect(a.get(SvcAttr.PORT)!.toString('hex')).toBe('0050');
    expect(a.get(SvcAttr.SCHED_NAME)!.toString('latin1')).toBe('rr\0');
  });
});

describe('destination round trip', () => {
  it.each(dests)('%s', (_name, vs, rs) => {
    const ops: IpvsOp[] = [{ kind: 'add-dest', vs, rs }, { kind: 'update-dest', vs, rs }, { kind: 'delete-dest', vs, rs }];
    for (const op of ops) {
      const req = opRequest(op);
      expect(decodeService(nested(req, CmdAttr.SERVICE))).toMatchObject({
        family: vs.family, address: vs.address, port: vs.port, fwmark: vs.fwmark,
      });
      const back = decodeDest(nested(req, CmdAttr.DEST), vs.family);
      if (op.kind === 'delete-dest') {
        expect({ address: back.address, port: back.port, family: back.family }).toEqual({ address: rs.address, port: rs.port, family: rs.family });
      } else {
        expect(strip(back)).toEqual(rs);
        expect(strip(decodeDestMessage(asReply(Cmd.NEW_DEST, [nla(CmdAttr.DEST, nested(req, CmdAttr.DEST))]), vs.family))).toEqual(rs);
      }
    }
  });

  it('takes the service family when the kernel sends no ADDR_FAMILY (kernels < 3.18)', () => {
    const attrs = nlaNested(CmdAttr.DEST, [
      nla(DestAttr.ADDR, Buffer.from('0a0a0103000000000000000000000000', 'hex')),
      nla(DestAttr.PORT, Buffer.from('0050', 'hex')),
    ]);
    const rs = decodeDest(parseAttrs(attrs).get(CmdAttr.DEST)!, 'IPv4');
    expect(rs).toMatchObject({ address: '10.10.1.3', port: 80, family: 'IPv4', weight: 0, forward: 'masq' });
  });
});

describe('other requests', () => {
  it('GET_DEST dump names its service and asks for a dump', () => {
    const req = listDestsRequest(services[0]![1]);
    const msg = decodeMessages(encodeRequest(0x20, req, 42, 1234))[0]!;
    expect(msg).toMatchObject({ type: 0x20, seq: 42, port: 1234, flags: NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP });
    expect(msg.payload[0]).toBe(Cmd.GET_DEST);
    expect(decodeService(parseAttrs(genlAttrs(msg)).get(CmdAttr.SERVICE)!)).toMatchObject({ address: '10.200.1.63', port: 9000 });
  });

  it('SET_CONFIG and GET_CONFIG carry the three timeouts', () => {
    const t = { tcp: 900, tcpFin: 120, udp: 300 };
    expect(decodeTimeouts(asReply(Cmd.GET_CONFIG, setTimeoutsRequest(t).attrs))).toEqual(t);
  });

  it('ZERO with and without a service', () => {
    expect(zeroRequest().attrs).toHaveLength(0);
    expect(decodeService(nested(zeroRequest(services[2]![1]), CmdAttr.SERVICE))).toMatchObject({ protocol: 'SCTP', port: 3868 });
  });

  it('decodes GET_INFO and the controller family reply', () => {
    const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
    expect(decodeInfo(asReply(Cmd.GET_INFO, [nla(InfoAttr.VERSION, u32(0x010201)), nla(InfoAttr.CONN_TAB_SIZE, u32(4096))])))
      .toEqual({ version: '1.2.1', versionCode: 0x010201, connTableSize: 4096 });
    expect(decodeFamily(asReply(1, [nla(1, Buffer.from([0x22, 0])), nla(3, u32(1))]))).toEqual({ id: 0x22, version: 1 });
  });

  it('decodes STATS (u32, u64 bytes) and STATS64 (all u64)', () => {
    const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
    const u64 = (v: bigint) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(v); return b; };
    const s32 = decodeStats(Buffer.concat([nla(StatsAttr.CONNS, u32(5)), nla(StatsAttr.INBYTES, u64(1n << 40n)), nla(StatsAttr.OUTPPS, u32(9))]), false);
    expect(s32).toMatchObject({ conns: 5n, inBytes: 1n << 40n, outPps: 9n, inPkts: 0n });
    const s64 = decodeStats(Buffer.concat([nla(StatsAttr.PAD, Buffer.alloc(0)), nla(StatsAttr.INPKTS, u64(1n << 33n))]), true);
    expect(s64.inPkts).toBe(1n << 33n);
  });

  it('reads errno from NLMSG_ERROR', () => {
    const b = Buffer.alloc(36);
    b.writeUInt32LE(36, 0); b.writeUInt16LE(2, 4); b.writeInt32LE(-17, 16);
    expect(decodeErrno(decodeMessages(b)[0]!)).toBe(17);
  });
});

describe('argument errors are IpvsErrors', () => {
  it('refuses an address of the wrong family', () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: 'fd00::1', port: 80 });
    expect(() => opRequest({ kind: 'add-service', vs })).toThrow(IpvsError);
  });
});

describe('garbage in, IpvsError out', () => {
  // A deterministic PRNG so failures reproduce.
  let state = 0x9e3779b9;
  const rand = () => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) / 0x100000000; };
  const decoders: Array<[string, (b: Buffer) => unknown]> = [
    ['messages', (b) => decodeMessages(b, IpvsError)],
    ['service message', (b) => decodeServiceMessage({ type: 0x20, flags: 0, seq: 0, port: 0, payload: b })],
    ['dest message', (b) => decodeDestMessage({ type: 0x20, flags: 0, seq: 0, port: 0, payload: b }, 'IPv6')],
    ['service attrs', (b) => decodeService(b)],
    ['dest attrs', (b) => decodeDest(b, 'IPv4')],
    ['info', (b) => decodeInfo({ type: 0x20, flags: 0, seq: 0, port: 0, payload: b })],
    ['stats64', (b) => decodeStats(b, true)],
  ];
  const onlyIpvsErrors = (fn: () => unknown) => {
    try { fn(); } catch (e) { if (!(e instanceof IpvsError)) throw e; }
  };

  it.each(decoders)('%s: 5000 random buffers', (_n, decode) => {
    for (let i = 0; i < 5000; i++) {
      const b = Buffer.alloc(Math.floor(rand() * 96));
      for (let j = 0; j < b.length; j++) b[j] = Math.floor(rand() * 256);
      // Bias some buffers towards plausible headers so the decoders get past the first check.
      if (b.length >= 8 && rand() < 0.5) { b.writeUInt16LE(Math.min(b.length, 4 + Math.floor(rand() * 24)), 0); b.writeUInt16LE(1 + Math.floor(rand() * 12), 2); }
      onlyIpvsErrors(() => decode(b));
    }
  });

  it('every truncation of a real service dump message is an IpvsError or a shorter valid value', () => {
    const full = encodeGenlMessage(0x20, Cmd.NEW_SERVICE, 1, 2, 1, 0, opRequest({ kind: 'add-service', vs: services[5]![1] }).attrs);
    for (let n = 0; n < full.length; n++) {
      const cut = Buffer.from(full.subarray(0, n));
      if (n >= 16) cut.writeUInt32LE(n, 0); // a header that claims exactly what is there
      onlyIpvsErrors(() => decodeMessages(cut, IpvsError).map((m) => decodeServiceMessage(m)));
    }
    expect(() => decodeMessages(full.subarray(0, 20), IpvsError)).toThrow(IpvsError);
  });
});

describe('opMessage: an op written in place into the datagram', () => {
  const ops: IpvsOp[] = [
    ...services.flatMap(([, vs]): IpvsOp[] => [
      { kind: 'add-service', vs }, { kind: 'update-service', vs }, { kind: 'delete-service', vs }]),
    ...dests.flatMap(([, vs, rs]): IpvsOp[] => [
      { kind: 'add-dest', vs, rs }, { kind: 'update-dest', vs, rs }, { kind: 'delete-dest', vs, rs }]),
  ];
  it.each(ops.map((op, i) => [i, op.kind, op] as const))('%i %s: the bytes of encodeRequest(opRequest(op))', (i, _, op) => {
    const want = encodeRequest(0x25, opRequest(op), 1000 + i, 4242);
    const m = opMessage(0x25, op, 1000 + i, 4242);
    expect(m.size).toBe(want.length);
    // Its zeroed place in a datagram of other bytes: written exactly there, the neighbours untouched.
    const buf = Buffer.alloc(want.length + 24, 0xaa).fill(0, 12, 12 + want.length);
    m.write(buf, 12);
    expect(buf.subarray(12, 12 + want.length).equals(want)).toBe(true);
    expect([...buf.subarray(0, 12), ...buf.subarray(12 + want.length)].every((b) => b === 0xaa)).toBe(true);
  });

  it('an address checkOp would refuse throws IpvsError when written, naming the op', () => {
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.300', port: 80 });
    const m = opMessage(0x25, { kind: 'add-service', vs }, 1, 1);
    expect(() => m.write(Buffer.alloc(m.size), 0)).toThrow(IpvsError);
    expect(() => m.write(Buffer.alloc(m.size), 0)).toThrow(/10\.200\.1\.300/);
  });
});
