// Host-side part of `npm run bench`: the operator's memory at N Services x E endpoints, and what
// one change costs the files source. One process, as the operator runs: FilesSource reading a YAML
// directory (100 Services per file, Service + EndpointSlice each) feeding an Operator. The host has
// no IPVS, so the kernel is FakeIpvs (an in-memory table with the kernel's semantics: it holds one
// more copy of the table than the real process would, so the RSS is an upper bound), VIPs are
// FakeVipLink and the iptables path is off. Prints one JSON object on stdout.
// Run: node --expose-gc dist/bench/host-operator.js DIR [services] [endpoints]
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { NoIptables } from '../src/iptables/sync.js';
import { Operator } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import { FilesSource } from '../src/source/files.js';
import type { NodeStatus } from '../src/source/types.js';
import { NODE_NAME, makeBenchSlice, makeCluster, msSince } from './fixtures.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: host-operator.js DIR [services] [endpoints]');
const N = Number(process.argv[3] ?? 10_000);
const E = Number(process.argv[4] ?? 10);
const PER_FILE = 100;

rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const cluster = makeCluster(N, E);
const fileOf = (f: number, slices = cluster.slices) => {
  const docs: object[] = [];
  for (let i = f * PER_FILE; i < Math.min(N, (f + 1) * PER_FILE); i++) docs.push(cluster.services[i]!, slices[i]!);
  return docs.map((d) => stringify(d)).join('---\n');
};
writeFileSync(join(dir, 'node.yaml'), stringify(cluster.node));
for (let f = 0; f * PER_FILE < N; f++) writeFileSync(join(dir, `svc-${String(f).padStart(4, '0')}.yaml`), fileOf(f));
const gc = (globalThis as { gc?: () => void }).gc;

// The operator's timers are unref'd (the daemon's HTTP server keeps it alive): hold the loop open.
const keepAlive = setInterval(() => undefined, 60_000);
const rssBefore = process.memoryUsage().rss;
const registry = new PluginRegistry();
let onStatus: ((s: NodeStatus) => void) | undefined;
const ipvs = new FakeIpvs();
const operator = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0 }, {
  ipvs, vips: new FakeVipLink(), iptables: new NoIptables(), events: { report: async () => undefined },
  status: { write: async (s) => onStatus?.(s) }, log: () => undefined,
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry, nodeName: NODE_NAME,
});
const source = new FilesSource({ dir, nodeName: NODE_NAME, debounceMs: 100 });
const t0 = process.hrtime.bigint();
await source.start((e) => operator.handle(e));
const readMs = msSince(t0);
const first = new Promise<NodeStatus>((r) => { onStatus = r; });
operator.start();
await first;
const readyMs = msSince(t0);
gc?.();
const mem = process.memoryUsage();
const fakeTable = ipvs.view();
let dests = 0;
for (const e of fakeTable.values()) dests += e.dests.size;

// One endpoint added to one Service: the file is rewritten and read again, as the watcher's event
// for that file makes the source do (reread; the debounce is not included).
const changed = cluster.slices.slice();
changed[4242 % N] = makeBenchSlice(4242 % N, '2', [...Array.from({ length: E }, (_, j) => j), E], E);
const changedFile = `svc-${String(Math.floor((4242 % N) / PER_FILE)).padStart(4, '0')}.yaml`;
writeFileSync(join(dir, changedFile), fileOf(Math.floor((4242 % N) / PER_FILE), changed));
const synced = new Promise<NodeStatus>((r) => { onStatus = r; });
const t1 = process.hrtime.bigint();
await source.reread([changedFile]);
const rereadMs = msSince(t1);
await synced;
const changeMs = msSince(t1);
const changeOps = operator.last?.ops;
// The safety-net rescan of the whole directory when nothing changed: every file read, none parsed.
const t2 = process.hrtime.bigint();
await source.rescan();
const rescanUnchangedMs = msSince(t2);
await source.stop();
await operator.stop();
rmSync(dir, { recursive: true, force: true });
clearInterval(keepAlive);
console.log(JSON.stringify({
  services: N, endpointsPerService: E, virtualServers: fakeTable.size, realServers: dests,
  rssMb: mem.rss / 2 ** 20, heapUsedMb: mem.heapUsed / 2 ** 20, rssBeforeMb: rssBefore / 2 ** 20,
  filesSource: { initialReadMs: readMs, readyMs, rereadOneFileMs: rereadMs, changeToProgrammedMs: changeMs, changeOps, rescanUnchangedMs, debounceMs: 100 },
}));
