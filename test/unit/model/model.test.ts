import { describe, expect, it } from '@jest/globals';
import {
  SvcFlag, formatOp, makeRealServer, makeVirtualServer, realServerEqual, sameServerKeys, virtualServerEqual,
  virtualServerKey,
} from '../../../src/model/ipvs.js';
import { canonicalIP, cidrContains, maskToPrefix, parseCidr, parseIp, prefixToMask } from '../../../src/model/addr.js';

// Address ranges used by the tests: 10.200.1.0/24 and fd00:200::/64 are Service VIPs,
// 10.10.0.0/16 and fd00:10::/64 are pods, 192.168.0.0/24 are node addresses.
const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000 });
const rs = makeRealServer({ address: '10.10.1.3', port: 80 });

describe('one-line forms', () => {
  it.each([
    [{ kind: 'add-service', vs }, 'add-service TCP 10.200.1.63:9000 rr'],
    [{ kind: 'add-dest', vs, rs }, 'add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq'],
    [{ kind: 'delete-dest', vs, rs }, 'delete-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80'],
    [{ kind: 'update-service', vs: { ...vs, scheduler: 'sh', flags: SvcFlag.PERSISTENT | SvcFlag.SCHED1, timeout: 10800 } },
      'update-service TCP 10.200.1.63:9000 sh persistent=10800/32 flag-1'],
    [{ kind: 'delete-service', vs: makeVirtualServer({ family: 'IPv6', fwmark: 17 }) }, 'delete-service FWM 17 IPv6'],
    [{ kind: 'add-dest', vs: makeVirtualServer({ family: 'IPv6', protocol: 'UDP', address: 'fd00:200::a', port: 53 }),
      rs: makeRealServer({ address: 'fd00:10::3', port: 5353, weight: 0 }) },
    'add-dest UDP [fd00:200::a]:53 -> [fd00:10::3]:5353 w=0 masq'],
  ] as const)('%#: %s', (op, text) => {
    expect(formatOp(op)).toBe(text);
  });
});

describe('equality', () => {
  it('ignores the kernel-set HASHED flag', () => {
    expect(virtualServerEqual(vs, { ...vs, flags: SvcFlag.HASHED })).toBe(true);
  });
  it('ignores persistence timeout on a non-persistent service but not on a persistent one', () => {
    expect(virtualServerEqual(vs, { ...vs, timeout: 300 })).toBe(true);
    const p = { ...vs, flags: SvcFlag.PERSISTENT, timeout: 10800 };
    expect(virtualServerEqual(p, { ...p, timeout: 300 })).toBe(false);
  });
  it('sees a weight change', () => {
    expect(realServerEqual(rs, { ...rs, weight: 2 })).toBe(false);
    expect(realServerEqual(rs, { ...rs, activeConns: 5 })).toBe(true);
  });
});

describe('sameServerKeys', () => {
  it('gives each object its virtualServerKey, made again whenever the object changes in the run', () => {
    const keyOf = sameServerKeys();
    const udp = { ...vs, protocol: 'UDP' as const };
    const fwm = makeVirtualServer({ family: 'IPv6', fwmark: 17 });
    for (const x of [vs, vs, udp, vs, fwm, fwm, { ...vs }, udp]) expect(keyOf(x)).toBe(virtualServerKey(x));
    expect(keyOf(udp)).toBe('UDP 10.200.1.63:9000');
  });
});

describe('makeRealServer', () => {
  it('fills the defaults and keeps every field given, read-back counters too', () => {
    expect(makeRealServer({ address: 'fd00::1', port: 80 })).toEqual({ address: 'fd00::1', port: 80, family: 'IPv6',
      weight: 1, forward: 'masq', upperThreshold: 0, lowerThreshold: 0, tunnelType: 'ipip', tunnelPort: 0, tunnelFlags: 0 });
    const given = { address: '10.0.0.1', port: 53, family: 'IPv6' as const, weight: 0, forward: 'tunnel' as const,
      upperThreshold: 9, lowerThreshold: 2, tunnelType: 'gue' as const, tunnelPort: 6080, tunnelFlags: 3,
      activeConns: 4, inactiveConns: 5, persistentConns: 6 };
    expect(makeRealServer(given)).toStrictEqual(given);
  });
});

describe('addresses and CIDRs (model/addr, the one IP module)', () => {
  it.each<[string, string | undefined]>([
    ['10.200.1.63', '10.200.1.63'],
    ['FD00:200:0:0:0:0:0:A', 'fd00:200::a'],
    ['::ffff:10.0.0.1', '::ffff:a00:1'],
    ['2001:db8:0:1:0:0:0:1', '2001:db8:0:1::1'],
    ['010.0.0.1', undefined],
    ['10.0.0.256', undefined],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['10.00.0.1', undefined],
    ['10.0.0', undefined],
    ['10.0.0.1.2', undefined],
    ['10..0.1', undefined],
    ['10.0.0.', undefined],
    ['.10.0.0', undefined],
    [' 10.0.0.1', undefined],
    ['10.0.0.1a', undefined],
    ['10.0.0.1000', undefined],
    ['1::2::3', undefined],
    ['', undefined],
  ])('canonicalIP(%s) = %s', (text, canonical) => {
    expect(canonicalIP(text)).toBe(canonical);
  });

  it.each<[string, string, boolean]>([
    ['10.200.0.0/16', '10.200.1.63', true],
    ['10.200.1.64/26', '10.200.1.63', false],
    ['0.0.0.0/0', '192.168.0.10', true],
    ['fd00:200::/64', 'fd00:200::a', true],
    ['fd00:200::/64', '10.200.1.63', false],
  ])('%s contains %s: %s', (cidr, ip, inside) => {
    expect(cidrContains(parseCidr(cidr)!, parseIp(ip)!)).toBe(inside);
  });

  it.each(['10.0.0.0/33', '10.0.0.0', '10.0.0.0/8/8', 'fd00::/129', 'x/8', '10.0.0.0/ 8'])('parseCidr refuses %s', (text) => {
    expect(parseCidr(text)).toBeUndefined();
  });

  it.each<[number, number]>([[0, 0], [1, 0x80000000], [24, 0xffffff00], [31, 0xfffffffe], [32, 0xffffffff]])(
    'prefix %d <-> mask %d', (prefix, mask) => {
      expect(prefixToMask(prefix)).toBe(mask);
      expect(maskToPrefix(mask)).toBe(prefix);
    });
});
