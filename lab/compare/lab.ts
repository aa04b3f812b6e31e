// Lab compare inside the lab VM (IPVS_LAB=1): N backend pods in network namespaces and one client
// namespace (lab/topology.ts), then every mode on the same pods and the same VIP:port. The
// operator runs throughout (files source) when an IPVS mode is asked for; each mode is switched on
// only for its own run, so modes can be interleaved (A, B, C, A, B, C, ...) and each repetition
// sees the same machine load as the others:
//   - kube-proxy iptables mode: its chains loaded with iptables-restore (DNAT in nat PREROUTING
//     for the client's traffic), deleted after the run;
//   - kube-proxy nftables mode: its `ip kube-proxy` table loaded with `nft -f`, deleted after;
//   - IPVS: the Service written with the scheduler's annotation (and sessionAffinity for
//     rr-affinity), the kernel polled until the virtual server carries it, the Service deleted
//     after the run (no scheduler inherits another's connection counters).
// Load comes from wrk (lab/compare/wrk.ts) in the client netns. A zero-delay baseline (the
// harness's own time per request) is measured first and the profiles are scaled to it.
// Pods switch service-time profiles at run time (pod-server's PUT /__lab/profile).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { detectBackend } from '../../src/iptables/backend.js';
import { run, runOk } from '../proc.js';
import { cleanupTopology, createClient, createPod, ensureNode, netnsExec } from '../topology.js';
import { type KubeProxyService, renderKubeProxyRestore, renderKubeProxyTeardown } from './kube-proxy.js';
import { renderNftRuleset, renderNftTeardown } from './kube-proxy-nft.js';
import {
  CLUSTER_CIDR, NODE_NAME, PORT_NAME, SERVICE_NAME, SERVICE_NAMESPACE, clusterObjects, serviceObjects, weightOptions,
} from './manifests.js';
import { OperatorUnderTest, cleanUpOperatorState } from './operator.js';
import { spread } from './stats.js';
import {
  type Backend, type BackendProfile, type Baseline, type CompareResults, type LoadSpec, type Mode, type ModeRun, type Profile,
  scaleUnit, speedWeights,
} from './types.js';
import { WRK_SCRIPT, type WrkResult, parseWrkOutput, toModeRun, wrkArgs } from './wrk.js';

export const VIP = '10.200.1.10';
export const PORT = 80;
const CLIENT = { name: 'client', ip: '192.168.100.10' };
/** kube-proxy's --service-cluster-ip-range in the lab (the VIPs' range). */
const SERVICE_CIDR = '10.200.0.0/16';

export interface CompareOptions {
  backends: number;
  /** The profiles; or, with `scale`, a function of the unit the baseline calls for. */
  profiles: Profile[] | ((unitMs: number) => Profile[]);
  modes: Mode[];
  load: LoadSpec;
  /** Repetitions per mode and profile, interleaved (default 1). */
  reps?: number;
  /** Measure the zero-delay baseline first (default true); profiles given as a function get its unit. */
  baseline?: boolean;
  /** Called before each step (run is undefined) and after it (with its result). */
  onProgress?: (p: Progress) => void;
}

export interface Progress {
  /** 1-based step number, of total. */
  step: number;
  total: number;
  profile: string;
  mode: string;
  run?: ModeRun;
}

/** The lab's backends: webpod1..N on 10.10.1.11.. (like webpod1-3 in the notes). */
export function labBackends(n: number): Backend[] {
  if (!Number.isInteger(n) || n < 1 || n > 50) throw new Error(`backends must be 1..50, not ${n}`);
  return Array.from({ length: n }, (_, i) => ({ name: `webpod${i + 1}`, ip: `10.10.1.${11 + i}`, port: 80 }));
}

const ZERO: BackendProfile = { delayMs: 0, stallEveryMs: 0, stallMs: 0 };

/** Runs the baseline, then every mode under every profile `reps` times, interleaved; tears down all it set up, also on failure. */
export async function runCompare(o: CompareOptions): Promise<CompareResults> {
  if (process.env.IPVS_LAB !== '1') throw new Error('lab compare runs inside the lab VM (IPVS_LAB=1): use `ipvs-operator lab compare`');
  const backends = labBackends(o.backends);
  const reps = o.reps ?? 1;
  const withBaseline = o.baseline ?? true;
  const first = o.modes[0];
  if (!first) throw new Error('lab compare: no mode');
  const fixedProfiles = Array.isArray(o.profiles) ? o.profiles : undefined;
  const results: CompareResults = {
    version: 2, reps, loadgen: 'wrk', startedAt: new Date().toISOString(), kernel: release(), vip: VIP, port: PORT, backends,
    load: o.load, profiles: fixedProfiles ?? [], modes: o.modes.map((m) => m.name), runs: [],
  };
  const profileCount = fixedProfiles?.length ?? (o.profiles as (u: number) => Profile[])(20).length;
  const total = (withBaseline ? reps : 0) + reps * o.modes.length * profileCount;
  let step = 0;
  const dir = mkdtempSync(join(tmpdir(), 'compare-wrk-'));
  const script = join(dir, 'count.lua');
  writeFileSync(script, WRK_SCRIPT);
  let op: OperatorUnderTest | undefined;
  let restore = '';

  const measure = async (profile: string, mode: Mode, rep: number, options?: Record<string, unknown>): Promise<ModeRun> => {
    step++;
    o.onProgress?.({ step, total, profile, mode: mode.name });
    const activeOptions = await activate(mode, options);
    let r: ModeRun;
    try {
      r = toModeRun(profile, mode.name, rep, await runWrk(o.load, script), activeOptions);
    } finally {
      await deactivate(mode);
    }
    o.onProgress?.({ step, total, profile, mode: mode.name, run: r });
    return r;
  };

  const activate = async (mode: Mode, options?: Record<string, unknown>): Promise<Record<string, unknown> | undefined> => {
    if (mode.kind === 'iptables') {
      await runOk(restore, ['--noflush', '--wait'], { input: renderKubeProxyRestore(kubeProxyService(backends, mode.affinity)) });
    } else if (mode.kind === 'nftables') {
      await runOk('nft', ['-f', '-'], { input: renderNftRuleset(kubeProxyService(backends, mode.affinity), { serviceCIDR: SERVICE_CIDR, nodeIPs: ['192.168.100.1'] }) });
    } else {
      if (!op) throw new Error('lab compare: the operator is not running');
      op.write('service', serviceObjects(VIP, PORT, backends, mode.scheduler, options, mode.affinity));
      await waitForVirtualServer(mode.scheduler, backends.length, op);
    }
    return options;
  };
  const deactivate = async (mode: Mode): Promise<void> => {
    if (mode.kind === 'iptables') {
      await runOk(restore, ['--noflush', '--wait'], { input: renderKubeProxyTeardown(kubeProxyService(backends, mode.affinity)) });
    } else if (mode.kind === 'nftables') {
      await runOk('nft', ['-f', '-'], { input: renderNftTeardown() });
    } else if (op) {
      op.remove('service');
      await waitForNoVirtualServer(op);
    }
  };

  try {
    // cleanup talks to IPVS over generic netlink, which does not autoload the module.
    await runOk('modprobe', ['ip_vs']);
    await ensureNode();
    await Promise.all(backends.map((b) => createPod({ name: b.name, ip: b.ip, port: b.port })));
    await createClient(CLIENT);
    // Nothing of an earlier operator may intercept the VIP in the kube-proxy modes.
    await cleanUpOperatorState();
    if (o.modes.some((m) => m.kind === 'iptables')) {
      restore = (await detectBackend((c, a, input) => run(c, a, input === undefined ? {} : { input }))).restore;
    }
    if (o.modes.some((m) => m.kind === 'ipvs')) {
      op = new OperatorUnderTest(NODE_NAME);
      op.write('cluster', clusterObjects());
      await op.start();
    }
    let unitMs = 20;
    if (withBaseline) {
      await setProfile(backends, { name: 'baseline', summary: '', backends: backends.map(() => ZERO) });
      const runs: ModeRun[] = [];
      for (let rep = 1; rep <= reps; rep++) runs.push(await measure('baseline', first, rep, ipvsOptions(first, backends)));
      const p50Ms = spread(runs.map((x) => x.latencyMs.p50)).median;
      const scaled = scaleUnit(p50Ms);
      unitMs = scaled.unitMs;
      const baseline: Baseline = { mode: first.name, runs, p50Ms, unitMs, dominates: scaled.dominates };
      results.baseline = baseline;
    }
    const profiles = fixedProfiles ?? (o.profiles as (u: number) => Profile[])(unitMs);
    results.profiles = profiles;
    for (const p of profiles) {
      await setProfile(backends, p);
      for (let rep = 1; rep <= reps; rep++) {
        for (const mode of o.modes) {
          const options = mode.kind === 'ipvs' && mode.scheduler === 'wrr' ? weightOptions(backends, speedWeights(p)) : undefined;
          results.runs.push(await measure(p.name, mode, rep, options));
        }
      }
    }
  } finally {
    try {
      await op?.stopAndCleanUp();
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await cleanupTopology();
    }
  }
  return results;
}

function ipvsOptions(mode: Mode, backends: readonly Backend[]): Record<string, unknown> | undefined {
  return mode.kind === 'ipvs' && mode.scheduler === 'wrr' ? weightOptions(backends, backends.map(() => 1)) : undefined;
}

function kubeProxyService(backends: readonly Backend[], affinity: boolean): KubeProxyService {
  return {
    namespace: SERVICE_NAMESPACE, name: SERVICE_NAME, portName: PORT_NAME, clusterIP: VIP, port: PORT,
    endpoints: backends.map((b) => ({ ip: b.ip, port: b.port })), clusterCIDR: CLUSTER_CIDR,
    ...(affinity ? { affinitySeconds: 10800 } : {}),
  };
}

/** Puts each pod on its profile (from the node: pod addresses are routed there). */
async function setProfile(backends: readonly Backend[], p: Profile): Promise<void> {
  await Promise.all(backends.map(async (b, i) => {
    const body: BackendProfile = p.backends[i] ?? { delayMs: 0, stallEveryMs: 0, stallMs: 0 };
    const res = await fetch(`http://${b.ip}:${b.port}/__lab/profile`, { method: 'PUT', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`pod ${b.name}: profile refused (${res.status}): ${await res.text()}`);
  }));
}

/** One wrk run from the client netns; throws when wrk fails or prints no result. */
async function runWrk(l: LoadSpec, script: string): Promise<WrkResult> {
  const r = await netnsExec(CLIENT.name, ['wrk', ...wrkArgs(`http://${VIP}:${PORT}/`, l, script)]);
  // wrk exits 0 also when interrupted by the script's SIGINT; its result line is what counts.
  if (!r.stdout.includes('WRK-RESULT ')) throw new Error(`wrk exited with ${r.code}: ${r.stderr.trim()}\n${r.stdout.slice(-1000)}`);
  return parseWrkOutput(r.stdout);
}

/** `ipvsadm -Ln -t VIP:PORT` and the operator's VIP address, in one process. */
async function kernelView(): Promise<{ table: string; found: boolean; vipUp: boolean }> {
  const r = await run('sh', ['-c', `ipvsadm -Ln -t ${VIP}:${PORT} 2>/dev/null && echo '#found'; ip -o -4 addr show to ${VIP}/32`]);
  return { table: r.stdout, found: r.stdout.includes('#found'), vipUp: r.stdout.includes(`inet ${VIP}/32`) };
}

// Syncs take seconds under TCG, more when other VMs share the cores: generous limits.
const SYNC_LIMIT_MS = 120_000;

async function waitForVirtualServer(scheduler: string, dests: number, op: OperatorUnderTest): Promise<void> {
  const end = Date.now() + SYNC_LIMIT_MS;
  const service = new RegExp(`^TCP\\s+${VIP.replace(/\./g, '\\.')}:${PORT}\\s+${scheduler}\\b`, 'm');
  let last = '';
  for (;;) {
    const v = await kernelView();
    last = v.table;
    if (v.found && v.vipUp && service.test(v.table) && (v.table.match(/^\s+->\s+\d/gm) ?? []).length === dests) return;
    if (Date.now() > end) throw new Error(`no ${scheduler} virtual server with ${dests} real servers after ${SYNC_LIMIT_MS / 1000} s:\n${last}\noperator log:\n${op.tail()}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

async function waitForNoVirtualServer(op: OperatorUnderTest): Promise<void> {
  const end = Date.now() + SYNC_LIMIT_MS;
  while ((await kernelView()).found) {
    if (Date.now() > end) throw new Error(`the virtual server ${VIP}:${PORT} was not deleted after ${SYNC_LIMIT_MS / 1000} s; operator log:\n${op.tail()}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
