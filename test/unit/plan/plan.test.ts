// Planner against FakeIpvs (kernel semantics). Address ranges: see fixtures.ts; 10.99.0.0/16 and
// 172.16.0.0/16 are foreign virtual servers (keepalived, manual ipvsadm) the operator must not touch.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import {
  type IpvsOp, type Protocol, SvcFlag, formatOp, makeRealServer, makeVirtualServer, realServerEqual, virtualServerEqual, virtualServerKey,
} from '../../../src/model/ipvs.js';
import {
  type DrainState, type PlanInput, type WantedVirtualServer, destSettingsEqual, planIpvs, planVirtualServers, serviceSettingsEqual,
} from '../../../src/plan/plan.js';
import { makeOwnership } from '../../../src/plan/ownership.js';
import { prng } from '../../support/fixtures.js';

const GRACE = 900_000;

/** A desired table from `add-service`/`add-dest` lines (the fake's parser). */
function desiredFrom(text: string): Map<string, WantedVirtualServer> {
  const t = new FakeIpvs({ schedulers: new Set(['rr', 'wrr', 'sh', 'lc', 'mh']) }).seed(text).view();
  return new Map([...t].map(([k, e]) => [k, { vs: e.vs, dests: [...e.dests.values()].map(({ activeConns: _a, inactiveConns: _i, persistentConns: _p, ...r }) => r) }]));
}

function input(desired: Map<string, WantedVirtualServer>, fake: FakeIpvs, extra: Partial<PlanInput> = {}): PlanInput {
  // The operator's interface holds these VIPs (some of Services since deleted), plus the desired ones.
  const assigned = [...desired.values()].map((d) => d.vs.address);
  return {
    desired, actual: fake.view(), now: 1_000_000, draining: new Map(), gracePeriodMs: GRACE,
    // The record holds a NodePort virtual server the operator created for a Service since deleted.
    owns: makeOwnership({ assignedAddresses: [...assigned, '10.200.1.63', '10.200.1.99'], recorded: new Set(['TCP 192.168.0.10:30080']) }),
    ...extra,
  };
}

async function applyAll(fake: FakeIpvs, ops: IpvsOp[]) {
  const results = await fake.apply(ops);
  expect(results.filter((r) => r !== undefined).map((r) => r!.message)).toEqual([]);
}

const base = `
add-service TCP 10.200.1.63:9000 rr
add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq
add-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=1 masq`;

describe('planIpvs', () => {
  it.each<[string, string, string, string[]]>([
    ['from nothing', '', base, [
      'add-service TCP 10.200.1.63:9000 rr',
      'add-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=1 masq',
      'add-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=1 masq']],
    ['nothing to do', base, base, []],
    ['a scheduler change is one update-service', base, base.replace(' rr', ' sh flag-1'), ['update-service TCP 10.200.1.63:9000 sh flag-1']],
    ['an affinity timeout change is one update-service', base.replace(' rr', ' rr persistent=600/32'), base.replace(' rr', ' rr persistent=10800/32'),
      ['update-service TCP 10.200.1.63:9000 rr persistent=10800/32']],
    ['a weight change is one update-dest', base, base.replace('10.10.1.4:80 w=1', '10.10.1.4:80 w=5'),
      ['update-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=5 masq']],
    ['a new endpoint is one add-dest', base, `${base}\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.5:80 w=1 masq`,
      ['add-dest TCP 10.200.1.63:9000 -> 10.10.1.5:80 w=1 masq']],
    ['a removed endpoint without connections is deleted at once', base, base.split('\n').slice(0, 3).join('\n'),
      ['delete-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80']],
    ['a removed TCP endpoint with connections drains at weight 0', base.replace('10.10.1.4:80 w=1 masq', '10.10.1.4:80 w=1 masq conns=3/1'),
      base.split('\n').slice(0, 3).join('\n'), ['update-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=0 masq']],
    ['a removed UDP endpoint is deleted at once even with connections', base.replaceAll('TCP', 'UDP').replace('10.10.1.4:80 w=1 masq', '10.10.1.4:80 w=1 masq conns=3/1'),
      base.replaceAll('TCP', 'UDP').split('\n').slice(0, 3).join('\n'), ['delete-dest UDP 10.200.1.63:9000 -> 10.10.1.4:80']],
    ['a removed Service is deleted with its dests', base, '', ['delete-service TCP 10.200.1.63:9000']],
    ['phases: add, update services, add/update dests, delete dests, delete services',
      `${base}\nadd-service TCP 10.200.1.99:80 rr\nadd-service UDP 10.200.1.63:53 rr\nadd-dest UDP 10.200.1.63:53 -> 10.10.1.9:53 w=1 masq`,
      `add-service TCP 10.200.1.63:9000 wrr\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=2 masq\nadd-service TCP 10.200.1.64:80 rr\nadd-dest TCP 10.200.1.64:80 -> 10.10.1.1:80 w=1 masq\nadd-service UDP 10.200.1.63:53 rr`, [
        'add-service TCP 10.200.1.64:80 rr',
        'update-service TCP 10.200.1.63:9000 wrr',
        'update-dest TCP 10.200.1.63:9000 -> 10.10.1.3:80 w=2 masq',
        'add-dest TCP 10.200.1.64:80 -> 10.10.1.1:80 w=1 masq',
        'delete-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80',
        'delete-dest UDP 10.200.1.63:53 -> 10.10.1.9:53',
        'delete-service TCP 10.200.1.99:80']],
  ])('%s', async (_name, actualText, desiredText, expected) => {
    const fake = new FakeIpvs().seed(actualText);
    const desired = desiredFrom(desiredText);
    const plan = planIpvs(input(desired, fake));
    expect(plan.ops.map(formatOp)).toEqual(expected);
    await applyAll(fake, plan.ops);
    // Applying the plan reaches the desired table (but for draining dests), and re-planning is a no-op.
    const again = planIpvs(input(desired, fake, { draining: plan.draining }));
    expect(again.ops.map(formatOp)).toEqual([]);
    if (plan.draining.size === 0) expect(fake.dump()).toBe(new FakeIpvs().seed(desiredText).dump());
  });

  it('ignores the HASHED flag the kernel reports', () => {
    const fake = new FakeIpvs().seed(base);
    const desired = desiredFrom(base);
    const [vs] = [...desired.values()];
    desired.set('TCP 10.200.1.63:9000', { ...vs!, vs: { ...vs!.vs, flags: SvcFlag.HASHED } });
    expect(planIpvs(input(desired, fake)).ops).toEqual([]);
  });

  it('never touches foreign virtual servers, even ones whose address is a node address outside the NodePort range', () => {
    const foreign = `add-service TCP 10.99.0.1:443 wlc
add-dest TCP 10.99.0.1:443 -> 172.16.0.1:443 w=1 route
add-service FWM 7 IPv4 rr
add-service TCP 192.168.0.10:443 rr
add-service TCP 203.0.113.9:80 rr`;
    const fake = new FakeIpvs().seed(`${foreign}\nadd-service TCP 192.168.0.10:30080 rr\nadd-service TCP 10.200.1.99:80 rr`);
    const plan = planIpvs(input(new Map(), fake));
    expect(plan.ops.map(formatOp)).toEqual(['delete-service TCP 10.200.1.99:80', 'delete-service TCP 192.168.0.10:30080']);
  });

  it('a NodePort-looking virtual server on a node address that is not in the record is foreign (kube-proxy IPVS mode beside us)', () => {
    const fake = new FakeIpvs().seed('add-service TCP 192.168.0.10:30081 rr\nadd-service TCP 192.168.0.10:30080 rr');
    expect(planIpvs(input(new Map(), fake)).ops.map(formatOp)).toEqual(['delete-service TCP 192.168.0.10:30080']);
    const noRecord = makeOwnership({ assignedAddresses: ['10.200.1.99'] });
    expect(planIpvs({ ...input(new Map(), fake), owns: noRecord }).ops).toEqual([]);
  });

  it('honours excludeCIDRs over assigned addresses', () => {
    const fake = new FakeIpvs().seed('add-service TCP 10.200.1.99:80 rr');
    const owns = makeOwnership({ assignedAddresses: ['10.200.1.99'], excludeCIDRs: ['10.200.1.96/28'] });
    expect(planIpvs({ ...input(new Map(), fake), owns }).ops).toEqual([]);
  });
});

describe('graceful termination', () => {
  const drained = base.split('\n').slice(0, 3).join('\n');
  const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.1.63', port: 9000 });

  it('drains at weight 0, deletes when connections reach 0, and keeps the draining state as data', async () => {
    const fake = new FakeIpvs().seed(base);
    fake.setConnections(vs, { address: '10.10.1.4', port: 80 }, 2, 0);
    const desired = desiredFrom(drained);
    const p1 = planIpvs(input(desired, fake, { now: 1000 }));
    expect(p1.ops.map(formatOp)).toEqual(['update-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=0 masq']);
    expect(p1.draining).toEqual(new Map([['TCP 10.200.1.63:9000', new Map([['10.10.1.4:80', 1000]])]]));
    expect(p1.nextDeadline).toBe(1000 + GRACE);
    await applyAll(fake, p1.ops);
    const p2 = planIpvs(input(desired, fake, { now: 5000, draining: p1.draining }));
    expect(p2.ops).toEqual([]);
    expect(p2.draining).toEqual(p1.draining);
    fake.setConnections(vs, { address: '10.10.1.4', port: 80 }, 0, 0);
    const p3 = planIpvs(input(desired, fake, { now: 6000, draining: p2.draining }));
    expect(p3.ops.map(formatOp)).toEqual(['delete-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80']);
    expect(p3.draining.size).toBe(0);
  });

  it('deletes after the grace period even with connections', () => {
    const fake = new FakeIpvs().seed(base.replace('10.10.1.4:80 w=1 masq', '10.10.1.4:80 w=0 masq conns=1/5'));
    const draining: DrainState = new Map([['TCP 10.200.1.63:9000', new Map([['10.10.1.4:80', 1000]])]]);
    const desired = desiredFrom(drained);
    expect(planIpvs(input(desired, fake, { now: 1000 + GRACE - 1, draining })).ops).toEqual([]);
    expect(planIpvs(input(desired, fake, { now: 1000 + GRACE, draining })).ops.map(formatOp))
      .toEqual(['delete-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80']);
  });

  it('restores a draining endpoint that comes back', () => {
    const fake = new FakeIpvs().seed(base.replace('10.10.1.4:80 w=1 masq', '10.10.1.4:80 w=0 masq conns=1/5'));
    const draining: DrainState = new Map([['TCP 10.200.1.63:9000', new Map([['10.10.1.4:80', 1000]])]]);
    const p = planIpvs(input(desiredFrom(base), fake, { now: 2000, draining }));
    expect(p.ops.map(formatOp)).toEqual(['update-dest TCP 10.200.1.63:9000 -> 10.10.1.4:80 w=1 masq']);
    expect(p.draining.size).toBe(0);
  });
});

describe('planVirtualServers (incremental)', () => {
  it('plans only the given keys', () => {
    const fake = new FakeIpvs().seed(`${base}\nadd-service TCP 10.200.1.99:80 rr`);
    const desired = desiredFrom(`${base}\nadd-dest TCP 10.200.1.63:9000 -> 10.10.1.5:80 w=1 masq\nadd-service TCP 10.200.1.64:80 rr`);
    expect(planVirtualServers(['TCP 10.200.1.63:9000'], input(desired, fake)).ops.map(formatOp))
      .toEqual(['add-dest TCP 10.200.1.63:9000 -> 10.10.1.5:80 w=1 masq']);
  });
});

describe('randomized: apply(plan(desired, actual)) reaches desired; re-plan is empty; foreign untouched', () => {
  const protocols: Protocol[] = ['TCP', 'UDP', 'SCTP'];
  const schedulers = ['rr', 'wrr', 'sh', 'lc', 'mh'];

  function randomTable(rand: () => number, prefix: string, n: number): FakeIpvs {
    const fake = new FakeIpvs();
    for (let i = 0; i < n; i++) {
      const v6 = rand() < 0.3;
      const vs = makeVirtualServer({
        family: v6 ? 'IPv6' : 'IPv4', protocol: protocols[Math.floor(rand() * 3)]!,
        address: v6 ? `fd00:200::${Math.floor(rand() * 6)}` : `${prefix}.${Math.floor(rand() * 6)}`,
        port: 80 + Math.floor(rand() * 3), scheduler: schedulers[Math.floor(rand() * schedulers.length)]!,
        flags: rand() < 0.3 ? SvcFlag.PERSISTENT : rand() < 0.2 ? SvcFlag.SCHED1 : 0,
      });
      if (vs.flags & SvcFlag.PERSISTENT) vs.timeout = rand() < 0.5 ? 10800 : 600;
      fake.applyOne({ kind: 'add-service', vs });
      const m = Math.floor(rand() * 5);
      for (let j = 0; j < m; j++) {
        const rs = makeRealServer({ address: v6 ? `fd00:10::${Math.floor(rand() * 8)}` : `10.10.1.${Math.floor(rand() * 8)}`,
          port: 8080, weight: Math.floor(rand() * 4) });
        if (fake.applyOne({ kind: 'add-dest', vs, rs }) === undefined && rand() < 0.3) {
          fake.setConnections(vs, rs, Math.floor(rand() * 3), 0);
        }
      }
    }
    return fake;
  }

  it.each(Array.from({ length: 60 }, (_, i) => i + 1))('seed %i', async (seed) => {
    const rand = prng(seed);
    const desiredFake = randomTable(rand, '10.200.1', 1 + Math.floor(rand() * 8));
    const desired = new Map([...desiredFake.view()].map(([k, e]) => [k, { vs: e.vs, dests: [...e.dests.values()].map((r) => ({ ...r, activeConns: undefined, inactiveConns: undefined })) }]));
    const actual = randomTable(rand, '10.200.1', Math.floor(rand() * 8));
    const foreignText = 'add-service TCP 172.16.0.1:80 rr\nadd-dest TCP 172.16.0.1:80 -> 10.10.9.9:80 w=1 masq\nadd-service FWM 9 IPv6 lc';
    actual.seed(foreignText);
    const owns = makeOwnership({ assignedAddresses: [...Array(6).keys()].flatMap((i) => [`10.200.1.${i}`, `fd00:200::${i}`]) });
    let draining: DrainState = new Map();
    // Drain until done: connections drop to 0 between rounds (at most a few rounds).
    for (let round = 0; round < 4; round++) {
      const plan = planIpvs({ desired, actual: actual.view(), owns, now: round, draining, gracePeriodMs: GRACE });
      expect(plan.ops.filter((op) => !owns(op.vs) && !desired.has(virtualServerKey(op.vs)))).toEqual([]);
      await applyAll(actual, plan.ops);
      draining = plan.draining;
      for (const [vk, m] of draining) for (const rk of m.keys()) {
        const e = actual.view().get(vk)!;
        actual.setConnections(e.vs, e.dests.get(rk)!, 0, 0);
      }
      if (plan.ops.length === 0) break;
    }
    expect(draining.size).toBe(0);
    const foreignLines = foreignText.split('\n');
    const got = actual.dump().replace(/ conns=\d+\/\d+/g, '').split('\n').filter(Boolean).sort();
    const want = [...desiredFake.dump().replace(/ conns=\d+\/\d+/g, '').split('\n'), ...foreignLines].filter(Boolean).sort();
    expect(got).toEqual(want);
    expect(planIpvs({ desired, actual: actual.view(), owns, now: 10, draining, gracePeriodMs: GRACE }).ops).toEqual([]);
  });
});

describe('fast comparisons agree with the model', () => {
  it('serviceSettingsEqual / destSettingsEqual match virtualServerEqual / realServerEqual on same-key pairs', () => {
    const rand = prng(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
    for (let n = 0; n < 2000; n++) {
      const mk = () => makeVirtualServer({ family: 'IPv4', address: '10.200.1.1', port: 80, scheduler: pick(['rr', 'sh']),
        flags: pick([0, SvcFlag.PERSISTENT, SvcFlag.HASHED, SvcFlag.SCHED1 | SvcFlag.PERSISTENT]), timeout: pick([0, 600]),
        netmask: pick([0xffffffff, 0xffffff00]), peName: pick(['', 'sip']) });
      const a = mk();
      const b = mk();
      expect(serviceSettingsEqual(a, b)).toBe(virtualServerEqual(a, b));
      const mr = () => makeRealServer({ address: '10.10.1.1', port: 80, weight: pick([0, 1]), forward: pick(['masq', 'tunnel'] as const),
        upperThreshold: pick([0, 5]), tunnelType: pick(['ipip', 'gue'] as const), tunnelPort: pick([0, 6080]) });
      const r = mr();
      const s = mr();
      expect(destSettingsEqual(r, s)).toBe(realServerEqual(r, s));
    }
  });
});
