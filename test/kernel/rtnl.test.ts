// rtnetlink helpers against the real kernel, with iproute2 (`ip -j`) as the oracle.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { isExists } from '../../src/netlink/errors.js';
import { RtnlError, isForeignLink } from '../../src/rtnl/errors.js';
import { Rtnl } from '../../src/rtnl/links.js';
import { RtnlVipLink } from '../../src/rtnl/vips.js';

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

describe('the VIP link refuses every link that is not a dummy', () => {
  const addrsOf = (dev: string) => execFileSync('ip', ['-o', 'addr', 'show', 'dev', dev], { encoding: 'utf8' });

  it('a veth and lo: ensure, list and deleteLink refuse them; their addresses and the links stay', async () => {
    execFileSync('ip', ['link', 'add', 'vipveth0', 'type', 'veth', 'peer', 'name', 'vipveth1']);
    execFileSync('ip', ['addr', 'add', '198.51.100.9/32', 'dev', 'vipveth0']);
    execFileSync('ip', ['link', 'set', 'lo', 'up']);
    const link = new RtnlVipLink();
    try {
      expect(await rtnl.linkKind('vipveth0')).toBe('veth');
      expect(await rtnl.linkKind('lo')).toBe('');
      expect(await rtnl.linkKind('no-such-link')).toBeUndefined();
      const before = { veth: addrsOf('vipveth0'), lo: addrsOf('lo') };
      for (const dev of ['vipveth0', 'lo']) {
        for (const call of [() => link.ensure(dev), () => link.list(dev), () => link.deleteLink(dev)]) {
          const e = await call().then(() => undefined, (err: unknown) => err);
          expect(e).toBeInstanceOf(RtnlError);
          expect(isForeignLink(e)).toBe(true);
          expect((e as Error).message).toContain(`link ${dev} exists and is`);
        }
      }
      expect({ veth: addrsOf('vipveth0'), lo: addrsOf('lo') }).toEqual(before);
      expect(addrsOf('vipveth0')).toContain('198.51.100.9/32');
      // A dummy of that name is fine, and so is a missing one.
      expect(await link.list('no-such-link')).toEqual([]);
      await link.ensure('vipdummy0');
      expect(await link.list('vipdummy0')).toEqual([]);
      expect(await link.deleteLink('vipdummy0')).toBe(true);
    } finally {
      link.close();
      execFileSync('ip', ['link', 'del', 'vipveth0']);
    }
  });

  it('`cleanup --interface` on a veth refuses it (exit 1) and leaves it and its address', () => {
    execFileSync('ip', ['link', 'add', 'vipveth2', 'type', 'veth', 'peer', 'name', 'vipveth3']);
    execFileSync('ip', ['addr', 'add', '198.51.100.10/32', 'dev', 'vipveth2']);
    try {
      let failed: { status: number; stderr: string } | undefined;
      try {
        execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup', '--interface', 'vipveth2', '--state-dir', '/run/ipvs-operator-rtnl-test'],
          { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (e) {
        failed = e as { status: number; stderr: string };
      }
      expect(failed?.status).toBe(1);
      expect(failed?.stderr).toContain('link vipveth2 exists and is a veth link, not a dummy');
      expect(addrsOf('vipveth2')).toContain('198.51.100.10/32');
    } finally {
      execFileSync('ip', ['link', 'del', 'vipveth2']);
    }
  });
});
