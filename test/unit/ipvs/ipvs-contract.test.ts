// The IPVS contract (test/support/ipvs-contract.ts) against FakeIpvs; the same table runs against
// the real kernel in test/kernel/ipvs-contract.test.ts.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { checkOp } from '../../../src/ipvs/validate.js';
import { coverageGaps } from '../../support/contract.js';
import { CONTRACT, REQUIRED, mismatch, runCase } from '../../support/ipvs-contract.js';

describe('IPVS contract: FakeIpvs', () => {
  it.each(CONTRACT.map((c) => [`${c.op.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    const fake = new FakeIpvs();
    const { setupErrors, error, before, after } = await runCase(fake, c);
    expect(setupErrors).toEqual([]);
    expect(mismatch(c, error)).toBeUndefined();
    expect(after).toBe(c.after ?? before);
    // Invalid ops are refused with exactly the error NetlinkIpvs gives (the shared checkOp).
    if ('invalid' in c.outcome) expect(error).toEqual(checkOp(c.op));
  });

  it('tries every op kind with every outcome it can have', () => {
    expect(coverageGaps(CONTRACT, REQUIRED, (c) => c.op.kind, (c) => c.category)).toEqual([]);
  });

});
