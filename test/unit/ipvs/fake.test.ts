import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { isExists, isInvalidArgument } from '../../../src/netlink/errors.js';
import { SvcFlag, makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';

// Address ranges: 10.200.1.0/24 and fd00:200::/64 are Service VIPs, 10.10.0.0/16 and fd00:10::/64
// are pods.
const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000 });
const vs6 = makeVirtualServer({ family: 'IPv6', protocol: 'UDP', address: 'fd00:200::a', port: 53 });
const rs = makeRealServer({ address: '10.10.1.3', port: 80 });

const seeded = `
add-service TCP 10.200.1.63:9000 rr
add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq
`;

describe('FakeIpvs kernel semantics', () => {
  // Refusals (exists / not found / invalid per op kind) are the contract table, run against the
  // kernel too: test/support/ipvs-contract.ts, test/unit/ipvs/ipvs-contract.test.ts.

  it('applies a batch, one result per op, continuing after a failure', async () => {
    const fake = new FakeIpvs();
    const results = await fake.apply([
      { kind: 'add-service', vs },
      { kind: 'add-service', vs },
      { kind: 'add-dest', vs, rs },
      { kind: 'update-service', vs: { ...vs, scheduler: 'sh', flags: SvcFlag.SCHED1 } },
    ]);
    expect(results.map((r) => r?.code)).toEqual([undefined, 'EEXIST', undefined, undefined]);
    expect(fake.dump()).toBe('add-service TCP 10.200.1.63:9000 sh flag-1\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq');
  });

  it('rejects single-op calls with the typed error and keeps counters on SET_DEST', async () => {
    const fake = new FakeIpvs().seed(`${seeded}`);
    expect(isExists(await fake.addVirtualServer(vs).then(() => undefined, (e: unknown) => e))).toBe(true);
    fake.setConnections(vs, rs, 3, 2);
    await fake.updateRealServer(vs, { ...rs, weight: 5 });
    const [dest] = await fake.listRealServers(vs);
    expect(dest).toMatchObject({ weight: 5, activeConns: 3, inactiveConns: 2 });
    await expect(fake.listRealServers(vs6)).resolves.toEqual([]); // a dump cannot tell a missing service
  });

  it('reports HASHED on read like the kernel, and ignores it on write', async () => {
    const fake = new FakeIpvs();
    await fake.addVirtualServer({ ...vs, flags: SvcFlag.HASHED });
    const [got] = await fake.listVirtualServers();
    expect(got!.flags).toBe(SvcFlag.HASHED);
    expect(fake.dump()).toBe('add-service TCP 10.200.1.63:9000 rr');
  });

  it('round-trips dump -> seed, with IPv6, persistence, tunnels and counters', () => {
    const text = [
      'add-service FWM 17 IPv4 wrr persistent=300/24',
      'add-service TCP 10.200.1.63:9000 sh persistent=10800/32 flag-1 flag-2',
      'add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=0 masq conns=4/1',
      'add-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=3 tunnel tun=gue tun-port=6080 tun-flags=0x1',
      'add-service UDP [fd00:200::a]:53 lc persistent=60/64',
      'add-dest UDP [fd00:200::a]:53 -> [fd00:10::3]:5353 w=1 masq x=10 y=2',
    ].join('\n');
    const fake = new FakeIpvs().seed(text);
    expect(fake.dump()).toBe(text);
    expect(new FakeIpvs().seed(fake.dump()).dump()).toBe(text);
  });

  it.each(['add-service TCP 10.200.1.63 rr', 'add-dest TCP 10.200.1.63:9000 10.10.1.3:80', 'frobnicate',
    'add-service TCP 10.200.1.63:9000 rr bogus'])('refuses a malformed seed line: %s', (line) => {
    let caught: unknown;
    try { new FakeIpvs().seed(line); } catch (e) { caught = e; }
    expect(isInvalidArgument(caught)).toBe(true);
  });

  it('rejects every call after close', async () => {
    const fake = new FakeIpvs();
    fake.close();
    await expect(fake.info()).rejects.toMatchObject({ code: 'EBADF' });
    await expect(fake.apply([])).rejects.toMatchObject({ code: 'EBADF' });
  });
});
