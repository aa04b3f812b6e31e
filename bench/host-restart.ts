// Host microbenchmark of a restart's work outside the kernel: a first Operator programs N Services
// x 10 endpoints into a FakeIpvs; a second Operator over the same FakeIpvs (a restarted process
// finding its table) is fed the same events and started; its first sync should plan 0 ops. Split,
// from the clock of this process (ms):
// - events: the second operator's handle() calls; desired: from start() to its first IPVS dump
//   (a full sync opens the listing first, and the fake formats all of it then: counted here);
// - read: the first dump to the last IPVS read (the fake's: no kernel, so only our side of it);
// - after: from the last read to the end of the sync (plan, the record, the status); whole: all.
// Figures only: nothing here is asserted. Run: node [--cpu-prof] dist/bench/host-restart.js [services]
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import type { IpvsClient } from '../src/ipvs/types.js';
import { Operator, type OperatorDeps } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import type { SourceEvent } from '../src/source/types.js';
import { NODE_NAME, makeCluster, msSince } from './fixtures.js';

const N = Number(process.argv[2] ?? 30_000);
const c = makeCluster(N, 10);
const events: SourceEvent[] = [
  { kind: 'node', type: 'upsert', object: c.node },
  ...c.services.map((object): SourceEvent => ({ kind: 'service', type: 'upsert', object })),
  ...c.slices.map((object): SourceEvent => ({ kind: 'endpointslice', type: 'upsert', object })),
];
const fake = new FakeIpvs();
const vips = new FakeVipLink();
const at = { readStart: 0n, readEnd: 0n };
let timing = false;
// The read's calls timed by name (the second operator's only).
const ipvs = new Proxy(fake, {
  get(target, name, receiver) {
    const v = Reflect.get(target, name, receiver) as unknown;
    if (typeof v !== 'function') return v;
    return async (...args: unknown[]) => {
      const reads = timing && (String(name).startsWith('list') || String(name).startsWith('get'));
      if (reads && name !== 'listing' && !at.readStart) at.readStart = process.hrtime.bigint();
      const r = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      if (reads) at.readEnd = process.hrtime.bigint();
      return r;
    };
  },
}) as IpvsClient;

/** A new Operator over the shared fake kernel, and a promise of its first status write. */
function operator(): { op: Operator; synced: Promise<void> } {
  let done: (() => void) | undefined;
  const synced = new Promise<void>((r) => { done = r; });
  const deps: OperatorDeps = {
    ipvs, vips, iptables: { sync: async () => undefined, cleanup: async () => undefined },
    events: { report: async () => undefined }, status: { write: async () => { done?.(); } },
    log: (level, message) => { if (level === 'error') console.error(message); },
    kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(),
    nodeName: NODE_NAME,
  };
  return { op: new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 }, deps), synced };
}

const keepAlive = setInterval(() => undefined, 60_000);
const first = operator();
for (const e of events) first.op.handle(e);
first.op.start();
await first.synced;
await first.op.stop();
const firstOps = first.op.last?.ops;

timing = true;
const second = operator();
const t0 = process.hrtime.bigint();
for (const e of events) second.op.handle(e);
const eventsMs = msSince(t0);
const tStart = process.hrtime.bigint();
second.op.start();
await second.synced;
const tEnd = process.hrtime.bigint();
await second.op.stop();
clearInterval(keepAlive);
const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;
console.log(JSON.stringify({
  services: N, firstOps, restartOps: second.op.last?.ops, fromUs: Number(t0 / 1000n), eventsMs, desiredMs: ms(tStart, at.readStart),
  readMs: ms(at.readStart, at.readEnd), afterMs: ms(at.readEnd, tEnd), wholeMs: ms(t0, tEnd),
  rssMb: Math.round(process.memoryUsage().rss / 2 ** 20),
}));
