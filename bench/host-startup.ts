// Host microbenchmark of the work before the first write of a first sync: an Operator over FakeIpvs
// and FakeVipLink at N Services x 10 endpoints, fed the Node, Services and EndpointSlices as
// SourceEvents, then started. Split, from the clock of this process (ms):
// - events: the handle() calls (as a source delivers its lists);
// - prebuild: what Operator.prepare() built between the events (0 unless --prepare PAGE, which calls
//   it after every PAGE events, as the wiring does after each list page);
// - desired: from start() to the first IPVS read (the desired state, the weights, the record);
// - read: the first to the last IPVS/VIP read; plan: from it to the first write (IPVS apply);
// - beforeWrite: from the first event to the first write, the whole gap; cpuBeforeWrite: the
//   process's CPU time over it (every thread: GC helpers too), less moved by a loaded host.
// Figures only: nothing here is asserted. Run: node dist/bench/host-startup.js [services] [--prepare PAGE]
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import type { IpvsClient } from '../src/ipvs/types.js';
import { Operator } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import type { SourceEvent } from '../src/source/types.js';
import { NODE_NAME, makeCluster, msSince } from './fixtures.js';

const N = Number(process.argv[2] ?? 10_000);
const pageAt = process.argv.indexOf('--prepare');
const PAGE = pageAt > 0 ? Number(process.argv[pageAt + 1]) : 0;
const c = makeCluster(N, 10);
// As the kube source's informers deliver their lists at once: the Node, then pages of 500
// Services and of their EndpointSlices in turn.
const LIST_PAGE = 500;
const events: SourceEvent[] = [{ kind: 'node', type: 'upsert', object: c.node }];
for (let p = 0; p < N; p += LIST_PAGE) {
  for (const object of c.services.slice(p, p + LIST_PAGE)) events.push({ kind: 'service', type: 'upsert', object });
  for (const object of c.slices.slice(p, p + LIST_PAGE)) events.push({ kind: 'endpointslice', type: 'upsert', object });
}
const at = { readStart: 0n, readEnd: 0n, write: 0n, cpu: { user: 0, system: 0 } };
const fake = new FakeIpvs();
// Every call timed by name: the first list is the read's start, the first apply the first write.
const ipvs = new Proxy(fake, {
  get(target, name, receiver) {
    const v = Reflect.get(target, name, receiver) as unknown;
    if (typeof v !== 'function') return v;
    return async (...args: unknown[]) => {
      const t = process.hrtime.bigint();
      if (name === 'apply' && !at.write) {
        at.write = t;
        at.cpu = process.cpuUsage(cpu0);
      }
      if (String(name).startsWith('list') && !at.readStart) at.readStart = t;
      const r = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      if (String(name).startsWith('list') && !at.write) at.readEnd = process.hrtime.bigint();
      return r;
    };
  },
}) as IpvsClient;
let done: (() => void) | undefined;
const first = new Promise<void>((r) => { done = r; });
const op = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 }, {
  ipvs, vips: new FakeVipLink(), iptables: { sync: async () => undefined, cleanup: async () => undefined },
  events: { report: async () => undefined }, status: { write: async () => { done?.(); } }, log: (level, message) => { if (level === 'error') console.error(message); },
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(),
  nodeName: NODE_NAME,
});
const keepAlive = setInterval(() => undefined, 60_000);
const t0 = process.hrtime.bigint();
const cpu0 = process.cpuUsage();
let prebuildMs = 0;
for (let i = 0; i < events.length; i++) {
  op.handle(events[i]!);
  if (PAGE > 0 && (i + 1) % PAGE === 0) {
    const t = process.hrtime.bigint();
    op.prepare();
    prebuildMs += msSince(t);
  }
}
const eventsMs = msSince(t0) - prebuildMs;
const tStart = process.hrtime.bigint();
op.start();
await first;
await op.stop();
clearInterval(keepAlive);
const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;
console.log(JSON.stringify({
  services: N, page: PAGE, ops: op.last?.ops, eventsMs, prebuildMs, desiredMs: ms(tStart, at.readStart),
  readMs: ms(at.readStart, at.readEnd), planMs: ms(at.readEnd, at.write), beforeWriteMs: ms(t0, at.write),
  fromStartMs: ms(tStart, at.write), cpuBeforeWriteMs: (at.cpu.user + at.cpu.system) / 1000,
}));
