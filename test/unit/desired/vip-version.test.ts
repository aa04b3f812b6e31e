// The VIP version (DesiredState.versions.vips) against the VIP set it stands for (issue 29): the
// planner diffs the whole VIP set whenever the version moved, so a rebuild that keeps a Service's
// VIPs must leave it alone, and an unchanged version must always mean an unchanged set. Address
// ranges: fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../../plugins/index.js';
import { DesiredState, buildDesired } from '../../../src/desired/state.js';
import { defaultProxyConfig } from '../../../src/config/types.js';
import { planSync } from '../../../src/plan/sync.js';
import { NODE, makeNode, makeService, makeSlice, prng, toIpvsTable } from '../../support/fixtures.js';

const config = { ...defaultProxyConfig };
const registry = new PluginRegistry();

function freshState(): DesiredState {
  const state = new DesiredState(config, registry, NODE);
  state.setNode(makeNode());
  return state;
}

describe('DesiredState: the VIP version', () => {
  it('an endpoint change rebuilds the Service but keeps the VIP version, so the plan leaves the link alone', () => {
    const state = freshState();
    state.setService(makeService('ns1', 'web', (s) => { s.spec!.externalIPs = ['203.0.113.7']; }));
    state.setSlice(makeSlice('ns1', 'web', 'web-a', [{ ip: '10.10.1.1' }]));
    state.sync();
    const before = state.versions.vips;
    const actual = toIpvsTable(state.desired().table);
    state.setSlice(makeSlice('ns1', 'web', 'web-a', [{ ip: '10.10.1.1' }, { ip: '10.10.1.2' }], (s) => { s.metadata!.resourceVersion = '2'; }));
    const { changed, recomputed } = state.sync();
    expect(recomputed).toBe(1);
    expect(state.versions.vips).toBe(before);
    const plan = planSync({
      now: 0, full: false, changed, reread: new Set(), desired: state.desired(), versions: state.versions, config,
      actual, vipsNow: new Set(['10.200.1.10', '203.0.113.7']), draining: new Map(),
      applied: { vips: before, iptables: { sets: state.versions.sets, config } },
    });
    expect(plan.vips).toBeUndefined();
    expect(plan.ops).toHaveLength(2); // one add-dest on each of its two virtual servers
  });

  it('after random changes: an equal version means an equal VIP set, endpoint-only syncs keep it, and the set is the from-scratch one', () => {
    const rand = prng(29);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const ips = ['10.200.1.10', '10.200.1.11', '10.200.1.12'];
    const external = [[], ['203.0.113.7'], ['203.0.113.7', '203.0.113.8']];
    const names = ['a', 'b', 'c', 'd'];
    const services = new Map<string, V1Service>();
    const slices = new Map<string, V1EndpointSlice>();
    const state = freshState();
    state.sync();
    let rv = 1;
    for (let step = 0; step < 600; step++) {
      const before = { version: state.versions.vips, set: new Set(state.desired().vips) };
      let endpointsOnly = true;
      for (let n = 1 + Math.floor(rand() * 3); n > 0; n--) {
        const name = pick(names);
        const what = rand();
        rv++;
        if (what < 0.25) {
          const svc = makeService('ns1', name, (s) => {
            s.metadata!.resourceVersion = String(rv);
            s.spec!.clusterIP = pick(ips);
            s.spec!.clusterIPs = [s.spec!.clusterIP];
            s.spec!.externalIPs = pick(external);
          });
          endpointsOnly &&= services.get(name)?.spec?.clusterIP === svc.spec!.clusterIP
            && String(services.get(name)?.spec?.externalIPs) === String(svc.spec!.externalIPs);
          services.set(name, svc);
          state.setService(svc);
        } else if (what < 0.35) {
          endpointsOnly &&= !services.has(name);
          services.delete(name);
          state.deleteService('ns1', name);
        } else if (what < 0.9) {
          const eps = Array.from({ length: Math.floor(rand() * 4) }, (_, j) => ({ ip: `10.10.1.${j + 1}` }));
          const slice = makeSlice('ns1', name, `${name}-a`, eps, (s) => { s.metadata!.resourceVersion = String(rv); });
          slices.set(name, slice);
          state.setSlice(slice);
        } else if (slices.has(name)) {
          state.deleteSlice(slices.get(name)!);
          slices.delete(name);
        }
      }
      state.sync();
      const after = state.desired().vips;
      if (state.versions.vips === before.version) expect(new Set(after)).toEqual(before.set);
      if (endpointsOnly) expect(state.versions.vips).toBe(before.version);
      const scratch = buildDesired({ services: [...services.values()], endpointSlices: [...slices.values()], node: makeNode(), nodeName: NODE },
        config, registry);
      expect([...after].sort()).toEqual([...scratch.vips].sort());
    }
  });
});
