// Where a sync's time goes (outcome.ts syncPhases, Operator.sync's marks): the report and the
// 'synced' log line carry it, so a slow change tells whether it built, read, planned or wrote.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import type { OpResult } from '../../../src/ipvs/types.js';
import type { IpvsOp } from '../../../src/model/ipvs.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { syncPhases } from '../../../src/sync/outcome.js';
import { Operator } from '../../../src/sync/operator.js';
import { memoryLog } from '../../../src/util/log.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

describe('syncPhases', () => {
  it('splits the time between the marks, the rest after the last', () => {
    expect(syncPhases(100, { built: 103, read: 120, planned: 122, written: 140 }, 145))
      .toEqual({ build: 3, read: 17, plan: 2, write: 18, after: 5 });
  });

  it('a sync that failed ends in the phase it failed in', () => {
    expect(syncPhases(100, { built: 103 }, 150)).toEqual({ build: 3, read: 47 });
    expect(syncPhases(100, {}, 101)).toEqual({ build: 1 });
  });
});

/** A clock moved by the fake kernel: each apply costs `applyMs`, and may then fail. */
class SlowApplyIpvs extends FakeIpvs {
  constructor(private readonly clock: { advance(ms: number): void }, private readonly applyMs: number) { super(); }
  failApply = false;
  override async apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    this.clock.advance(this.applyMs);
    if (this.failApply) throw new Error('socket closed');
    return super.apply(ops);
  }
}

function setup() {
  let t = 5_000;
  const clock = {
    now: () => t, setTimeout: (): unknown => ({}), clearTimeout: () => undefined, advance: (ms: number) => { t += ms; },
  };
  const ipvs = new SlowApplyIpvs(clock, 11);
  const log = memoryLog();
  const op = new Operator({ ...defaultProxyConfig, interfaceName: 'ipvs-op0' }, {
    ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined },
    status: { write: async () => undefined }, log, registry: new PluginRegistry(), nodeName: NODE, clock,
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
  });
  op.handle({ kind: 'node', type: 'upsert', object: makeNode() });
  op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'web') });
  op.handle({ kind: 'endpointslice', type: 'upsert', object: makeSlice('default', 'web', 'web-1', [{ ip: '10.10.1.3' }]) });
  return { op, ipvs, log };
}

describe('a sync reports its phases', () => {
  it('the write holds the kernel\'s time; the phases add up to the duration, in the report and the log', async () => {
    const { op, log } = setup();
    await op.sync();
    const last = op.last!;
    expect(last.phasesMs).toEqual({ build: 0, read: 0, plan: 0, write: 11, after: 0 });
    expect(last.durationMs).toBe(11);
    const synced = log.entries.filter((e) => e.message === 'synced');
    expect(synced.map((e) => e.fields?.phasesMs)).toEqual([last.phasesMs]);
  });

  it('a sync that fails while writing reports the phases until then', async () => {
    const { op, ipvs, log } = setup();
    ipvs.failApply = true;
    await expect(op.sync()).rejects.toThrow('socket closed');
    expect(op.last).toMatchObject({ error: 'socket closed', durationMs: 11, phasesMs: { build: 0, read: 0, plan: 0, write: 11 } });
    expect(op.last!.phasesMs.after).toBeUndefined();
    expect(log.entries.filter((e) => e.message === 'sync failed').map((e) => e.fields?.phasesMs)).toEqual([op.last!.phasesMs]);
  });
});
