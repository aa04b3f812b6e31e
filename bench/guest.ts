// The in-VM half of `npm run bench` (run by bench/run.ts through the lab VM; needs root and IPVS):
// for each size, an in-process Operator on the real kernel — NetlinkIpvs, RtnlVipLink,
// IptablesRestore, the production classes — fed the SourceEvents a source delivers, then the C
// floor in the same guest run: `ipvsadm -R` loading the identical table (saved with `ipvsadm -Sn`),
// `ip -batch` binding the same addresses, `ipset restore` and `iptables-restore` of the payloads the
// operator applied.
//
//   node dist/bench/guest.js OUT.json SIZES CHANGES [ENDPOINTS]
//
// Why in-process and not `ipvs-operator run --source files:DIR`: the files source re-reads and
// re-parses the whole directory on every change (O(cluster), measured separately on the host by
// bench/run.ts), and KubeSource needs an API server. Both end in Operator.handle(SourceEvent),
// which is where this bench feeds the events, one per changed object, as an informer does.
// Latency is from handle() to the end of the sync (status written), with minSyncPeriod 0: the
// runner's minimum interval (the "debounce", default 1 s) is excluded and reported separately.
import type { Log } from '../src/util/log.js';
import type { ListingReader } from '../src/ipvs/proc.js';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { PerformanceObserver, constants as perfConstants, performance } from 'node:perf_hooks';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { projectRoot } from '../lab/paths.js';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../plugins/index.js';
import { buildDesired } from '../src/desired/state.js';
import { type Desired } from '../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../src/config/types.js';
import { IptablesRestore } from '../src/iptables/restore.js';
import { NetlinkIpvs } from '../src/ipvs/client.js';
import type { IpvsClient, OpResult, ReadOptions } from '../src/ipvs/types.js';
import type { IpvsError } from '../src/ipvs/errors.js';
import type { IpvsOp, RealServer, VirtualServer } from '../src/model/ipvs.js';
import type { IptablesSync } from '../src/iptables/sync.js';
import { applySysctls, ensureIpvsModule, ipvsSysctls, probeSchedulers } from '../src/node/kernel.js';
import { Metrics } from '../src/metrics/metrics.js';
import { Operator } from '../src/sync/operator.js';
import { RtnlVipLink, type VipLink } from '../src/rtnl/vips.js';
import type { NodeStatus, SourceEvent } from '../src/source/types.js';
import { CHUNK } from '../src/netlink/socket.js';
import { NETLINK_GENERIC, NETLINK_ROUTE, type ReplayResult, linkIndex, recordSends, replay, replayerPath, retargetAddressAdds, retargetFamily, toolPath } from './replay.js';
import { describeStalls, estimationOn, probeStalls, setEstimation } from './estimator.js';
import { NODE_NAME, formatPhases, isNodePort, isWeighted, makeBenchService, makeBenchSlice, makeCluster, msSince, percentile, podName, progress } from './fixtures.js';
import type { SyncPhases } from '../src/sync/outcome.js';
import { exposedCollector } from '../src/util/gc.js';
import { getHeapSpaceStatistics } from 'node:v8';

const [out = '.cache/bench/guest.json', sizesArg = '1000,5000,10000', changesArg = '200', eArg = '10'] = process.argv.slice(2);
const SIZES = sizesArg.split(',').map(Number);
const CHANGES = Number(changesArg);
const E = Number(eArg);
const SMALL_CHANGES = Math.min(CHANGES, 30);
/** Restarts over the programmed table at the largest size (the median is reported). */
const RESTARTS = 3;
const IFACE = defaultProxyConfig.interfaceName;
const config: ProxyConfig = { ...defaultProxyConfig, minSyncPeriod: 0, syncPeriod: 3600 };
/** Built by bench/run.ts on the host; the guest sees the project at the same path. */
const REPLAYER = replayerPath(projectRoot);
/** The probe of the kernel's stalls (bench/estimator.ts): each CPU busy this long, gaps over this many ms. */
const STALL_PROBE = toolPath(projectRoot, 'stall-probe');
const STALL_PROBE_S = 8;
const STALL_THRESHOLD_MS = 10;
/** The kernel floor's datagram sizes: the operator's own (CHUNK), and one 8 times larger. */
const REPLAY_PER_DATAGRAM = [CHUNK, 8 * CHUNK];

/** Counts and times what the operator asks of IPVS. */
class MeasuredIpvs implements IpvsClient {
  ops = 0;
  applyCalls = 0;
  applyMs = 0;
  dumps = 0;
  /** GET_SERVICE lookups (the drift check in turn, when one dump of every virtual server is past its budget). */
  gets = 0;
  dumpMs = 0;
  /** Reads of the kernel's listing, /proc/net/ip_vs (a full read's real servers where it shows them in full). */
  listings = 0;
  listingMs = 0;
  lastApplyEnd = 0n;
  /** When the first kernel read (a dump or the listing) began and the last one ended, and the first write began (0n: none since reset). */
  firstReadAt = 0n;
  lastReadEnd = 0n;
  firstApplyAt = 0n;
  /** Replaced when IPVS is loaded again (freshIpvs). */
  constructor(public inner: NetlinkIpvs) {}
  reset(): void {
    this.ops = 0; this.applyCalls = 0; this.applyMs = 0; this.dumps = 0; this.gets = 0; this.dumpMs = 0;
    this.listings = 0; this.listingMs = 0; this.firstReadAt = 0n; this.lastReadEnd = 0n; this.firstApplyAt = 0n;
  }
  /** A read of the kernel, its start and end noted. */
  private async read<T>(p: () => Promise<T>): Promise<T> {
    if (!this.firstReadAt) this.firstReadAt = process.hrtime.bigint();
    try { return await p(); } finally { this.lastReadEnd = process.hrtime.bigint(); }
  }
  info() { return this.inner.info(); }
  // Every read passes the caller's ReadOptions on: dropped, the bench would time the counters' decode the sync skips.
  async listVirtualServers(opts?: ReadOptions): Promise<VirtualServer[]> {
    const t = process.hrtime.bigint();
    try { return await this.read(() => this.inner.listVirtualServers(opts)); } finally { this.dumps++; this.dumpMs += msSince(t); }
  }
  async listRealServers(vs: VirtualServer, opts?: ReadOptions): Promise<RealServer[]> {
    const t = process.hrtime.bigint();
    try { return await this.read(() => this.inner.listRealServers(vs, opts)); } finally { this.dumps++; this.dumpMs += msSince(t); }
  }
  async listRealServersMany(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<RealServer[] | IpvsError>> {
    const t = process.hrtime.bigint();
    try { return await this.read(() => this.inner.listRealServersMany(vss, opts)); } finally { this.dumps += vss.length; this.dumpMs += msSince(t); }
  }
  /** The listing's reads are timed as they are awaited (the dumps run beside them). */
  async listing(): Promise<ListingReader | undefined> {
    const t = process.hrtime.bigint();
    const reader = await this.inner.listing().finally(() => { this.listings++; this.listingMs += msSince(t); });
    if (!reader) return undefined;
    const timed = async <T>(p: Promise<T>): Promise<T> => {
      const t1 = process.hrtime.bigint();
      try { return await p; } finally { this.listingMs += msSince(t1); }
    };
    return { next: () => timed(this.read(() => reader.next())), close: () => timed(reader.close()) };
  }
  async getVirtualServers(vss: readonly VirtualServer[], opts?: ReadOptions): Promise<Array<VirtualServer | IpvsError>> {
    const t = process.hrtime.bigint();
    try { return await this.inner.getVirtualServers(vss, opts); } finally { this.gets += vss.length; this.dumpMs += msSince(t); }
  }
  addVirtualServer(vs: VirtualServer) { return this.inner.addVirtualServer(vs); }
  updateVirtualServer(vs: VirtualServer) { return this.inner.updateVirtualServer(vs); }
  deleteVirtualServer(vs: VirtualServer) { return this.inner.deleteVirtualServer(vs); }
  addRealServer(vs: VirtualServer, rs: RealServer) { return this.inner.addRealServer(vs, rs); }
  updateRealServer(vs: VirtualServer, rs: RealServer) { return this.inner.updateRealServer(vs, rs); }
  deleteRealServer(vs: VirtualServer, rs: RealServer) { return this.inner.deleteRealServer(vs, rs); }
  getTimeouts() { return this.inner.getTimeouts(); }
  setTimeouts(t: Parameters<IpvsClient['setTimeouts']>[0]) { return this.inner.setTimeouts(t); }
  zero(vs?: VirtualServer) { return this.inner.zero(vs); }
  flush() { return this.inner.flush(); }
  async apply(ops: readonly IpvsOp[]): Promise<OpResult[]> {
    const t = process.hrtime.bigint();
    if (!this.firstApplyAt) this.firstApplyAt = t;
    try { return await this.inner.apply(ops); } finally {
      this.ops += ops.length; this.applyCalls++; this.applyMs += msSince(t); this.lastApplyEnd = process.hrtime.bigint();
    }
  }
  close() { this.inner.close(); }
}

/** The collections from now until stop(); within(): their time (ms), count and major ones in a window of performance.now(). */
function watchCollections() {
  const gcs: Array<{ start: number; end: number; major: boolean }> = [];
  const observer = new PerformanceObserver((list) => {
    for (const g of list.getEntries()) {
      const major = (g as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR;
      gcs.push({ start: g.startTime, end: g.startTime + g.duration, major });
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    /** Stops watching, once the observer had its last entries (they come on a later turn). */
    async stop(): Promise<void> {
      await new Promise((r) => setImmediate(r));
      observer.disconnect();
    },
    within(start: number, end: number): { ms: number; collections: number; major: number } {
      const during = gcs.filter((g) => g.end > start && g.start < end);
      return { ms: during.reduce((sum, g) => sum + Math.min(g.end, end) - Math.max(g.start, start), 0),
        collections: during.length, major: during.filter((g) => g.major).length };
    },
  };
}

/**
 * A sync's phases from `t0` (ms), by the kernel calls: before the first read (the events and the
 * desired state), the reads (first start to last end), and the first write after t0.
 */
function phases(ipvs: MeasuredIpvs, t0: bigint): { beforeReadMs?: number; readMs?: number; firstWriteMs?: number } {
  const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;
  return {
    ...(ipvs.firstReadAt ? { beforeReadMs: ms(t0, ipvs.firstReadAt), readMs: ms(ipvs.firstReadAt, ipvs.lastReadEnd) } : {}),
    ...(ipvs.firstApplyAt ? { firstWriteMs: ms(t0, ipvs.firstApplyAt) } : {}),
  };
}

class MeasuredVips implements VipLink {
  ms = 0;
  added = 0;
  constructor(readonly inner: RtnlVipLink) {}
  private async timed<T>(f: () => Promise<T>): Promise<T> {
    const t = process.hrtime.bigint();
    try { return await f(); } finally { this.ms += msSince(t); }
  }
  ensure(name: string) { return this.timed(() => this.inner.ensure(name)); }
  list(name: string) { return this.timed(() => this.inner.list(name)); }
  add(name: string, a: string) { this.added++; return this.timed(() => this.inner.add(name, a)); }
  remove(name: string, a: string) { return this.timed(() => this.inner.remove(name, a)); }
  addMany(name: string, as: readonly string[]) { this.added += as.length; return this.timed(() => this.inner.addMany(name, as)); }
  removeMany(name: string, as: readonly string[]) { return this.timed(() => this.inner.removeMany(name, as)); }
  prepare(count: number) { this.inner.prepare(count); }
}

class MeasuredIptables implements IptablesSync {
  ms = 0;
  calls = 0;
  lastDesired: Desired | undefined;
  constructor(readonly inner: IptablesRestore) {}
  async sync(d: Desired, c: ProxyConfig): Promise<void> {
    this.lastDesired = d;
    const t = process.hrtime.bigint();
    try { await this.inner.sync(d, c); } finally { this.calls++; this.ms += msSince(t); }
  }
  driftMs = 0;
  /**
   * The read-only check a periodic sync makes before deciding to apply the path again. Its signal
   * is passed on, as the operator's own path gets it: a change that arrives ends the check.
   */
  async drift(d: Desired, c: ProxyConfig, signal?: AbortSignal): Promise<string | undefined> {
    const t = process.hrtime.bigint();
    try { return await this.inner.drift(d, c, signal); } finally { this.driftMs += msSince(t); }
  }
  cleanup() { return this.inner.cleanup(); }
  prepare() { return this.inner.prepare(); }
}

/** Resolves on the next node status write (the end of a sync, success or failure). */
class StatusWaiter {
  private waiters: Array<(s: NodeStatus) => void> = [];
  readonly sink = { write: async (s: NodeStatus) => { const w = this.waiters; this.waiters = []; for (const f of w) f(s); } };
  next(): Promise<NodeStatus> {
    return new Promise((r) => this.waiters.push(r));
  }
}

function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 30, ...(input !== undefined ? { input } : {}) });
}

/**
 * A kernel IPVS state with an empty destination trash: the table flushed, every ip_vs module
 * unloaded and loaded again (schedulers and sysctls as at start), and a new client.
 *
 * Why not a flush alone: IPVS moves every deleted real server to a per-netns trash list
 * (__ip_vs_del_dest), and every add-dest walks that whole list for one to reuse
 * (ip_vs_trash_get_dest, under a spinlock) before it looks anywhere else. The timer that empties
 * the trash is armed only by a delete that finds it empty and is not a flush (cleanup), so after
 * a flush of N real servers each later add costs O(N) until the module goes: loading a table of
 * N after flushing it costs O(N^2). Unloading is the only way to empty it at once. Each
 * measurement of writing a whole table (the first sync, the kernel floor, `ipvsadm -R`) starts
 * from here, so none pays for what an earlier one left.
 */
async function freshIpvs(ipvs: MeasuredIpvs, schedulerNames: readonly string[]): Promise<NetlinkIpvs> {
  await ipvs.inner.flush();
  ipvs.inner.close();
  const loaded = readFileSync('/proc/modules', 'utf8').split('\n').map((l) => l.split(' ')[0] ?? '')
    .filter((m) => m.startsWith('ip_vs'));
  if (!loaded.includes('ip_vs')) throw new Error('ip_vs is not a loaded module: its trash cannot be emptied');
  // Schedulers (and any other ip_vs_* module) depend on ip_vs: they go first.
  sh('rmmod', [...loaded.filter((m) => m !== 'ip_vs'), 'ip_vs']);
  if (!(await ensureIpvsModule())) throw new Error('ip_vs did not load again');
  await probeSchedulers(schedulerNames);
  for (const p of applySysctls(ipvsSysctls(sh('uname', ['-r']).trim()))) progress(`sysctl: ${p}`);
  ipvs.inner = await NetlinkIpvs.open();
  return ipvs.inner;
}

const registry = new PluginRegistry();
/**
 * V8's collector, as the run wires it (src/cli/run.ts): the young generation emptied at the end of
 * each first sync. BENCH_COLLECT=0 leaves it out (to measure what it does).
 */
const collect = process.env.BENCH_COLLECT === '0' ? undefined : exposedCollector();
/** The operator's log: only the lines on the first sync's run of a change's code and its collection (src/sync/rehearsal.ts), printed. */
const rehearsalLog: Log = (_level, message, fields) => {
  if (message.includes('change\'s code once') || message.includes('young generation')) progress(`operator: ${message} ${JSON.stringify(fields)}`);
};

async function main(): Promise<void> {
  // The operator's timers and the netlink socket are unref'd (a daemon keeps itself alive with its
  // HTTP server): without this, node would exit while the bench awaits a sync.
  const keepAlive = setInterval(() => undefined, 60_000);
  if (!(await ensureIpvsModule())) throw new Error('no IPVS in this kernel');
  const schedulerNames = [...new Set(registry.names().map((n) => registry.get(n)!.kernelScheduler))];
  const schedulers = await probeSchedulers(schedulerNames);
  let nl = await NetlinkIpvs.open();
  const info = await nl.info();
  for (const p of applySysctls(ipvsSysctls(sh('uname', ['-r']).trim()))) progress(`sysctl: ${p}`);
  const ipvs = new MeasuredIpvs(nl);
  const rtnl = new RtnlVipLink();
  const vips = new MeasuredVips(rtnl);
  const restore = new IptablesRestore();
  const iptables = new MeasuredIptables(restore);
  const kernel = { release: sh('uname', ['-r']).trim(), ipvsVersion: info.version, schedulers };
  const backend = await restore.backend();
  // The kernel modules of the iptables path (nf_tables' expressions, xt_set, ip_set's types) load
  // on their first use: at the first size that cost the operator about 2 s more under TCG (its
  // iptables step at 1 000 Services: 3.70 s with them unloaded, 1.37 s loaded, 2026-11-26). The C
  // floor, run after the operator, always found them loaded. So both run with them loaded: a
  // warm-up sync of 10 Services, then its cleanup. A node pays that load once per boot.
  const warm = makeCluster(10, E);
  const snapshot = { services: warm.services, endpointSlices: warm.slices, node: warm.node, nodeName: NODE_NAME };
  await restore.sync(buildDesired(snapshot, config, registry), config);
  await restore.cleanup();
  const results: Record<string, unknown>[] = [];

  for (const [si, n] of SIZES.entries()) {
    const last = si === SIZES.length - 1;
    progress(`--- ${n} Services x ${E} endpoints: cleaning the kernel (IPVS loaded again: an empty trash)`);
    nl = await freshIpvs(ipvs, schedulerNames);
    await iptables.cleanup();
    await rtnl.deleteLink(IFACE);
    const cluster = makeCluster(n, E);
    const services = new Map<number, V1Service>(cluster.services.map((s, i) => [i, s]));
    const slices = new Map<number, V1EndpointSlice>(cluster.slices.map((s, i) => [i, s]));
    const endpoints = new Map<number, number[]>(cluster.slices.map((_, i) => [i, Array.from({ length: E }, (_, j) => j)]));
    const initialEvents = (): SourceEvent[] => [
      { kind: 'node', type: 'upsert', object: cluster.node },
      ...[...services.values()].map((object) => ({ kind: 'service', type: 'upsert', object }) as SourceEvent),
      ...[...slices.values()].map((object) => ({ kind: 'endpointslice', type: 'upsert', object }) as SourceEvent),
    ];

    // ---- full sync from empty
    const status = new StatusWaiter();
    const deps = {
      ipvs, vips, iptables, events: { report: async () => undefined }, status: status.sink, log: rehearsalLog, kernel, registry,
      nodeName: NODE_NAME, metrics: new Metrics(), ...(collect ? { collect } : {}),
    };
    ipvs.reset(); vips.ms = 0; vips.added = 0; iptables.ms = 0; iptables.calls = 0;
    progress(`full sync of ${n} Services from empty (operator)`);
    const events = initialEvents();
    const t0 = process.hrtime.bigint();
    // As the run does (src/cli/run.ts): the iptables backend detected while the source lists (a
    // no-op after the first size: the IptablesRestore is the same).
    void iptables.prepare();
    const op = new Operator(config, deps);
    for (const e of events) op.handle(e);
    const first = status.next();
    // Every message the first sync writes (IPVS over generic netlink, addresses over rtnetlink), for the kernel floor.
    const recording = recordSends();
    const recordedFamily = nl.familyId!;
    op.start();
    await first;
    const totalMs = msSince(t0);
    recording.stop();
    // What the first sync wrote (the changes below move it on): what the kernel floor's replay must write.
    const firstTable = sh('ipvsadm', ['-Sn']);
    const ipvsDoneMs = Number(ipvs.lastApplyEnd - t0) / 1e6;
    if (op.last?.error) throw new Error(`full sync failed: ${op.last.error}`);
    // The exact payloads the operator's iptables path applied, and the VIPs it bound: the C floor's input.
    const payloads = restore.last;
    if (!payloads) throw new Error('the first sync applied no iptables payload');
    const vipList = await rtnl.list(IFACE);
    const firstDesired = iptables.lastDesired!;
    const full = {
      services: n, virtualServers: op.last!.ops ? undefined : 0, ops: op.last!.ops, totalMs, ipvsProgrammedMs: ipvsDoneMs,
      fromUs: Number(t0 / 1000n), ...phases(ipvs, t0),
      applyMs: ipvs.applyMs, vipsMs: vips.ms, vipsAdded: vips.added, iptablesMs: iptables.ms,
      rssMb: process.memoryUsage().rss / 2 ** 20,
    };
    progress(`operator: ${full.ops} ops, IPVS programmed after ${(ipvsDoneMs / 1000).toFixed(1)} s (apply ${(ipvs.applyMs / 1000).toFixed(1)} s), VIPs ${(vips.ms / 1000).toFixed(1)} s, iptables ${(iptables.ms / 1000).toFixed(1)} s, total ${(totalMs / 1000).toFixed(1)} s`);

    // ---- single-endpoint changes through Operator.handle
    const k = last ? CHANGES : SMALL_CHANGES;
    let rv = 1;
    const used = new Set<number>();
    const pick = (seed: number, wantWeighted: boolean): number => {
      let i = (seed * 7919) % n;
      while (used.has(i) || isWeighted(i) !== wantWeighted) i = (i + 1) % n;
      used.add(i);
      return i;
    };
    // `count` changes, the c-th on the Service pick(seedFrom + c) finds. The collections during the
    // changes, to tell a slow change that waited for one from one that ran cold code (the first
    // changes) or waited for the kernel.
    const runChanges = async (count: number, seedFrom: number) => {
      const changes: Array<{ kind: string; ops: number; virtualServers: number; latencyMs: number; ipvsMs: number; syncMs: number; phasesMs: SyncPhases; iptablesMs: number; dumps: number; busyMs: number }> = [];
      const gcs = watchCollections();
      const windows: Array<{ start: number; end: number }> = [];
      for (let c = 0; c < count; c++) {
        const kind = (['add', 'remove', 'weight'] as const)[c % 3]!;
        const i = pick(seedFrom + c, kind === 'weight');
        let e: SourceEvent;
        if (kind === 'weight') {
          const s = makeBenchService(i, `c${++rv}`, [{ name: podName(i, 0), weight: 5 }]);
          services.set(i, s);
          e = { kind: 'service', type: 'upsert', object: s };
        } else {
          const js = endpoints.get(i)!;
          const next = kind === 'add' ? [...js, E] : js.slice(1);
          endpoints.set(i, next);
          const s = makeBenchSlice(i, `c${++rv}`, next, E);
          slices.set(i, s);
          e = { kind: 'endpointslice', type: 'upsert', object: s };
        }
        ipvs.reset(); iptables.ms = 0;
        const done = status.next();
        const tc = process.hrtime.bigint();
        const pc = performance.now();
        const loop = performance.eventLoopUtilization();
        op.handle(e);
        await done;
        const latencyMs = msSince(tc);
        // How long the event loop ran code meanwhile: a change that waited with it idle waited for
        // a timer or the kernel, one that waited with it busy for this thread.
        const busyMs = performance.eventLoopUtilization(loop).active;
        windows.push({ start: pc, end: performance.now() });
        changes.push({ kind, ops: op.last!.ops, virtualServers: kind !== 'weight' && isNodePort(i) ? 2 : 1, latencyMs, ipvsMs: Number(ipvs.lastApplyEnd - tc) / 1e6, syncMs: op.last!.durationMs, phasesMs: op.last!.phasesMs, iptablesMs: iptables.ms, dumps: ipvs.dumps, busyMs });
        if ((c + 1) % 20 === 0 || c + 1 === count) progress(`  ${c + 1}/${count} changes, last: ${kind} ${op.last!.ops} op(s) in ${latencyMs.toFixed(1)} ms`);
      }
      await gcs.stop();
      const slowest = changes.map((x, i) => {
        const gc = gcs.within(windows[i]!.start, windows[i]!.end);
        return { index: i, kind: x.kind, latencyMs: x.latencyMs, syncMs: x.syncMs, phasesMs: x.phasesMs, ipvsMs: x.ipvsMs, iptablesMs: x.iptablesMs, busyMs: x.busyMs,
          gcMs: gc.ms, collections: gc.collections, major: gc.major > 0 };
      }).sort((a, b) => b.latencyMs - a.latencyMs).slice(0, 5);
      // The sync's own duration (from its start: the time before it is the event's and the runner's),
      // the last IPVS write's end and the iptables path's time, to tell where a slow change waited.
      progress(`slowest changes: ${slowest.map((x) => `#${x.index} ${x.kind} ${x.latencyMs.toFixed(1)} ms (sync ${x.syncMs.toFixed(1)}: ${formatPhases(x.phasesMs)}, IPVS done ${x.ipvsMs.toFixed(1)}, iptables ${x.iptablesMs.toFixed(1)}, loop busy ${x.busyMs.toFixed(1)}, GC ${x.gcMs.toFixed(1)} ms${x.major ? ', major' : ''})`).join('; ')}`);
      return { changes, slowest };
    };
    progress(`${k} single-endpoint changes (add, remove, weight) through Operator.handle`);
    // What the next scavenge would copy from: the first changes' collections depend on it.
    const young = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
    if (young) progress(`young generation before the first change: ${(young.space_used_size / 2 ** 20).toFixed(2)} MB used of ${(young.space_size / 2 ** 20).toFixed(1)} MB`);
    const { changes, slowest } = await runChanges(k, 1);
    const lat = changes.map((x) => x.latencyMs);

    // ---- the kernel's rate estimator (bench/estimator.ts), at the largest size: its stalls probed
    // with it on (as a node runs) and off, then the changes again with it off. It is set on again
    // after, whatever happens: the rest of the bench runs as a node does.
    let estimator: Record<string, unknown> | undefined;
    if (last && estimationOn() === true) {
      progress('the kernel\'s rate estimator: its stalls probed with it on, then off; then the changes again with it off');
      const probeOn = await probeStalls(STALL_PROBE, cpus().length, STALL_PROBE_S, STALL_THRESHOLD_MS);
      progress(`estimator on: ${describeStalls(probeOn)}`);
      setEstimation(false);
      try {
        const probeOff = await probeStalls(STALL_PROBE, cpus().length, STALL_PROBE_S, STALL_THRESHOLD_MS);
        progress(`estimator off: ${describeStalls(probeOff)}`);
        const off = await runChanges(k, k + 2);
        const offLat = off.changes.map((x) => x.latencyMs);
        estimator = {
          probeOn, probeOff,
          changesOff: { count: off.changes.length, exactlyOneOp: off.changes.every((x) => x.ops === x.virtualServers),
            p50: percentile(offLat, 50), p99: percentile(offLat, 99), max: Math.max(...offLat), slowest: off.slowest },
        };
      } finally {
        setEstimation(true);
      }
    }

    // ---- the periodic full resync (syncPeriod): a re-read of the whole kernel table, 0 ops expected
    progress(`periodic full resync at ${n} Services`);
    ipvs.reset(); iptables.ms = 0; iptables.driftMs = 0; vips.ms = 0;
    const tp = process.hrtime.bigint();
    await op.sync({ periodic: true, retry: false });
    const periodic = { ms: msSince(tp), ops: op.last!.ops, dumps: ipvs.dumps, dumpMs: ipvs.dumpMs, iptablesMs: iptables.ms, iptablesDriftMs: iptables.driftMs, vipsMs: vips.ms };
    progress(`periodic: ${periodic.ops} ops, ${(periodic.ms / 1000).toFixed(1)} s (${periodic.dumps} dumps ${(periodic.dumpMs / 1000).toFixed(1)} s, iptables ${(periodic.iptablesMs / 1000).toFixed(1)} s)`);

    // ---- the drift check as a node runs it (largest size): syncPeriod 30 s, so one dump of the
    // virtual servers (or, past half the budget, a lookup of each in turn) and real servers read in
    // turn, the whole kept to 3 s. Three checks in a row: the first after the configuration change
    // counts the sets' members once (kept while no set entry changes), the second's budget makes
    // room for what the first spent after its read; the third is the steady state and is judged.
    // Then a change fired while the runner's own periodic sync reads in turn, timed until programmed.
    let driftCheck: Record<string, unknown> | undefined;
    if (last) {
      const syncPeriod = 30;
      progress(`drift check at ${n} Services with syncPeriod ${syncPeriod} s (a config change first: one full resync)`);
      let w = status.next();
      op.handle({ kind: 'config', type: 'upsert', config: { ...config, syncPeriod } });
      await w;
      const checks: Array<{ ms: number; dumps: number; gets: number; dumpMs: number; ops: number; iptablesDriftMs: number; iptablesMs: number }> = [];
      for (let c = 0; c < 3; c++) {
        ipvs.reset(); iptables.driftMs = 0; iptables.ms = 0;
        const td = process.hrtime.bigint();
        await op.sync({ periodic: true, retry: false }); // the runner is idle: its own periodic timer is 30 s away
        checks.push({ ms: msSince(td), dumps: ipvs.dumps, gets: ipvs.gets, dumpMs: ipvs.dumpMs, ops: op.last!.ops, iptablesDriftMs: iptables.driftMs, iptablesMs: iptables.ms });
        const q = checks[c]!;
        progress(`drift check ${c + 1}: ${(q.ms / 1000).toFixed(2)} s, ${q.dumps} dumps, ${q.gets} virtual servers looked up, iptables check ${(q.iptablesDriftMs / 1000).toFixed(2)} s, ${q.ops} ops`);
      }
      const quiet = checks[checks.length - 1]!;
      progress('waiting for the runner\'s own periodic sync');
      // The runner's periodic sync starts 30 s after the config sync ended: once it has read in
      // turn (a dump of the virtual servers and one of real servers, or a lookup and its real
      // servers), an endpoint is added to a Service no change touched yet.
      ipvs.reset(); iptables.driftMs = 0;
      while (ipvs.dumps + ipvs.gets < 2) await new Promise((r) => setTimeout(r, 2));
      const i = pick(k + 1, false);
      const next = [...endpoints.get(i)!, E];
      endpoints.set(i, next);
      const changed = makeBenchSlice(i, `d${++rv}`, next, E);
      slices.set(i, changed); // the restart below starts from the same objects
      const e: SourceEvent = { kind: 'endpointslice', type: 'upsert', object: changed };
      const dumpsBefore = ipvs.dumps;
      w = status.next();
      // The collections while the change waits: a major one of the heap under TCG is the one
      // candidate for a second between the interrupted sync and the change's own (11-29: 1.05 s).
      const gcs = watchCollections();
      const pc = performance.now();
      const tc = process.hrtime.bigint();
      op.handle(e);
      let interrupted: Record<string, unknown> | undefined;
      let eluFrom: ReturnType<typeof performance.eventLoopUtilization> | undefined;
      for (;;) {
        await w;
        if (op.last!.ops > 0) break;
        interrupted = { durationMs: op.last!.durationMs, dumps: ipvs.dumps, dumpsAfterTheChange: ipvs.dumps - dumpsBefore,
          endedAfterTheChangeMs: msSince(tc), iptablesCheckMs: iptables.driftMs, full: op.last!.full,
          syncs: ((interrupted?.syncs as number | undefined) ?? 0) + 1, ...(op.last!.error ? { error: op.last!.error } : {}) };
        // Whether the operator's thread was busy between this sync and the change's own.
        eluFrom = performance.eventLoopUtilization();
        w = status.next();
      }
      const latencyMs = msSince(tc);
      const pEnd = performance.now();
      const elu = eluFrom ? performance.eventLoopUtilization(eluFrom).utilization : undefined;
      await gcs.stop();
      const gc = gcs.within(pc, pEnd);
      // The change's own sync (its duration), and so the time between the two syncs.
      const syncMs = op.last!.durationMs;
      const gapMs = latencyMs - syncMs - ((interrupted?.endedAfterTheChangeMs as number | undefined) ?? 0);
      driftCheck = { syncPeriodS: syncPeriod, budgetMs: 0.1 * syncPeriod * 1000, quiet, checks, interrupted, change: { latencyMs, ops: op.last!.ops, syncMs, gapMs, gc, ...(elu === undefined ? {} : { busyAfterTheCheck: elu }) } };
      progress(`a change during the runner's periodic sync: programmed after ${latencyMs.toFixed(1)} ms (${op.last!.ops} op); the check read ${String(interrupted?.dumpsAfterTheChange ?? '?')} dump(s) after the change arrived` +
        (interrupted ? `; that sync ended ${(interrupted.endedAfterTheChangeMs as number).toFixed(1)} ms after it (its iptables check ${(interrupted.iptablesCheckMs as number).toFixed(0)} ms in all)` : '') +
        `; the change's own sync took ${syncMs} ms, ${gapMs.toFixed(0)} ms went between the two; GC ${gc.ms.toFixed(1)} ms in ${gc.collections} collection(s), ${gc.major} major` +
        (elu === undefined ? '' : `; the thread busy ${(100 * elu).toFixed(0)}% from the check's end to the change's programming`));
    }
    await op.stop();

    // The table after the changes: what the C floor loads, and the restart below finds.
    const saved = sh('ipvsadm', ['-Sn']);
    const lines = saved.split('\n').filter(Boolean).length;

    // ---- the kernel floor: the operator's recorded messages replayed by bench/nl-replay.c (pre-encoded,
    // many per sendmsg(), ACKs read many per recvmmsg()), each replay from IPVS loaded again (untimed;
    // the family id in the messages set to its new one) and checked to leave what the first sync left; then the address adds on the operator's link, its
    // addresses flushed untimed. ipset and iptables keep their C restore (below) as their floor.
    progress(`kernel floor: replaying the operator's recorded messages`);
    const genl = recording.messages(NETLINK_GENERIC);
    const ipvsReplays: ReplayResult[] = [];
    for (const per of REPLAY_PER_DATAGRAM) {
      nl = await freshIpvs(ipvs, schedulerNames);
      ipvsReplays.push(replay(REPLAYER, join(tmpdir(), 'bench-genl.bin'), NETLINK_GENERIC, retargetFamily(genl, recordedFamily, nl.familyId!), per));
      if (sh('ipvsadm', ['-Sn']) !== firstTable) throw new Error(`the IPVS replay (${per} per datagram) did not write the table the operator wrote`);
    }
    sh('ip', ['addr', 'flush', 'dev', IFACE]);
    const index = linkIndex(IFACE);
    if (index === undefined) throw new Error(`no link ${IFACE} after the operator's sync`);
    const adds = retargetAddressAdds(recording.messages(NETLINK_ROUTE), index);
    const vipReplay = replay(REPLAYER, join(tmpdir(), 'bench-rtnl.bin'), NETLINK_ROUTE, adds, REPLAY_PER_DATAGRAM.at(-1)!);
    const replayed = (await rtnl.list(IFACE)).sort();
    if (JSON.stringify(replayed) !== JSON.stringify([...vipList].sort())) throw new Error('the address replay did not bind the operator\'s addresses');

    // ---- the C floor: the same content by the C tools, from a clean kernel, one after the other
    // (timed separately and summed): `ipvsadm -R` of the identical table, `ip -batch` of the address
    // adds on a fresh dummy link, `ipset restore -exist` and `iptables-restore --noflush` (+ ip6tables)
    // of the very payloads IptablesRestore applied in the first sync above.
    progress(`C floor: ipvsadm -R, ip -batch, ipset restore, iptables-restore of the same content`);
    nl = await freshIpvs(ipvs, schedulerNames);
    await iptables.cleanup();
    await rtnl.deleteLink(IFACE);
    const timedRun = (what: string, cmd: string, args: string[], input: string): number => {
      const t = process.hrtime.bigint();
      const r = spawnSync(cmd, args, { input, encoding: 'utf8', maxBuffer: 1 << 30 });
      const ms = msSince(t);
      if (r.status !== 0) throw new Error(`${what} failed: ${r.stderr}`);
      return ms;
    };
    const ipvsadmMs = timedRun('ipvsadm -R', 'ipvsadm', ['-R'], saved);
    const again = sh('ipvsadm', ['-Sn']);
    if (again !== saved) throw new Error('ipvsadm -R did not load the identical table');
    const ipBatch = [`link add ${IFACE} type dummy`, `link set ${IFACE} up`,
      ...vipList.map((a) => (a.includes(':') ? `addr add ${a}/128 dev ${IFACE} nodad` : `addr add ${a}/32 dev ${IFACE}`))].join('\n') + '\n';
    const ipMs = timedRun('ip -batch', 'ip', ['-batch', '-'], ipBatch);
    const bound = (await rtnl.list(IFACE)).sort();
    if (JSON.stringify(bound) !== JSON.stringify([...vipList].sort())) throw new Error('ip -batch did not bind the same addresses');
    const ipsetMs = payloads.ipset ? timedRun('ipset restore', 'ipset', ['restore', '-exist'], payloads.ipset) : 0;
    const iptablesRestoreMs = timedRun('iptables-restore', backend.restore, ['--noflush', '--wait=5'], payloads.v4)
      + (payloads.v6 ? timedRun('ip6tables-restore', backend.restore6, ['--noflush', '--wait=5'], payloads.v6) : 0);
    const drift = await restore.drift(firstDesired, config).catch((e: unknown) => `drift check failed: ${String(e)}`);
    const cFloor = { ipvsadmMs, ipBatchMs: ipMs, ipsetMs, iptablesRestoreMs, totalMs: ipvsadmMs + ipMs + ipsetMs + iptablesRestoreMs, vips: vipList.length, drift: drift ?? null };
    progress(`C floor: ipvsadm -R ${lines} lines ${(ipvsadmMs / 1000).toFixed(1)} s, ip -batch ${vipList.length} addresses ${(ipMs / 1000).toFixed(2)} s, ` +
      `ipset ${(ipsetMs / 1000).toFixed(2)} s, iptables-restore ${(iptablesRestoreMs / 1000).toFixed(2)} s, sum ${(cFloor.totalMs / 1000).toFixed(1)} s; ` +
      `IPVS ratio ${(ipvsDoneMs / ipvsadmMs).toFixed(2)}, whole first sync / C floor ${(totalMs / cFloor.totalMs).toFixed(2)}${drift ? `; iptables after the C restore: ${drift}` : ''}`);

    const ipvsFloorMs = Math.min(...ipvsReplays.map((r) => r.ms));
    const kernelFloor = {
      ipvs: ipvsReplays, ipvsMs: ipvsFloorMs, vips: vipReplay, vipsMs: vipReplay.ms, ipsetMs, iptablesRestoreMs,
      totalMs: ipvsFloorMs + vipReplay.ms + ipsetMs + iptablesRestoreMs,
    };
    progress(`kernel floor: IPVS ${genl.length} messages ${ipvsReplays.map((r) => `${(r.ms / 1000).toFixed(2)} s (${r.perDatagram}/datagram)`).join(', ')}, ` +
      `${adds.length} address adds ${(vipReplay.ms / 1000).toFixed(2)} s, with ipset + iptables-restore ${(kernelFloor.totalMs / 1000).toFixed(1)} s; ` +
      `IPVS programmed / replay ${(ipvsDoneMs / ipvsFloorMs).toFixed(2)}, whole first sync / kernel floor ${(totalMs / kernelFloor.totalMs).toFixed(2)}`);

    // ---- restart with the table already programmed (by ipvsadm -R: the same table the operator wrote).
    // As a new process: a new Operator and a new iptables path, which knows nothing of the sets it
    // left (it reads them). Three in a row, the median reported; each finds the same table.
    let restart: Record<string, unknown> | undefined;
    if (last) {
      const runs: Array<Record<string, unknown> & { ms: number }> = [];
      for (let k = 0; k < RESTARTS; k++) {
        progress(`restart ${k + 1}/${RESTARTS} with ${n} Services programmed`);
        const st = new StatusWaiter();
        const fresh = new MeasuredIptables(new IptablesRestore());
        ipvs.reset(); vips.ms = 0; vips.added = 0;
        const ev = initialEvents();
        const t1 = process.hrtime.bigint();
        void fresh.prepare();
        const op2 = new Operator(config, { ...deps, iptables: fresh, status: st.sink });
        for (const e of ev) op2.handle(e);
        const f = st.next();
        op2.start();
        await f;
        runs.push({ ms: msSince(t1), fromUs: Number(t1 / 1000n), ...phases(ipvs, t1), ops: op2.last!.ops, ready: op2.ready, dumps: ipvs.dumps, dumpMs: ipvs.dumpMs,
          listings: ipvs.listings, listingMs: ipvs.listingMs, iptablesMs: fresh.ms, vipsMs: vips.ms, vipsAdded: vips.added,
          ...(op2.last?.error ? { error: op2.last.error } : {}) });
        await op2.stop();
        progress(`restart: ready=${op2.ready} after ${(runs.at(-1)!.ms / 1000).toFixed(1)} s, ${op2.last!.ops} ops` +
          `${op2.last?.error ? `; the sync failed: ${op2.last.error}` : ''}`);
      }
      const sorted = [...runs].sort((a, b) => a.ms - b.ms);
      // What reading the same state costs the C tools, one after the other: the floor under a
      // restart's read (a restart also builds, plans and writes nothing; these only read).
      const cRead = {
        ipvsadmMs: timedRun('ipvsadm -Sn', 'ipvsadm', ['-Sn'], ''),
        iptablesSaveMs: timedRun('iptables-save', backend.save, [], '') + timedRun('ip6tables-save', backend.save6, [], ''),
        ipsetMs: timedRun('ipset save', 'ipset', ['save'], ''),
        ipMs: timedRun('ip addr show', 'ip', ['-o', 'addr', 'show', 'dev', IFACE], ''),
      };
      progress(`the C tools' read of the same state: ipvsadm -Sn ${(cRead.ipvsadmMs / 1000).toFixed(2)} s, ` +
        `iptables-save x2 ${(cRead.iptablesSaveMs / 1000).toFixed(2)} s, ipset save ${(cRead.ipsetMs / 1000).toFixed(2)} s, ` +
        `ip addr ${(cRead.ipMs / 1000).toFixed(2)} s`);
      restart = { ...sorted[Math.floor(sorted.length / 2)]!, runsMs: runs.map((r) => r.ms), runErrors: runs.map((r) => r.error ?? null),
        cRead: { ...cRead, totalMs: cRead.ipvsadmMs + cRead.iptablesSaveMs + cRead.ipsetMs + cRead.ipMs } };
    }

    results.push({
      services: n, endpointsPerService: E, virtualServers: saved.split('\n').filter((l) => l.startsWith('-A')).length,
      realServers: saved.split('\n').filter((l) => l.startsWith('-a')).length,
      full, ipvsadm: { ms: ipvsadmMs, lines }, ratio: ipvsDoneMs / ipvsadmMs,
      cFloor, wholeRatio: totalMs / cFloor.totalMs,
      kernelFloor, kernelRatio: totalMs / kernelFloor.totalMs,
      changes: {
        count: changes.length,
        opsPerChange: changes.map((x) => x.ops),
        // A NodePort Service's endpoint is a real server of two virtual servers (cluster IP and
        // node address): one op each.
        virtualServersPerChange: changes.map((x) => x.virtualServers),
        exactlyOneOp: changes.every((x) => x.ops === x.virtualServers),
        p50: percentile(lat, 50), p99: percentile(lat, 99), max: Math.max(...lat),
        ipvsP50: percentile(changes.map((x) => x.ipvsMs), 50),
        iptablesPerChangeMs: percentile(changes.map((x) => x.iptablesMs), 50),
        dumpsPerChange: percentile(changes.map((x) => x.dumps), 50),
        // The first change of each kind runs that kind's code for the first time (compiled on first
        // use, slow under TCG); the p99 of the others is what a node sees once its changes are warm.
        warmP99: percentile(lat.filter((_, i) => changes.findIndex((x) => x.kind === changes[i]!.kind) !== i), 99),
        slowest,
        byKind: Object.fromEntries(['add', 'remove', 'weight'].map((kd) => {
          const xs = changes.filter((x) => x.kind === kd);
          return [kd, { count: xs.length, ops: [...new Set(xs.map((x) => x.ops))], p50: percentile(xs.map((x) => x.latencyMs), 50), p99: percentile(xs.map((x) => x.latencyMs), 99) }];
        })),
      },
      periodic,
      ...(estimator ? { estimator } : {}),
      ...(driftCheck ? { driftCheck } : {}),
      ...(restart ? { restart } : {}),
    });
  }
  await nl.flush();
  await iptables.cleanup();
  await rtnl.deleteLink(IFACE);
  nl.close();
  rtnl.close();
  const report = {
    at: new Date().toISOString(), kernel: kernel.release, ipvs: info.version, iptablesBackend: backend.mode ?? String(backend),
    cpus: cpus().length, memMb: Math.round((await import('node:os')).totalmem() / 2 ** 20),
    node: process.version, defaultMinSyncPeriodS: defaultProxyConfig.minSyncPeriod, sizes: results,
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(report, null, 2));
  progress(`wrote ${out}`);
  clearInterval(keepAlive);
}

main().then(() => process.exit(0), (e: unknown) => {
  process.stderr.write(`bench: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
