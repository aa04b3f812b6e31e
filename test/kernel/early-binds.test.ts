// A full sync binds its VIPs once its desired state is built, beside its read of IPVS
// (src/sync/early-binds.ts), on the real kernel: 1 200 Services, so that the binds go through the
// helper thread as a node's do. While the read is held, iproute2 sees every VIP on the link and
// ipvsadm no virtual server; released, the sync programs them all, and a second operator over the
// same node binds nothing. Addresses: VIPs 10.200.40.0/22, pods 10.10.40.0/22.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { PluginRegistry } from '../../plugins/index.js';
import { defaultProxyConfig } from '../../src/config/types.js';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import type { IpvsClient } from '../../src/ipvs/types.js';
import { NoIptables } from '../../src/iptables/sync.js';
import type { SyncPlan } from '../../src/plan/sync.js';
import { THREAD_MIN_ADDRESSES } from '../../src/rtnl/address-batch.js';
import { Rtnl } from '../../src/rtnl/links.js';
import { RtnlVipLink } from '../../src/rtnl/vips.js';
import { Operator } from '../../src/sync/operator.js';
import { memoryLog } from '../../src/util/log.js';
import { NODE, makeNode, makeService, makeSlice } from '../support/fixtures.js';
import { waitFor } from '../support/operator-process.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const LINK = 'ipvs-eb0';
const N = 1200;
const vip = (i: number) => `10.200.${40 + (i >> 8)}.${i & 255}`;
const pod = (i: number) => `10.10.${40 + (i >> 8)}.${i & 255}`;
const config = { ...defaultProxyConfig, interfaceName: LINK };

let real: NetlinkIpvs;
const rtnl = Rtnl.open();
const links: RtnlVipLink[] = [];

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  real = await NetlinkIpvs.open();
  await real.flush();
  await rtnl.deleteLink(LINK);
});
afterAll(async () => {
  await real.flush();
  real.close();
  await rtnl.deleteLink(LINK);
  rtnl.close();
  for (const l of links) l.close();
});

/** `real`, with the listing of virtual servers (where a full read starts) held until `open` is called. */
function held(): { ipvs: IpvsClient; open: () => void; reads: () => number } {
  let open!: () => void;
  const gate = new Promise<void>((r) => { open = r; });
  let reads = 0;
  const ipvs = new Proxy(real, {
    get(target, key) {
      if (key === 'listVirtualServers') {
        return async (...args: Parameters<NetlinkIpvs['listVirtualServers']>) => {
          reads++;
          await gate;
          return target.listVirtualServers(...args);
        };
      }
      const v: unknown = Reflect.get(target, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { ipvs, open, reads: () => reads };
}

function operator(ipvs: IpvsClient, plans: SyncPlan[]): Operator {
  const vips = new RtnlVipLink();
  links.push(vips);
  const op = new Operator(config, {
    ipvs, vips, iptables: new NoIptables(), events: { report: async () => undefined },
    status: { write: async () => undefined }, log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE,
    kernel: { release: 'lab', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) }, onPlan: (p) => plans.push(p),
  });
  op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
  for (let i = 0; i < N; i++) {
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', `s${i}`, (s) => {
      s.spec!.clusterIP = vip(i);
      s.spec!.clusterIPs = [vip(i)];
      s.spec!.ports = [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 as unknown as never }];
    }) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', `s${i}`, `s${i}-a`, [{ ip: pod(i), ready: true }]) });
  }
  return op;
}

/** The link's IPv4 addresses as iproute2 lists them ([] when there is no link). */
function bound(): string[] {
  const out = execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', LINK], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const [link] = JSON.parse(out) as Array<{ addr_info: Array<{ local: string }> }>;
  return (link?.addr_info ?? []).map((a) => a.local).sort();
}
const virtualServers = () => execFileSync('ipvsadm', ['-Sn'], { encoding: 'utf8' }).split('\n').filter((l) => l.startsWith('-A')).length;
const want = Array.from({ length: N }, (_, i) => vip(i)).sort();

describe('a full sync\'s early binds on the real kernel', () => {
  it('binds every VIP while its read is held, then programs IPVS; a restart binds nothing', async () => {
    expect(N).toBeGreaterThanOrEqual(THREAD_MIN_ADDRESSES);
    const first = held();
    const plans: SyncPlan[] = [];
    const op = operator(first.ipvs, plans);
    const syncing = op.sync();
    await waitFor('every VIP bound, read still held', () => bound().length === N, 120_000);
    expect(first.reads()).toBe(1);
    expect(virtualServers()).toBe(0);
    expect(plans).toEqual([]);
    first.open();
    await syncing;
    expect(op.last).toMatchObject({ failed: 0, ops: 2 * N });
    expect(virtualServers()).toBe(N);
    expect(bound()).toEqual(want);
    expect(plans[0]!.vips).toMatchObject({ link: LINK, add: want, remove: [] });

    const again = held();
    again.open();
    const replans: SyncPlan[] = [];
    await operator(again.ipvs, replans).sync();
    expect(replans[0]!.vips).toMatchObject({ add: [], remove: [] });
    expect(replans[0]!.ops).toEqual([]);
    expect(bound()).toEqual(want);
  }, 300_000);
});
