// NodeTuning (src/node/tuning.ts): the IPVS timeouts follow the configuration, and a refused set
// is a warning. Dry runs only: a real one writes /proc/sys, which the kernel suite checks.
import { describe, expect, it } from '@jest/globals';
import { defaultProxyConfig } from '../../../src/config/types.js';
import type { IpvsTimeouts } from '../../../src/model/ipvs.js';
import { NodeTuning } from '../../../src/node/tuning.js';
import { memoryLog } from '../../../src/util/log.js';

function tuning(fail = false) {
  const set: IpvsTimeouts[] = [];
  const log = memoryLog();
  const ipvs = { setTimeouts: async (t: IpvsTimeouts) => { if (fail) throw new Error('EPERM'); set.push(t); } };
  const node = new NodeTuning({ ipvs, kernelRelease: '6.1.0', stateDir: '/nonexistent', dryRun: true, strictArp: false, log });
  return { node, set, log };
}

describe('NodeTuning', () => {
  it('sets the timeouts a configuration names, and none when it names none', async () => {
    const { node, set } = tuning();
    await node.configure({ ...defaultProxyConfig, tcpTimeout: 900, tcpFinTimeout: 120, udpTimeout: 300 });
    await node.configure({ ...defaultProxyConfig, tcpTimeout: 0, tcpFinTimeout: 0, udpTimeout: 0 });
    expect(set).toEqual([{ tcp: 900, tcpFin: 120, udp: 300 }]);
  });

  it('turns a refused set into a warning', async () => {
    const { node, log } = tuning(true);
    await node.configure({ ...defaultProxyConfig, tcpTimeout: 900 });
    expect(log.entries).toEqual([{ level: 'warn', message: 'IPVS timeouts not set', fields: { error: 'EPERM' } }]);
  });

  it('writes nothing in a dry run when the source starts', async () => {
    const { node, log } = tuning();
    node.setSysctls();
    await node.configure({ ...defaultProxyConfig, strictARP: true });
    await node.sourceStart();
    expect(log.entries).toEqual([]);
  });
});
