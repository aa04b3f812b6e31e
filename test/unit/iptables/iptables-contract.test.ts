// The iptables/ipset contract (test/support/iptables-contract.ts) against FakeHost; the same table
// runs against the real binaries in test/kernel/iptables-contract.test.ts.
import { describe, expect, it } from '@jest/globals';
import { FakeHost } from '../../support/iptables-fake.js';
import { coverageGaps, expectCase } from '../../support/contract.js';
import { CONTRACT, type IptWorld, REQUIRED, runCase } from '../../support/iptables-contract.js';

/** A fresh fake host; its dump in the form the VM's tools print (sets as `ipset save` lines), every section. */
function fakeWorld(): IptWorld {
  const host = new FakeHost();
  const sets = () => [...host.sets].flatMap(([n, s]) => [`create ${n} ${s.type}`, ...[...s.members].map((m) => `add ${n} ${m}`)]).join('\n');
  return { run: host.run, dump: async () => `#iptables\n${host.save('nft', 'v4')}#ip6tables\n${host.save('nft', 'v6')}#ipset\n${sets()}\n` };
}

describe('iptables/ipset contract: FakeHost', () => {
  it.each(CONTRACT.map((c) => [`${c.call.tool}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    const run = await runCase(fakeWorld(), c);
    // The fake's words next to a wrong answer, to see which of its checks fired.
    if (run.answer !== c.answer) expect(`${run.answer}: ${run.stderr}`).toBe(c.answer);
    expectCase(run, c);
  });

  it('tries every tool with every outcome it can have', () => {
    expect(coverageGaps(CONTRACT, REQUIRED, (c) => c.call.tool.replace('ip6', 'ip'), (c) => c.category)).toEqual([]);
  });
});
