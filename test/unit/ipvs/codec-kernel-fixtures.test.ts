// Decoding replies captured from Linux 6.1 (test/fixtures/kernel-replies.json, made by
// test/fixtures/capture-kernel.ts in the lab VM from a table that ipvsadm created):
//   -A -t 10.200.1.63:9000 -s wrr -p 600 -M 255.255.255.0
//   -a -t 10.200.1.63:9000 -r 10.10.1.3:80 -m -w 3 -x 100 -y 10
//   -a -t 10.200.1.63:9000 -r 10.10.1.4:8080 -g -w 0
//   -A -u [fd00:200::a]:53 -s sh -b sh-fallback,sh-port -o
//   -a -u [fd00:200::a]:53 -r [fd00:10::3]:5353 -m -w 1
//   -A -f 16385 -s mh
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  decodeDestMessage, decodeInfo, decodeServiceMessage, decodeTimeouts,
} from '../../../src/ipvs/decode.js';
import type { NlMessage } from '../../../src/netlink/framing.js';
import { SvcFlag, formatRealServer, formatVirtualServer } from '../../../src/model/ipvs.js';

interface Captured { errno: number; messages: Array<{ type: number; flags: number; payload: string }> }
const fixtures = JSON.parse(readFileSync(fileURLToPath(new URL('../../../../test/fixtures/kernel-replies.json', import.meta.url)), 'utf8')) as
  Record<'services' | 'dests' | 'dests6' | 'info' | 'config' | 'duplicate', Captured> & { kernel: string };
const msgs = (c: Captured): NlMessage[] => c.messages.map((m) => ({ type: m.type, flags: m.flags, seq: 0, port: 0, payload: Buffer.from(m.payload, 'hex') }));

describe(`replies captured from kernel ${fixtures.kernel}`, () => {
  it('GET_SERVICE dump', () => {
    const services = msgs(fixtures.services).map((m) => decodeServiceMessage(m));
    expect(services.map(formatVirtualServer).sort()).toEqual([
      'FWM 16385 IPv4 mh',
      'TCP 10.200.1.63:9000 wrr persistent=600/24',
      'UDP [fd00:200::a]:53 sh ops flag-1 flag-2',
    ]);
    // The kernel sets HASHED on every service; the model keeps it but never compares it.
    expect(services.every((s) => s.flags & SvcFlag.HASHED)).toBe(true);
    expect(services.find((s) => s.port === 9000)!.netmask).toBe(0xffffff00);
    expect(services.every((s) => s.stats && s.stats.conns === 0n)).toBe(true);
  });

  it('GET_DEST dumps, IPv4 and IPv6', () => {
    expect(msgs(fixtures.dests).map((m) => formatRealServer(decodeDestMessage(m, 'IPv4'))).sort()).toEqual([
      '10.10.1.3:80 w=3 masq x=100 y=10',
      // ipvsadm replaces the real server port with the virtual port for non-NAT forwarding
      // (direct routing cannot change ports), so `-r 10.10.1.4:8080 -g` is stored as :9000.
      '10.10.1.4:9000 w=0 route',
    ]);
    const [d6] = msgs(fixtures.dests6).map((m) => decodeDestMessage(m, 'IPv6'));
    expect(d6).toMatchObject({ address: 'fd00:10::3', port: 5353, family: 'IPv6', weight: 1, activeConns: 0, inactiveConns: 0 });
  });

  it('without the counters (ReadOptions.stats false): the same entries, no stats field', () => {
    for (const m of msgs(fixtures.services)) {
      const { stats, ...rest } = decodeServiceMessage(m);
      expect(stats).toBeDefined();
      expect(decodeServiceMessage(m, false)).toStrictEqual(rest);
    }
    for (const [c, family] of [[fixtures.dests, 'IPv4'], [fixtures.dests6, 'IPv6']] as const) {
      for (const m of msgs(c)) {
        const { stats, ...rest } = decodeDestMessage(m, family);
        expect(stats).toBeDefined();
        expect(decodeDestMessage(m, family, false)).toStrictEqual(rest);
      }
    }
  });

  it('GET_INFO and GET_CONFIG', () => {
    expect(decodeInfo(msgs(fixtures.info)[0]!)).toEqual({ version: '1.2.1', versionCode: 0x010201, connTableSize: 4096 });
    expect(decodeTimeouts(msgs(fixtures.config)[0]!)).toEqual({ tcp: 900, tcpFin: 120, udp: 300 });
  });

  it('a duplicate NEW_SERVICE is answered with EEXIST', () => {
    expect(fixtures.duplicate.errno).toBe(17);
  });
});
