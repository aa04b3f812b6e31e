// The /healthz and /readyz verdict (src/healthcheck/health.ts) as a table, then the operator's own
// bookkeeping feeding it: failing syncs, a disconnected source, a dead kernel socket.
import { describe, expect, it } from '@jest/globals';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { type ComponentHealth, type HealthInput, evaluateHealth } from '../../../src/healthcheck/health.js';
import { memoryLog } from '../../../src/util/log.js';
import { Operator } from '../../../src/sync/operator.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import { NODE, makeService } from '../../support/fixtures.js';

const T = 10_000_000;
const base: HealthInput = { now: T, syncPeriodMs: 30_000, everSynced: true, lastSyncEnd: T - 1000 };

describe('evaluateHealth', () => {
  const cases: Array<[string, Partial<HealthInput>, { healthy: boolean; ready: boolean; reason?: RegExp }]> = [
    ['synced recently', {}, { healthy: true, ready: true }],
    ['starting: no sync yet', { everSynced: false, lastSyncEnd: undefined }, { healthy: true, ready: false }],
    ['syncs failing for less than the bound (2 × syncPeriod = 60 s)', { failingSince: T - 59_000, lastError: 'EPERM' }, { healthy: true, ready: true }],
    ['syncs failing for longer than the bound', { failingSince: T - 61_000, lastError: 'dump-services: EPERM' }, { healthy: false, ready: false, reason: /^syncs failing for 61 s: dump-services: EPERM$/ }],
    ['a longer syncPeriod lengthens the bound', { syncPeriodMs: 120_000, failingSince: T - 200_000 }, { healthy: true, ready: true }],
    ['a short syncPeriod shortens it', { syncPeriodMs: 2_000, failingSince: T - 5_000 }, { healthy: false, ready: false, reason: /^syncs failing for 5 s$/ }],
    ['source down past the bound', { source: { ok: false, since: T - 90_000, reason: 'endpointslices: 403 Forbidden' } }, { healthy: false, ready: false, reason: /^source disconnected for 90 s: endpointslices: 403 Forbidden$/ }],
    ['source down within the bound', { source: { ok: false, since: T - 5_000 } }, { healthy: true, ready: true }],
    ['kernel socket failing past the bound', { kernel: { ok: false, since: T - 70_000, reason: 'EBADF' } }, { healthy: false, ready: false, reason: /^kernel socket failing for 70 s: EBADF$/ }],
    ['no sync ended for 2 × syncPeriod + 60 s (stuck loop)', { lastSyncEnd: T - 121_000 }, { healthy: false, ready: false, reason: /^no sync for 121 s$/ }],
    ['an explicit bound', { boundMs: 5_000, failingSince: T - 6_000 }, { healthy: false, ready: false, reason: /^syncs failing for 6 s$/ }],
  ];
  it.each(cases)('%s', (_name, over, want) => {
    const v = evaluateHealth({ ...base, ...over });
    expect({ healthy: v.healthy, ready: v.ready }).toEqual({ healthy: want.healthy, ready: want.ready });
    if (want.reason) expect(v.reason).toMatch(want.reason);
    else expect(v.reason).toBe('');
  });
});

/** A clock the test moves by hand; timers never fire on their own. */
function manualClock(start = T) {
  let t = start;
  return { now: () => t, setTimeout: () => ({}), clearTimeout: () => undefined, advance: (ms: number) => { t += ms; } };
}

/** A VIP link whose reads fail while `broken` is set (a node-level failure: the sync fails). */
class FlakyLink extends FakeVipLink {
  broken = false;
  override async list(name: string): Promise<string[]> {
    if (this.broken) throw new Error('rtnetlink: EBUSY');
    return super.list(name);
  }
}

function setup(source?: () => ComponentHealth, kernel?: () => ComponentHealth) {
  const clock = manualClock();
  const vips = new FlakyLink();
  const op = new Operator({ ...defaultProxyConfig, syncPeriod: 30 }, {
    ipvs: new FakeIpvs(), vips, iptables: new NoIptables(), events: { report: async () => undefined }, status: { write: async () => undefined },
    log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, clock,
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
    ...(source ? { sourceHealth: source } : {}), ...(kernel ? { kernelHealth: kernel } : {}),
  });
  return { op, clock, vips };
}

describe('Operator health', () => {
  it('is not ready before the first successful sync, ready after it', async () => {
    const { op } = setup();
    expect(op.health()).toMatchObject({ healthy: true, ready: false });
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'web') });
    await op.sync();
    expect(op.health()).toMatchObject({ healthy: true, ready: true });
  });

  it('syncs failing for longer than the bound fail /healthz and /readyz; one success heals both', async () => {
    const { op, clock, vips } = setup();
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'web') });
    await op.sync();
    vips.broken = true;
    await expect(op.sync({ periodic: true, retry: false })).rejects.toThrow(/EBUSY/);
    clock.advance(30_000);
    await expect(op.sync({ periodic: false, retry: true })).rejects.toThrow(/EBUSY/);
    expect(op.health().healthy).toBe(true);
    clock.advance(31_000);
    await expect(op.sync({ periodic: false, retry: true })).rejects.toThrow(/EBUSY/);
    expect(op.health()).toMatchObject({ healthy: false, ready: false });
    expect(op.health().reason).toMatch(/^syncs failing for 61 s: rtnetlink: EBUSY$/);
    vips.broken = false;
    await op.sync({ periodic: false, retry: true });
    expect(op.health()).toMatchObject({ healthy: true, ready: true, reason: '' });
  });

  it('a source disconnected, or a kernel socket failing, past the bound fails /healthz', async () => {
    let source: ComponentHealth = { ok: true, since: T };
    let kernel: ComponentHealth = { ok: true, since: T };
    const { op, clock } = setup(() => source, () => kernel);
    await op.sync();
    source = { ok: false, since: clock.now(), reason: 'services: 401 Unauthorized' };
    clock.advance(61_000);
    await op.sync({ periodic: true, retry: false });
    expect(op.health()).toMatchObject({ healthy: false, reason: 'source disconnected for 61 s: services: 401 Unauthorized' });
    source = { ok: true, since: clock.now() };
    kernel = { ok: false, since: clock.now() - 65_000, reason: 'socket closed' };
    expect(op.health()).toMatchObject({ healthy: false, reason: 'kernel socket failing for 65 s: socket closed' });
    kernel = { ok: true, since: clock.now() };
    expect(op.health()).toMatchObject({ healthy: true, ready: true });
  });
});

describe('a kernel socket that fails under a sync', () => {
  it('fails that sync; the retry re-reads the kernel and applies what was missed, without a restart', async () => {
    const ipvs = new FakeIpvs();
    let broken = false;
    const apply = ipvs.apply.bind(ipvs);
    ipvs.apply = async (ops) => {
      if (broken) throw new Error('send: EBADF');
      return apply(ops);
    };
    const op = new Operator({ ...defaultProxyConfig }, {
      ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined }, status: { write: async () => undefined },
      log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, clock: manualClock(),
      kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr']) },
    });
    await op.sync();
    broken = true;
    op.handle({ kind: 'service', type: 'upsert', object: makeService('default', 'web') });
    await expect(op.sync()).rejects.toThrow('EBADF');
    expect(op.last).toMatchObject({ error: 'send: EBADF' });
    broken = false;
    await op.sync({ periodic: false, retry: true });
    expect(op.last).toMatchObject({ full: true, ops: 1 });
    expect(ipvs.dump()).toBe('add-service TCP 10.200.1.10:80 rr');
  });
});
