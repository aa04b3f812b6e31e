// The SYN hold around a scheduler swap (src/iptables/syn-hold.ts): the order of add, swap and
// delete, and what happens when a step fails. The kernel's side (a SYN dropped while held, none
// refused): test/kernel/operator.test.ts.
import { describe, expect, it } from '@jest/globals';
import { type SetMembers, holdDuring, toolSetMembers } from '../../../src/iptables/syn-hold.js';
import type { IpPortMember } from '../../../src/iptables/ipset-netlink.js';

const M: IpPortMember = { family: 'IPv4', address: '10.200.1.10', protocol: 'tcp', port: 80 };
const setOf = (m: IpPortMember) => (m.family === 'IPv4' ? 'IPVSOP-HOLD' : 'IPVSOP6-HOLD');

/** A writer that records each call and fails the ones named in `fail` (by call number). */
function writer(order: string[], fail: Record<number, string> = {}): SetMembers {
  let n = 0;
  const call = async (verb: string, set: (m: IpPortMember) => string, ms: readonly IpPortMember[]) => {
    order.push(`${verb} ${ms.map((m) => `${set(m)} ${m.address},${m.protocol}:${m.port}`).join(' ')}`);
    const why = fail[n++];
    if (why) throw new Error(why);
  };
  return { add: (s, ms) => call('add', s, ms), del: (s, ms) => call('del', s, ms) };
}

describe('holdDuring', () => {
  it('adds the members, runs the swap, deletes them, and resolves with the swap\'s value', async () => {
    const order: string[] = [];
    const r = await holdDuring(writer(order), setOf, [M], async () => { order.push('swap'); return 7; });
    expect({ r, order }).toEqual({ r: { value: 7 }, order: ['add IPVSOP-HOLD 10.200.1.10,tcp:80', 'swap', 'del IPVSOP-HOLD 10.200.1.10,tcp:80'] });
  });
  it('a hold that cannot be set: the swap still runs, the error comes with its value, and a failed cleanup is no error', async () => {
    const order: string[] = [];
    const r = await holdDuring(writer(order, { 0: 'ENOENT', 1: 'ENOENT' }), setOf, [M], async () => { order.push('swap'); return 1; });
    expect({ value: r.value, error: String(r.error), order: order.map((o) => o.split(' ')[0]) })
      .toEqual({ value: 1, error: 'Error: ENOENT', order: ['add', 'swap', 'del'] });
  });
  it('a release that fails is tried once more; failing twice rejects', async () => {
    const once: string[] = [];
    await expect(holdDuring(writer(once, { 1: 'ENOBUFS' }), setOf, [M], async () => 0)).resolves.toEqual({ value: 0 });
    expect(once.map((o) => o.split(' ')[0])).toEqual(['add', 'del', 'del']);
    await expect(holdDuring(writer([], { 1: 'ENOBUFS', 2: 'ENOBUFS' }), setOf, [M], async () => 0)).rejects.toThrow('ENOBUFS');
  });
  it('a swap that rejects still releases the hold, and its error is what rejects', async () => {
    const order: string[] = [];
    await expect(holdDuring(writer(order), setOf, [M], async () => { throw new Error('socket closed'); })).rejects.toThrow('socket closed');
    expect(order.map((o) => o.split(' ')[0])).toEqual(['add', 'del']);
  });
});

describe('toolSetMembers', () => {
  it('one `ipset restore -exist` per step, a line per member', async () => {
    const calls: string[] = [];
    const w = toolSetMembers(async (cmd, args, input) => { calls.push(`${cmd} ${args.join(' ')}\n${input ?? ''}`); return { code: 0, stdout: '', stderr: '' }; });
    await w.add(setOf, [M, { family: 'IPv6', address: 'fd00::10', protocol: 'tcp', port: 443 }]);
    await w.del(setOf, []);
    expect(calls).toEqual(['ipset restore -exist\nadd IPVSOP-HOLD 10.200.1.10,tcp:80\nadd IPVSOP6-HOLD fd00::10,tcp:443\n']);
  });
});
