// rtnetlink helpers against the real kernel, with iproute2 (`ip -j`) as the oracle.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { isExists } from '../../src/ipvs/errors.js';
import { Rtnl } from '../../src/rtnl/links.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const DEV = 'ipvs-test0';
let rtnl: Rtnl;

/** Addresses of DEV as iproute2 reports them. */
function ipAddrs(): string[] {
  const [link] = JSON.parse(execFileSync('ip', ['-j', 'addr', 'show', 'dev', DEV], { encoding: 'utf8' })) as
    Array<{ addr_info: Array<{ local: string; prefixlen: number }> }>;
  return link!.addr_info.map((a) => `${a.local}/${a.prefixlen}`).sort();
}

beforeAll(() => {
  rtnl = Rtnl.open();
});
afterAll(async () => {
  await rtnl.deleteLink(DEV);
  rtnl.close();
});

describe('dummy interface holding VIPs', () => {
  it('creates the dummy once, brings it up, adds and removes /32 and /128 addresses', async () => {
    const index = await rtnl.ensureDummy(DEV);
    expect(await rtnl.ensureDummy(DEV)).toBe(index);
    expect(execFileSync('ip', ['-d', 'link', 'show', DEV], { encoding: 'utf8' })).toContain('dummy');

    await rtnl.setUp(DEV);
    expect(await rtnl.isUp(DEV)).toBe(true);

    await rtnl.addAddress(DEV, '10.200.1.10');
    await rtnl.addAddress(DEV, 'fd00:200::10');
    expect(isExists(await rtnl.addAddress(DEV, '10.200.1.10').catch((e: unknown) => e))).toBe(true);
    // An up link also gets the kernel's own IPv6 link-local address (fe80::/64); both readers see it.
    const all = (await rtnl.listAddresses(DEV)).map((a) => `${a.address}/${a.prefixLength}`).sort();
    expect(all.filter((a) => a.startsWith('fe80:'))).toHaveLength(1);
    const ours = all.filter((a) => !a.startsWith('fe80:'));
    expect(ours).toEqual(['10.200.1.10/32', 'fd00:200::10/128']);
    // iproute2 may also list the IPv6 link-local address of the up link: compare ours with its globals.
    expect(ipAddrs().filter((a) => !a.startsWith('fe80:'))).toEqual(ours);

    await rtnl.deleteAddress(DEV, '10.200.1.10');
    expect(ipAddrs().filter((a) => !a.startsWith('fe80:'))).toEqual(['fd00:200::10/128']);

    expect(await rtnl.deleteLink(DEV)).toBe(true);
    expect(await rtnl.linkIndex(DEV)).toBeUndefined();
    expect(await rtnl.deleteLink(DEV)).toBe(false);
  });
});
