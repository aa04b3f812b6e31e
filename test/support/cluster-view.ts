// A Service in the cluster load view and one node's IPVS as its reporter reads it, for the tests of
// src/kube/cluster-view.ts: backends .1 and .2 answer in 50 ms, .3 in 500 ms, each node opening 20
// new connections a second to each, so Little's law gives the slow one a tenth of the fast ones' weight.
import { viewKeyOf } from '../../src/balance/cluster-view.js';
import type { DesiredTable, DesiredVirtualServer } from '../../src/desired/types.js';
import type { IpvsClient } from '../../src/ipvs/types.js';
import { type RealServer, type VirtualServer, virtualServerKey } from '../../src/model/ipvs.js';

export const VS: VirtualServer = { family: 'IPv4', protocol: 'TCP', address: '10.96.0.50', port: 80, fwmark: 0, scheduler: 'wlc', flags: 0, timeout: 0, netmask: 0xffffffff, peName: '' };
export const BACKENDS = ['10.10.1.1', '10.10.1.2', '10.10.1.3'];
/** Mean time in system per backend (s) and new connections per second per node. */
const SERVICE_TIME: Record<string, number> = { '10.10.1.1': 0.05, '10.10.1.2': 0.05, '10.10.1.3': 0.5 };
const RATE = 20;
export const dest = (address: string): RealServer => ({ address, port: 8080, family: 'IPv4', weight: 1, forward: 'masq', upperThreshold: 0, lowerThreshold: 0, tunnelType: 'ipip', tunnelPort: 0, tunnelFlags: 0 });
export const ENTRY: DesiredVirtualServer = {
  vs: VS, dests: BACKENDS.map(dest), clusterBalance: true,
  origin: { namespace: 'shop', name: 'web', portName: 'http', kind: 'cluster-ip', plugin: 'wlc' },
};
export const KEY = virtualServerKey(VS);
export const VIEW = viewKeyOf(ENTRY);
export const table: DesiredTable = new Map([[KEY, ENTRY]]);

/**
 * One node's IPVS as the reporter reads it: counters that grow with the clock; active connections
 * as `activeOf` says for the n-th read (default: rate × service time, steady).
 */
export function kernelStub(t0 = Date.now(), activeOf?: (address: string, read: number) => number): Pick<IpvsClient, 'listRealServers'> {
  let reads = 0;
  // No listVirtualServers: the reporter reads the opted-in virtual servers one by one, never a
  // dump of every one (30 000 on a large node).
  return {
    listRealServers: async (vs) => {
      if (virtualServerKey(vs) !== KEY) return []; // the kernel's answer for a service it does not have
      reads++;
      return BACKENDS.map((a) => ({
        ...dest(a), activeConns: activeOf ? activeOf(a, reads) : Math.round(RATE * SERVICE_TIME[a]!), inactiveConns: 0,
        stats: { conns: BigInt(Math.floor(((Date.now() - t0) / 1000) * RATE)), inBytes: 0n, outBytes: 0n } as never,
      }));
    },
  };
}
