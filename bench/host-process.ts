// Host-side part of `npm run bench`: the memory of the real operator process (dist/src/cli/main.js
// run --dry-run) at N Services x E endpoints, with either source:
// - kube: this process runs the fake API server (test/support/fake-apiserver.ts, real HTTP)
//   holding the Node, N Services and N EndpointSlices; the operator's client-node informers list
//   and watch it as they would a real one;
// - files: a YAML directory (100 Services per file, Service + EndpointSlice each).
// The host has no IPVS: the dry run plans against an empty table and keeps what it "wrote" (one
// table, as the kernel would hold it), printing the ops to stdout (discarded here). iptables is off
// (--no-iptables): the dry run would run iptables-save on the host. Once /readyz answers (the first
// sync ended), SIGUSR2 makes bench/mem-probe.js (preloaded) collect garbage and write
// process.memoryUsage() + v8.getHeapStatistics(); VmRSS and VmHWM (peak) come from /proc. Three
// minutes later, past its periodic syncs and its helper thread's end (idle), the same again: `idle`.
// With --real (in the lab VM, as root: `node dist/lab/cli.js run -- node dist/bench/host-process.js
// kube 10000 10 --real`) the operator programs the kernel as a node does (no dry run, the iptables
// path on): the process a node runs, without the dry run's table.
// With --restart (and --real) a first operator programs the node and stops (SIGTERM); the figures
// are then a second one's, over the programmed node: its ready time and memory, peak included.
// Prints one JSON object on stdout. Figures only: nothing here is asserted.
// Run: node dist/bench/host-process.js kube|files [services] [endpoints] [--snapshot FILE] [--real] [--restart]
//        [--node-flags '--max-semi-space-size=2 ...': given to the operator's node]
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { FakeApiServer } from '../test/support/fake-apiserver.js';
import { IDLE_MS, THREAD_NAME } from '../src/util/helper-thread.js';
import { NODE_NAME, makeCluster, msSince, progress } from './fixtures.js';

const kind = process.argv[2];
if (kind !== 'kube' && kind !== 'files') throw new Error('usage: host-process.js kube|files [services] [endpoints] [--snapshot FILE]');
const N = Number(process.argv[3] ?? 10_000);
const E = Number(process.argv[4] ?? 10);
const snapAt = process.argv.indexOf('--snapshot');
const snapshot = snapAt > 0 ? process.argv[snapAt + 1] : undefined;
const flagsAt = process.argv.indexOf('--node-flags');
const nodeFlags = flagsAt > 0 ? (process.argv[flagsAt + 1] ?? '').split(' ').filter(Boolean) : [];
const real = process.argv.includes('--real');
const restart = real && process.argv.includes('--restart');
const PER_FILE = 100;
const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const PROBE = fileURLToPath(new URL('./mem-probe.js', import.meta.url));

const work = mkdtempSync(join(tmpdir(), 'ipvsop-mem-'));
const cluster = makeCluster(N, E);
let api: FakeApiServer | undefined;
let sourceArgs: string[];
if (kind === 'kube') {
  api = await FakeApiServer.start();
  api.put('nodes', cluster.node);
  for (let i = 0; i < N; i++) {
    api.put('services', cluster.services[i]!);
    api.put('endpointslices', cluster.slices[i]!);
  }
  const kubeconfig = join(work, 'kubeconfig');
  writeFileSync(kubeconfig, stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'fake',
    clusters: [{ name: 'fake', cluster: { server: api.url, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'bench', user: {} }],
    contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'bench' } }],
  }));
  sourceArgs = ['--source', 'kube', '--kubeconfig', kubeconfig];
} else {
  const dir = join(work, 'manifests');
  mkdirSync(dir);
  writeFileSync(join(dir, 'node.yaml'), stringify(cluster.node));
  for (let f = 0; f * PER_FILE < N; f++) {
    const docs: object[] = [];
    for (let i = f * PER_FILE; i < Math.min(N, (f + 1) * PER_FILE); i++) docs.push(cluster.services[i]!, cluster.slices[i]!);
    writeFileSync(join(dir, `svc-${String(f).padStart(4, '0')}.yaml`), docs.map((d) => stringify(d)).join('---\n'));
  }
  sourceArgs = ['--source', `files:${dir}`];
}

const port = await new Promise<number>((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const a = s.address();
    s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
  });
});
const probeOut = join(work, 'probe.json');
const launch = () => spawn(process.execPath, [...nodeFlags, '--expose-gc', '--import', PROBE, CLI, 'run', ...sourceArgs, '--node-name', NODE_NAME,
  ...(real ? [] : ['--dry-run', '--no-iptables']), '--metrics-addr', `127.0.0.1:${port}`, '--state-dir', join(work, 'state'), '--log-level', 'warn'], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: { ...process.env, IPVSOP_MEM_PROBE: probeOut, ...(snapshot ? { IPVSOP_HEAP_SNAPSHOT: snapshot } : {}) },
});
const ready = async (c: ReturnType<typeof launch>, since: bigint): Promise<number> => {
  for (;;) {
    if (c.exitCode !== null) throw new Error(`operator exited with ${c.exitCode}`);
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
    if (ok) return msSince(since);
    if (msSince(since) > 1_800_000) throw new Error('operator not ready within 30 min');
    await new Promise((r) => setTimeout(r, 200));
  }
};
let firstReadyMs: number | undefined;
if (restart) {
  const first = launch();
  const gone = new Promise((r) => first.once('exit', r));
  try {
    firstReadyMs = await ready(first, process.hrtime.bigint());
    progress(`${kind}: the first operator ready after ${(firstReadyMs / 1000).toFixed(1)} s; restarting`);
  } finally {
    first.kill('SIGTERM');
    await gone;
  }
}
const t0 = process.hrtime.bigint();
const child = launch();
const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
const status = () => {
  const text = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const kb = (k: string) => Number(/(\d+) kB/.exec(text.split('\n').find((l) => l.startsWith(`${k}:`)) ?? '')?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
};
/** How long after the first probe the second is taken (`idle`): two and a half minutes past IDLE_MS. */
const SETTLE_MS = IDLE_MS + 150_000;
/** The probe's figures: it collects garbage and writes them on SIGUSR2 (bench/mem-probe.ts). */
const memoryProbe = async () => {
  rmSync(probeOut, { force: true });
  child.kill('SIGUSR2');
  for (let i = 0; !existsSync(probeOut); i++) {
    if (i > 3000) throw new Error('no answer from the memory probe');
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 200)); // the file is written in one call; let it land
  return JSON.parse(readFileSync(probeOut, 'utf8')) as {
    memory: NodeJS.MemoryUsage; heap: { used_heap_size: number; total_heap_size: number };
    spaces: Record<string, { size: number; used: number }>;
  };
};
/** The operator's OS threads named as its helper thread. */
const helperThreads = () => readdirSync(`/proc/${child.pid}/task`).filter((tid) => {
  try {
    return readFileSync(`/proc/${child.pid}/task/${tid}/comm`, 'utf8').trim() === THREAD_NAME;
  } catch {
    return false; // a thread that ended meanwhile
  }
}).length;
try {
  const readyMs = await ready(child, t0);
  progress(`${kind}: ready after ${(readyMs / 1000).toFixed(1)} s`);
  const rssReady = status();
  const probe = await memoryProbe();
  const after = status();
  const mb = (b: number) => Math.round((b / 2 ** 20) * 10) / 10;
  // The process as it runs between full syncs, SETTLE_MS after the first probe: its periodic syncs
  // ran meanwhile, and its helper thread (the listing, the VIP batches) ended once it had had no
  // job for IDLE_MS (src/util/helper-thread.ts); when that happened is noted.
  const helperSeen = helperThreads() > 0;
  const tHelper = process.hrtime.bigint();
  let helperEndedMs: number | undefined;
  // Its RSS as it runs (no collection forced), every 2 s of the last two minutes: a single figure
  // lands in a sync or between two, whose live data differ by 10-25 MB at 10 000 Services.
  const rssSamples: number[] = [];
  for (let at = 0; msSince(tHelper) < SETTLE_MS; await new Promise((r) => setTimeout(r, 250))) {
    if (helperSeen && helperEndedMs === undefined && helperThreads() === 0) helperEndedMs = msSince(tHelper);
    if (msSince(tHelper) >= SETTLE_MS - 120_000 && msSince(tHelper) >= at) {
      rssSamples.push(status().rss);
      at = msSince(tHelper) + 2000;
    }
  }
  rssSamples.sort((a, b) => a - b);
  const idleProbe = await memoryProbe();
  const idle = status();
  const rs = N * E;
  console.log(JSON.stringify({
    source: kind, mode: real ? 'real kernel' : 'dry run', ...(restart ? { restartOf: { firstReadyMs } } : {}), nodeFlags: nodeFlags.join(' '), services: N, endpointsPerService: E, readyMs,
    rssMb: mb(after.rss), rssAtReadyMb: mb(rssReady.rss), peakRssMb: mb(after.hwm),
    heapUsedMb: mb(probe.memory.heapUsed), heapTotalMb: mb(probe.memory.heapTotal), externalMb: mb(probe.memory.external),
    arrayBuffersMb: mb(probe.memory.arrayBuffers),
    // RSS split: anonymous (heap, malloc, JIT code) and file-backed (the node binary's pages).
    rssAnonMb: mb(after.anon), rssFileMb: mb(after.file),
    // Each V8 space's size (used) in MB after the probe's GC: new_space is the young generation.
    spacesMb: Object.fromEntries(Object.entries(probe.spaces).map(([k, v]) => [k, `${mb(v.size)} (${mb(v.used)})`])),
    // Whole-process figures divided out (the ~50 MB of an idle node process included).
    rssBytesPerService: Math.round(after.rss / N), heapBytesPerService: Math.round(probe.memory.heapUsed / N),
    rssBytesPerEndpoint: Math.round(after.rss / rs), heapBytesPerEndpoint: Math.round(probe.memory.heapUsed / rs),
    // SETTLE_MS later (helperEndedAfterMs: when its helper thread was first seen gone, if it was);
    // rssMedianMb etc.: VmRSS every 2 s over the two minutes before, as it ran.
    settleMs: SETTLE_MS, helperThreadSeen: helperSeen, ...(helperEndedMs === undefined ? {} : { helperEndedAfterMs: Math.round(helperEndedMs) }),
    idle: { rssMb: mb(idle.rss), rssAnonMb: mb(idle.anon), rssFileMb: mb(idle.file),
      rssMedianMb: mb(rssSamples[rssSamples.length >> 1]!), rssMinMb: mb(rssSamples[0]!),
      rssMaxMb: mb(rssSamples[rssSamples.length - 1]!), rssSamples: rssSamples.length,
      heapUsedMb: mb(idleProbe.memory.heapUsed), heapTotalMb: mb(idleProbe.memory.heapTotal) },
  }));
} finally {
  child.kill('SIGTERM');
  await exited;
  if (real) {
    // What the run programmed goes, as a node's `cleanup` removes it (the VM is discarded anyway).
    await new Promise((r) => spawn(process.execPath, [CLI, 'cleanup', '--state-dir', join(work, 'state')], { stdio: 'ignore' }).once('exit', r));
  }
  await api?.close();
  rmSync(work, { recursive: true, force: true });
}
