// The conntrack contract (test/support/conntrack-contract.ts) against FakeConntrack; the same
// table runs against NetlinkConntrack on the real kernel in test/kernel/conntrack-contract.test.ts.
import { describe, expect, it } from '@jest/globals';
import { formatFlow } from '../../../src/conntrack/codec.js';
import { FakeConntrack } from '../../../src/conntrack/fake.js';
import { coverageGaps, expectCase } from '../../support/contract.js';
import { CONTRACT, type CtWorld, REQUIRED, predicateMismatches, runCase } from '../../support/conntrack-contract.js';

function fakeWorld(): CtWorld {
  const client = new FakeConntrack();
  return {
    client,
    insert: async (flows) => flows.map((f) => {
      try {
        client.seed(formatFlow(f));
        return '-';
      } catch (e) {
        return String(e);
      }
    }),
  };
}

describe('conntrack contract: FakeConntrack', () => {
  it.each(CONTRACT.map((c) => [`${c.call.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    expectCase(await runCase(fakeWorld(), c), c, predicateMismatches);
  });

  it('tries every call with every outcome it can have', () => {
    expect(coverageGaps(CONTRACT, REQUIRED, (c) => c.call.kind, (c) => c.category)).toEqual([]);
  });
});
