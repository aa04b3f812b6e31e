// The iptables/ipset contract (test/support/iptables-contract.ts) against FakeHost; the same table
// runs against the real binaries in test/kernel/iptables-contract.test.ts.
import { describe, expect, it } from '@jest/globals';
import { FakeHost } from '../support/iptables-fake.js';
import { CONTRACT, type IptWorld, REQUIRED, runCase } from '../support/iptables-contract.js';

/** A fresh fake host; its dump in the form the VM's tools print (sets as `ipset save` lines). */
function fakeWorld(): IptWorld {
  const host = new FakeHost();
  const sets = () => [...host.sets].flatMap(([n, s]) => [`create ${n} ${s.type}`, ...[...s.members].map((m) => `add ${n} ${m}`)]).join('\n');
  return { run: host.run, dump: async () => `#v4\n${host.save('nft', 'v4')}#v6\n${host.save('nft', 'v6')}#ipset\n${sets()}\n` };
}

describe('iptables/ipset contract: FakeHost', () => {
  it.each(CONTRACT.map((c) => [`${c.call.tool}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    const { setupFailures, answer, stderr, before, after } = await runCase(fakeWorld(), c);
    expect(setupFailures).toEqual([]);
    expect({ answer, stderr: answer === c.answer ? '' : stderr }).toEqual({ answer: c.answer, stderr: '' });
    expect(after).toBe(c.after ?? before);
  });

  it('tries every tool with every outcome it can have', () => {
    for (const [tool, categories] of Object.entries(REQUIRED)) {
      const tried = new Set(CONTRACT.filter((c) => c.call.tool.replace('ip6', 'ip') === tool).map((c) => c.category));
      expect([tool, [...tried].sort()]).toEqual([tool, [...categories].sort()]);
    }
  });
});
