// The VIP link contract (test/support/vip-contract.ts) against FakeVipLink; the same table runs
// against RtnlVipLink on the real kernel in test/kernel/vip-contract.test.ts.
import { describe, expect, it } from '@jest/globals';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { coverageGaps, expectCase } from '../../support/contract.js';
import { CONTRACT, REQUIRED, VETH, type VipWorld, formatState, predicateMismatches, runCase } from '../../support/vip-contract.js';

/** A fresh fake holding what the VM holds: the veth (no addresses), no dummy. */
function fakeWorld(): VipWorld {
  const link = new FakeVipLink(new Map([[VETH, 'veth']]));
  return { link, state: async () => formatState(link.links) };
}

describe('VIP link contract: FakeVipLink', () => {
  it.each(CONTRACT.map((c) => [`${c.call.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    expectCase(await runCase(fakeWorld(), c), c, predicateMismatches);
  });

  it('tries every method with every outcome it can have', () => {
    expect(coverageGaps(CONTRACT, REQUIRED, (c) => c.call.kind, (c) => c.category)).toEqual([]);
  });
});
