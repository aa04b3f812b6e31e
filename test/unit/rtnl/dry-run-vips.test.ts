// The dry run's stand-in VIP link (src/sync/dry-run.ts) keeps what it is asked (the plan printed
// it) and fails as the real one does: a VIP link
// error is an RtnlError, never an IPVS one, so callers that tell the two apart see what a node would.
import { describe, expect, it } from '@jest/globals';
import { DryRunVipLink } from '../../../src/sync/dry-run.js';
import { RtnlError } from '../../../src/rtnl/errors.js';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { Errno, isExists, isNotFound } from '../../../src/netlink/errors.js';

describe('the dry run\'s VIP link', () => {
  it('keeps what it would do and answers EEXIST and EADDRNOTAVAIL as RtnlErrors', async () => {
    const link = new DryRunVipLink(undefined);
    await link.add('kube-ipvs0', '10.96.0.1');
    const again = await link.add('kube-ipvs0', '10.96.0.1').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(RtnlError);
    expect(again).not.toBeInstanceOf(IpvsError);
    expect(isExists(again)).toBe(true);
    const gone = await link.remove('kube-ipvs0', '10.96.0.2').catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(RtnlError);
    expect((gone as RtnlError).errno).toBe(Errno.EADDRNOTAVAIL);
    expect(isNotFound(gone)).toBe(false);
    expect(await link.addMany('kube-ipvs0', ['10.96.0.1', '10.96.0.3'])).toEqual([expect.any(RtnlError), undefined]);
    expect((await link.list('kube-ipvs0')).sort()).toEqual(['10.96.0.1', '10.96.0.3']);
    expect(await link.removeMany('kube-ipvs0', ['10.96.0.1', '10.96.0.4'])).toEqual([undefined, expect.any(RtnlError)]);
    expect(await link.list('kube-ipvs0')).toEqual(['10.96.0.3']);
  });
});
