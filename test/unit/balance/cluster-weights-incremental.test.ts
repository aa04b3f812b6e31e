// ClusterWeights.apply weighs again only what changed (issue 29): after random sequences of table
// changes, publishes, refusals, forgets, the view dying and coming back and the clock moving, its
// table and problems must equal those of a fresh ClusterWeights given the same published state
// and every key at once, and the keys it adds to `changed` must be exactly those whose weights
// moved, in opt-in order. Backends 10.10.1.1-4:8080, VIPs 10.200.1.0/24, nodes node-a, node-b.
import { describe, expect, it } from '@jest/globals';
import { ClusterWeights } from '../../../src/balance/cluster-view.js';
import { DEFAULT_DAMPING } from '../../../src/balance/damping.js';
import type { DesiredTable, DesiredVirtualServer } from '../../../src/desired/types.js';
import { virtualServerKey } from '../../../src/model/ipvs.js';
import { dest } from '../../support/cluster-view.js';
import { prng } from '../../support/fixtures.js';

const NODE = 'node-a';
const STALE_MS = 30_000;
const SERVICES = ['s0', 's1', 's2', 's3', 's4'];
const PORTS = ['http', 'dns'];
const BACKENDS = ['10.10.1.1', '10.10.1.2', '10.10.1.3', '10.10.1.4'];

type Published = { kind: 'publish'; views: Map<string, Map<string, number>>; choices: Map<string, Map<string, string>>;
  reporters?: string[] } | { kind: 'refuse'; error: string };

describe('ClusterWeights: incremental apply', () => {
  it('equals a fresh apply of every key after random change sequences', () => {
    const rand = prng(2929);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const some = <T>(xs: readonly T[]): T[] => xs.filter(() => rand() < 0.6);
    const entry = (s: number, port: number): DesiredVirtualServer => ({
      vs: { family: 'IPv4', protocol: 'TCP', address: `10.200.1.${s + 1}`, port: 80 + port, fwmark: 0,
        scheduler: pick(['wrr', 'wlc']), flags: 0, timeout: 0, netmask: 0xffffffff, peName: '' },
      dests: some(BACKENDS).map((a) => ({ ...dest(a), weight: 1 + Math.floor(rand() * 3) })),
      ...(rand() < 0.8 ? { clusterBalance: true } : {}),
      origin: { namespace: 'shop', name: SERVICES[s]!, portName: PORTS[port]!, kind: 'cluster-ip', plugin: 'wrr' },
    });
    const table = new Map<string, DesiredVirtualServer>();
    const published = new Map<string, Published>();
    const inc = new ClusterWeights(STALE_MS, DEFAULT_DAMPING, undefined, NODE);
    let [now, alive, missingSince] = [0, true, undefined as number | undefined];
    let previous: DesiredTable = new Map();
    for (let step = 0; step < 3000; step++) {
      const changed = new Set<string>();
      for (let n = 1 + Math.floor(rand() * 3); n > 0; n--) {
        const s = Math.floor(rand() * SERVICES.length);
        const service = `shop/${SERVICES[s]}`;
        const what = rand();
        if (what < 0.35) {
          const e = entry(s, Math.floor(rand() * PORTS.length));
          table.set(virtualServerKey(e.vs), e);
          changed.add(virtualServerKey(e.vs));
        } else if (what < 0.45) {
          const key = pick([...table.keys()].filter((k) => table.get(k)!.origin.name === SERVICES[s]) ?? []);
          if (key) { table.delete(key); changed.add(key); }
        } else if (what < 0.75) {
          const views = new Map(some(PORTS).map((p) => [`${service}/${p}`,
            new Map(some(BACKENDS).map((a) => [`${a}:8080`, 1 + Math.floor(rand() * 100)]))]));
          const choices = new Map([...views].filter(([, w]) => w.size && rand() < 0.5)
            .map(([vk, w]) => [vk, new Map([[NODE, pick([...w.keys()])]])]));
          const reporters = rand() < 0.2 ? [pick(['node-a', 'node-b'])] : undefined;
          published.set(service, { kind: 'publish', views, choices, ...(reporters ? { reporters } : {}) });
          inc.publish(service, views, choices, reporters);
        } else if (what < 0.8) {
          published.set(service, { kind: 'refuse', error: `bad ${step}` });
          inc.refuse(service, `bad ${step}`);
        } else if (what < 0.85) {
          published.delete(service);
          inc.forget(service);
        } else if (what < 0.92) {
          const next = rand() < 0.6;
          missingSince = next ? undefined : missingSince ?? now;
          alive = next;
          inc.setAlive(next, now);
        } else now += Math.floor(rand() * 20_000);
      }
      const input = new Set(changed);
      const got = inc.apply(table, changed, now);

      const fresh = new ClusterWeights(STALE_MS, DEFAULT_DAMPING, undefined, NODE);
      for (const [service, p] of published) {
        if (p.kind === 'publish') fresh.publish(service, p.views, p.choices, p.reporters);
        else fresh.refuse(service, p.error);
      }
      if (!alive) fresh.setAlive(false, missingSince!);
      const want = fresh.apply(table, new Set([...inc.optedIn().keys(), ...table.keys()]), now);
      expect([...fresh.optedIn()]).toEqual([...inc.optedIn()]);
      for (const key of table.keys()) expect(got.table.get(key)).toEqual(want.table.get(key));
      expect(got.problems).toEqual(want.problems);
      expect(got.nextAt).toEqual(want.nextAt);

      const weights = (t: DesiredTable, k: string) => t.get(k)?.dests.map((d) => `${d.address}=${d.weight}`).join();
      const order = [...inc.optedIn().keys()];
      const moved = order.filter((k) => !input.has(k) && previous.has(k) && weights(previous, k) !== weights(got.table, k));
      expect([...changed].filter((k) => !input.has(k))).toEqual(moved);
      previous = new Map([...table.keys()].map((k) => [k, got.table.get(k)!]));
    }
  });
});
