// The VIP link contract (test/support/vip-contract.ts) against RtnlVipLink on the real kernel; the
// same table runs against FakeVipLink in test/unit/rtnl/vip-contract.test.ts. Runs in the guest's root
// netns, which belongs to this test run alone: every case starts without the dummy and with the
// veth stripped of its addresses.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { Rtnl } from '../../src/rtnl/links.js';
import { RtnlVipLink } from '../../src/rtnl/vips.js';
import { expectCase } from '../support/contract.js';
import { CONTRACT, LINK, VETH, formatState, predicateMismatches, runCase } from '../support/vip-contract.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

let rtnl: Rtnl;
let link: RtnlVipLink;

/** The link's addresses as the kernel lists them, without the link-local /64 it makes itself. */
async function addressesOf(name: string): Promise<string[]> {
  return (await rtnl.listAddresses(name)).filter((a) => !(a.address.startsWith('fe80:') && a.prefixLength === 64)).map((a) => a.address);
}

/** The contract links' addresses (formatState). */
async function state(): Promise<string> {
  const links = new Map<string, string[]>();
  for (const name of [LINK, VETH]) {
    if ((await rtnl.linkIndex(name)) !== undefined) links.set(name, await addressesOf(name));
  }
  return formatState(links);
}

beforeAll(() => {
  // A veth stays down: no link-local address, no DAD; one process for the whole file.
  execFileSync('ip', ['link', 'add', VETH, 'type', 'veth', 'peer', 'name', 'vipc-veth1']);
  rtnl = Rtnl.open();
  link = new RtnlVipLink(rtnl);
});
beforeEach(async () => {
  await rtnl.deleteLink(LINK);
  const left = await addressesOf(VETH);
  if (left.length) expect((await rtnl.deleteAddresses(VETH, left)).filter((e) => e)).toEqual([]);
});
afterAll(async () => {
  await rtnl.deleteLink(LINK);
  await rtnl.deleteLink(VETH);
  rtnl.close();
});

describe('VIP link contract: RtnlVipLink on the kernel', () => {
  it.each(CONTRACT.map((c) => [`${c.call.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    expectCase(await runCase({ link, state }, c), c, predicateMismatches);
  });
});
