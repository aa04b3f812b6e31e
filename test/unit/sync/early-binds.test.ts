// A full sync binds its VIPs from the moment its desired state is built, beside its read of IPVS
// and its plan (src/sync/early-binds.ts). What it binds, what its plan says and what a failure
// leaves must be what they were when the executor bound them: the same plan lines, one batch sent
// once, nothing bound on a link of another kind, and no bind outliving a failed sync.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import type { VirtualServer } from '../../../src/model/ipvs.js';
import { type SyncPlan, formatSyncPlan } from '../../../src/plan/sync.js';
import { RtnlError } from '../../../src/rtnl/errors.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { Operator } from '../../../src/sync/operator.js';
import { memoryLog } from '../../../src/util/log.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const LINK = 'ipvs-op0';
const config = { ...defaultProxyConfig, interfaceName: LINK };
const kernel = { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) };
const VIPS = ['10.200.3.1', '10.200.3.2', '10.200.3.3'];

/** FakeIpvs whose listing of virtual servers (the start of a full read) waits for `open()`, or fails once. */
class GatedIpvs extends FakeIpvs {
  private opened!: () => void;
  private readonly gate = new Promise<void>((r) => { this.opened = r; });
  failNext = false;
  reads = 0;
  open(): void {
    this.opened();
  }
  override async listVirtualServers(): Promise<VirtualServer[]> {
    this.reads++;
    await this.gate;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('the dump broke');
    }
    return super.listVirtualServers();
  }
}

/** FakeVipLink that logs each call, in order. */
class LoggedVips extends FakeVipLink {
  readonly calls: string[] = [];
  override async list(name: string): Promise<string[]> {
    this.calls.push('list');
    return super.list(name);
  }
  override async ensure(name: string): Promise<void> {
    this.calls.push('ensure');
    return super.ensure(name);
  }
  override async addMany(name: string, addresses: readonly string[]): Promise<Array<RtnlError | undefined>> {
    this.calls.push(`addMany ${addresses.join(',')}`);
    return super.addMany(name, addresses);
  }
}

function operator(ipvs: FakeIpvs, vips: FakeVipLink, plans: SyncPlan[]): Operator {
  const op = new Operator(config, {
    ipvs, vips, iptables: new NoIptables(), events: { report: async () => undefined },
    status: { write: async () => undefined }, log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, kernel,
    onPlan: (p) => plans.push(p),
  });
  op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
  VIPS.forEach((ip, i) => {
    const name = `svc${i}`;
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', name, (s) => {
      s.spec!.clusterIP = ip;
      s.spec!.clusterIPs = [ip];
      s.spec!.ports = [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 as unknown as never }];
    }) });
    op.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', name, `${name}-a`, [
      { ip: `10.10.${i}.1`, ready: true }, { ip: `10.10.${i}.2`, ready: true },
    ]) });
  });
  return op;
}

/** Turns of the event loop until `cond` holds (at most 1 000); whether it held. */
async function until(cond: () => boolean): Promise<boolean> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  return cond();
}

const bound = (vips: FakeVipLink) => [...(vips.links.get(LINK) ?? [])].sort();

describe('a full sync\'s early binds', () => {
  it('binds the VIPs while the read of IPVS waits, then plans them as before and sends them once', async () => {
    const ipvs = new GatedIpvs();
    const vips = new LoggedVips();
    const plans: SyncPlan[] = [];
    const op = operator(ipvs, vips, plans);
    const syncing = op.sync();
    expect(await until(() => bound(vips).length === VIPS.length)).toBe(true);
    // Bound with the read still waiting: nothing planned, nothing written to IPVS yet.
    expect(ipvs.reads).toBe(1);
    expect(plans).toEqual([]);
    expect(ipvs.dump()).toBe('');
    ipvs.open();
    await syncing;
    expect(bound(vips)).toEqual(VIPS);
    expect(vips.calls).toEqual(['list', 'ensure', `addMany ${VIPS.join(',')}`]);
    // The plan says what it always said about the link.
    expect(plans).toHaveLength(1);
    expect(plans[0]!.vips).toEqual({ link: LINK, ensure: true, add: VIPS, remove: [], version: expect.any(Number) });
    const lines = formatSyncPlan(plans[0]!);
    for (const ip of VIPS) expect(lines).toContain(`add-vip ${LINK} ${ip}`);
    expect(ipvs.view().size).toBe(VIPS.length);
    expect(op.last).toMatchObject({ ops: VIPS.length * 3, failed: 0 });
  });

  it('leaves an address it does not want to the plan\'s unbinds, after the IPVS batch', async () => {
    const ipvs = new GatedIpvs();
    const vips = new LoggedVips();
    await vips.ensure(LINK);
    await vips.add(LINK, '10.200.9.9');
    await vips.add(LINK, VIPS[1]!);
    vips.calls.length = 0;
    const plans: SyncPlan[] = [];
    const op = operator(ipvs, vips, plans);
    const syncing = op.sync();
    expect(await until(() => bound(vips).length === 4)).toBe(true);
    expect(bound(vips)).toContain('10.200.9.9');
    ipvs.open();
    await syncing;
    expect(vips.calls).toEqual(['list', 'ensure', `addMany ${VIPS[0]},${VIPS[2]}`]);
    expect(plans[0]!.vips).toMatchObject({ add: [VIPS[0], VIPS[2]], remove: ['10.200.9.9'] });
    expect(bound(vips)).toEqual(VIPS);
  });

  it('a sync whose read fails ends its binds first; the retry finds them bound and binds nothing', async () => {
    const ipvs = new GatedIpvs();
    ipvs.failNext = true;
    const vips = new LoggedVips();
    const plans: SyncPlan[] = [];
    const op = operator(ipvs, vips, plans);
    const syncing = op.sync();
    ipvs.open();
    await expect(syncing).rejects.toThrow('the dump broke');
    // Settled before the failure was reported: every bind answered, no plan made, no IPVS op.
    expect(bound(vips)).toEqual(VIPS);
    expect(plans).toEqual([]);
    expect(ipvs.dump()).toBe('');
    vips.calls.length = 0;
    await op.sync();
    expect(vips.calls).toEqual(['list', 'ensure']);
    expect(plans[0]!.vips).toMatchObject({ add: [], remove: [] });
    expect(ipvs.view().size).toBe(VIPS.length);
  });

  it('binds nothing on a link of another kind: the sync fails with that link\'s error, as before', async () => {
    const ipvs = new GatedIpvs();
    ipvs.open();
    const vips = new FakeVipLink(new Map([[LINK, 'veth']]));
    const plans: SyncPlan[] = [];
    const op = operator(ipvs, vips, plans);
    await expect(op.sync()).rejects.toThrow(/exists and is a veth link/);
    expect(bound(vips)).toEqual([]);
    expect(plans).toEqual([]);
  });

  it('a batch the link refuses fails the sync once the IPVS batch is in, and the next sync binds the rest', async () => {
    const ipvs = new GatedIpvs();
    ipvs.open();
    const vips = new LoggedVips();
    let broken = true;
    const addMany = vips.addMany.bind(vips);
    vips.addMany = async (name, addresses) => {
      if (!broken) return addMany(name, addresses);
      broken = false;
      throw RtnlError.fromErrno(`add-address ${name}`, 105); // ENOBUFS: the socket failed
    };
    const plans: SyncPlan[] = [];
    const op = operator(ipvs, vips, plans);
    await expect(op.sync()).rejects.toThrow(/add-address/);
    expect(bound(vips)).toEqual([]);
    expect(ipvs.view().size).toBe(VIPS.length);
    await op.sync();
    expect(bound(vips)).toEqual(VIPS);
    expect(plans.at(-1)!.vips).toMatchObject({ add: VIPS, remove: [] });
  });
});
