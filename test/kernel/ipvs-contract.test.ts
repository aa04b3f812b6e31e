// The IPVS contract (test/support/ipvs-contract.ts) against NetlinkIpvs on the real kernel; the same
// table runs against FakeIpvs in test/unit/ipvs/ipvs-contract.test.ts. Runs in the guest's root netns,
// which belongs to this test run alone: every case starts from an empty table (FLUSH).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { release } from 'node:os';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { checkOp } from '../../src/ipvs/validate.js';
import { makeVirtualServer } from '../../src/model/ipvs.js';
import { builtinPlugins, unavailableReason } from '../../plugins/index.js';
import { CONTRACT, ENOENT, OK, mismatch, runCase } from '../support/ipvs-contract.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

let ipvs: NetlinkIpvs;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  ipvs = await NetlinkIpvs.open();
});
beforeEach(async () => {
  await ipvs.flush();
});
afterAll(async () => {
  await ipvs.flush();
  ipvs.close();
});

describe('IPVS contract: NetlinkIpvs on the kernel', () => {
  it.each(CONTRACT.map((c) => [`${c.op.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    const { setupErrors, error, before, after } = await runCase(ipvs, c);
    expect(setupErrors).toEqual([]);
    expect(mismatch(c, error)).toBeUndefined();
    expect(after).toBe(c.after ?? before);
    if ('invalid' in c.outcome) expect(error).toEqual(checkOp(c.op));
  });

  it('a dest dump of a missing service is an empty list', async () => {
    await expect(ipvs.listRealServers(makeVirtualServer({ family: 'IPv4', address: '10.200.1.99', port: 1 }))).resolves.toEqual([]);
  });

  // The validation refuses this before the kernel sees it; ipvsadm (which does not check it) shows
  // the kernel refuses it too (ERANGE), so the validation is not stricter than the kernel. A real
  // server of another family without tunnelling is refused by ipvsadm itself, so it cannot show
  // the kernel's EINVAL that way.
  it.each<[string, string[]]>([
    ['lower threshold above the upper one', ['-x', '5', '-y', '10']],
  ])('the kernel refuses %s as well', (_name, args) => {
    execFileSync('ipvsadm', ['-A', '-t', '10.200.1.63:9000', '-s', 'rr']);
    let stderr = '';
    try {
      execFileSync('ipvsadm', ['-a', '-t', '10.200.1.63:9000', '-r', '10.10.1.3:80', '-m', ...args], { stdio: 'pipe' });
    } catch (e) {
      stderr = String((e as { stderr?: unknown }).stderr ?? e);
    }
    console.log(`ipvsadm on ${_name}: ${stderr.trim() || 'accepted'}`);
    expect(stderr).toMatch(/Numerical result out of range/);
    expect(execFileSync('ipvsadm', ['-Ln'], { encoding: 'utf8' })).not.toMatch(/10\.10\.1\.3/);
  });

  // twos came with Linux 6.2: the plugin's kernel gate (plugins/availability.ts) and the kernel's
  // own answer agree on the kernel this runs on (bookworm's 6.1: ENOENT; LAB_KERNEL_SUITE=trixie's
  // 6.12: added, and ipvsadm shows it).
  it(`has twos exactly when the plugin says kernel ${release()} can`, async () => {
    const twos = builtinPlugins.find((p) => p.name === 'twos')!;
    const can = unavailableReason(twos, { nodeName: 'n', kernelVersion: release() }) === undefined;
    const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.64', port: 9000, scheduler: 'twos' });
    const c = { name: 'twos', category: can ? 'ok' : 'not found', setup: [], op: { kind: 'add-service', vs },
      outcome: can ? OK : ENOENT, after: can ? 'add-service TCP 10.200.1.64:9000 twos' : '' } as const;
    const { setupErrors, error, after } = await runCase(ipvs, c);
    expect(setupErrors).toEqual([]);
    expect(mismatch(c, error)).toBeUndefined();
    expect(after).toBe(c.after);
    if (can) expect(execFileSync('ipvsadm', ['-Ln'], { encoding: 'utf8' })).toMatch(/TCP\s+10\.200\.1\.64:9000 twos/);
  });
});
