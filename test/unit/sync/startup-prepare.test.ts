// Start-up without a gap (issue 29): the desired state built while the first lists arrive
// (DesiredState.prepare, Operator.prepare) must give the same desired state and the same first
// plan as building it all at the first sync, and must never write before the operator is started.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { DesiredState } from '../../../src/desired/state.js';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { NoIptables } from '../../../src/iptables/sync.js';
import { Operator } from '../../../src/sync/operator.js';
import type { SyncPlan } from '../../../src/plan/sync.js';
import { FakeVipLink } from '../../../src/rtnl/vips.js';
import type { SourceEvent } from '../../../src/source/types.js';
import { memoryLog } from '../../../src/util/log.js';
import { NODE, makeNode, makeService, makeSlice } from '../../support/fixtures.js';

const config = { ...defaultProxyConfig, interfaceName: 'ipvs-op0' };
const kernel = { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) };

/**
 * 40 Services of several shapes: every 4th NodePort, every 5th without slices, every 7th with two
 * slices; each slice has three endpoints, one of them not ready.
 */
function cluster(): { services: V1Service[]; slices: V1EndpointSlice[] } {
  const services: V1Service[] = [];
  const slices: V1EndpointSlice[] = [];
  for (let i = 0; i < 40; i++) {
    const name = `svc${i}`;
    const ip = `10.200.2.${i + 1}`;
    services.push(makeService('default', name, (s) => {
      s.spec!.clusterIP = ip;
      s.spec!.clusterIPs = [ip];
      s.spec!.ports = [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 as unknown as never }];
      if (i % 4 === 0) {
        s.spec!.type = 'NodePort';
        s.spec!.ports[0]!.nodePort = 30_000 + i;
      }
    }));
    if (i % 5 === 0) continue;
    const eps = (base: number) => [0, 1, 2].map((j) => ({ ip: `10.10.${i}.${base + j}`, ready: j !== 2 }));
    slices.push(makeSlice('default', name, `${name}-a`, eps(1)));
    if (i % 7 === 0) slices.push(makeSlice('default', name, `${name}-b`, eps(10)));
  }
  return { services, slices };
}

/** The events as two informers deliver pages of `page` objects at once, after the Node (or before, `nodeLast`). */
function events(page: number, nodeLast = false): SourceEvent[][] {
  const { services, slices } = cluster();
  const out: SourceEvent[][] = [];
  const node: SourceEvent = { kind: 'node', type: 'upsert', object: makeNode() };
  if (!nodeLast) out.push([node]);
  for (let p = 0; p < Math.max(services.length, slices.length); p += page) {
    out.push(services.slice(p, p + page).map((object) => ({ kind: 'service', type: 'upsert', object })));
    out.push(slices.slice(p, p + page).map((object) => ({ kind: 'endpointslice', type: 'upsert', object })));
  }
  if (nodeLast) out.push([node]);
  return out;
}

function feed(state: DesiredState, e: SourceEvent): void {
  if (e.kind === 'node') state.setNode(e.type === 'upsert' ? e.object : undefined);
  if (e.kind === 'service' && e.type === 'upsert') state.setService(e.object);
  if (e.kind === 'endpointslice' && e.type === 'upsert') state.setSlice(e.object);
}

const table = (s: DesiredState) => [...s.desiredTable].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

describe('DesiredState.prepare', () => {
  it.each([[3, false], [7, false], [5, true]])('pages of %i (Node last: %s): the same desired state and changed keys as one sync', (page, nodeLast) => {
    const whole = new DesiredState(config, new PluginRegistry(), NODE, { availableSchedulers: kernel.schedulers });
    for (const batch of events(page, nodeLast)) for (const e of batch) feed(whole, e);
    const once = whole.sync();

    const paged = new DesiredState(config, new PluginRegistry(), NODE, { availableSchedulers: kernel.schedulers });
    for (const batch of events(page, nodeLast)) {
      for (const e of batch) feed(paged, e);
      paged.prepare();
    }
    const last = paged.sync();
    expect(table(paged)).toEqual(table(whole));
    expect([...last.changed].sort()).toEqual([...once.changed].sort());
    expect(paged.desired().sets).toEqual(whole.desired().sets);
    expect([...paged.desired().vips].sort()).toEqual([...whole.desired().vips].sort());
    expect(paged.problems()).toEqual(whole.problems());
    expect(once.changed.size).toBeGreaterThan(40);
  });

  it('builds nothing before the Node, and only Services that have a slice; sync builds the rest', () => {
    const state = new DesiredState(config, new PluginRegistry(), NODE, { availableSchedulers: kernel.schedulers });
    const { services, slices } = cluster();
    for (const s of services) state.setService(s);
    for (const s of slices) state.setSlice(s);
    state.prepare();
    expect(state.desiredTable.size).toBe(0);
    state.setNode(makeNode());
    state.prepare();
    // 32 of the 40 Services have slices; every 4th is NodePort (node addresses: one IPv4 one IPv6, IPv4 Services).
    const withSlices = services.filter((_, i) => i % 5 !== 0);
    const nodePorts = withSlices.filter((s) => s.spec!.type === 'NodePort').length;
    expect(state.desiredTable.size).toBe(withSlices.length + nodePorts);
    const r = state.sync();
    expect(r.recomputed).toBe(40);
    expect(state.desiredTable.size).toBe(40 + services.filter((s) => s.spec!.type === 'NodePort').length);
    // The next sync has nothing left to report.
    expect(state.sync()).toEqual({ changed: new Set(), recomputed: 0 });
  });
});

describe('Operator.prepare', () => {
  function operator(ipvs: FakeIpvs, plans: SyncPlan[]) {
    return new Operator(config, {
      ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined },
      status: { write: async () => undefined }, log: memoryLog(), registry: new PluginRegistry(), nodeName: NODE, kernel,
      onPlan: (p) => plans.push(p),
    });
  }

  it('writes nothing before the first sync, and the first sync plans what it planned without it', async () => {
    const plain: SyncPlan[] = [];
    const plainIpvs = new FakeIpvs();
    const a = operator(plainIpvs, plain);
    for (const batch of events(6)) for (const e of batch) a.handle(e);
    await a.sync();

    const prepared: SyncPlan[] = [];
    const ipvs = new FakeIpvs();
    const b = operator(ipvs, prepared);
    for (const batch of events(6)) {
      for (const e of batch) b.handle(e);
      b.prepare();
      expect(ipvs.dump()).toBe('');
    }
    expect(prepared).toEqual([]);
    await b.sync();
    expect(prepared.map((p) => p.ops)).toEqual(plain.map((p) => p.ops));
    expect(ipvs.dump()).toBe(plainIpvs.dump());
    expect(ipvs.dump().split('\n').length).toBeGreaterThan(100);
  });
});
