// Host microbenchmark of the periodic drift check: an Operator over FakeIpvs, FakeVipLink and the
// real IptablesRestore on test/support's FakeHost (its tools in memory) at N Services; times the
// periodic syncs after a full one (the first pays the iptables check's member counts, the next
// reuse them while no set entry changes), and the sync's steps by their share of CPU when run
// with --profile (host-periodic.cpuprofile: the periodic syncs alone).
// Run: node dist/bench/host-periodic.js [services] [checks] [--profile]
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { PluginRegistry } from '../plugins/index.js';
import { defaultProxyConfig } from '../src/config/types.js';
import { FakeIpvs } from '../src/ipvs/fake.js';
import { IptablesRestore } from '../src/iptables/restore.js';
import { Operator } from '../src/sync/operator.js';
import { FakeVipLink } from '../src/rtnl/vips.js';
import { FakeHost } from '../test/support/iptables-fake.js';
import { NODE_NAME, feedCluster, makeCluster, msSince } from './fixtures.js';

const N = Number(process.argv[2] ?? 30_000);
const K = Number(process.argv[3] ?? 5);
const c = makeCluster(N, 10);
const host = new FakeHost();
// syncPeriod 1 s: a budget of 100 ms for the reading in turn, so what the check costs beside it shows.
// (The runner's own timer never fires: the checks are called here.)
const op = new Operator({ ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 1 }, {
  ipvs: new FakeIpvs(), vips: new FakeVipLink(), iptables: new IptablesRestore({ run: host.run }),
  events: { report: async () => undefined }, status: { write: async () => undefined }, log: () => undefined,
  kernel: { release: '6.1.0', ipvsVersion: '1.2.1', schedulers: new Set(['rr', 'wrr']) }, registry: new PluginRegistry(), nodeName: NODE_NAME,
});
const keepAlive = setInterval(() => undefined, 60_000);
feedCluster(op, c);
await op.sync(); // the full first sync; the runner is not started (no timer of its own)
const profile = process.argv.includes('--profile') ? new Session() : undefined;
const post = (method: string, params?: object) => new Promise<unknown>((resolve, reject) =>
  profile!.post(method, params ?? {}, (e, r) => (e ? reject(e) : resolve(r))));
if (profile) {
  profile.connect();
  await post('Profiler.enable');
  await post('Profiler.start');
}
const checks: number[] = [];
for (let k = 0; k < K; k++) {
  const t = process.hrtime.bigint();
  await op.sync({ periodic: true, retry: false });
  checks.push(Math.round(msSince(t)));
}
if (profile) {
  const { profile: p } = await post('Profiler.stop') as { profile: object };
  writeFileSync('host-periodic.cpuprofile', JSON.stringify(p));
}
clearInterval(keepAlive);
console.log(JSON.stringify({ services: N, periodicSyncMs: checks, ops: op.last!.ops }));
