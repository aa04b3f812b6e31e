// Lab compare inside the lab VM (IPVS_LAB=1): N backend pods in network namespaces and one client
// namespace (src/lab/topology.ts), then every mode on the same pods and the same VIP:port.
//   1. kube-proxy iptables mode: no operator state (`ipvs-operator cleanup`), the VIP on no
//      interface, kube-proxy's chains loaded with iptables-restore (DNAT in nat PREROUTING for the
//      client's traffic), load per profile, the chains deleted again.
//   2. IPVS: the operator process on a files source; per scheduler and profile the Service is
//      written with that scheduler's annotation, the kernel is polled until the virtual server
//      carries it, load runs, and the Service is deleted again, so no scheduler inherits another's
//      connection counters (lc and wlc count inactive connections for minutes).
// Pods switch service-time profiles at run time (pod-server's PUT /__lab/profile).
import { release } from 'node:os';
import { fileURLToPath } from 'node:url';
import { detectBackend } from '../iptables/backend.js';
import type { LoadResult } from '../lab/loadgen.js';
import { run, runOk } from '../lab/proc.js';
import { cleanupTopology, createClient, createPod, ensureNode, netnsExec } from '../lab/topology.js';
import { type KubeProxyService, renderKubeProxyRestore, renderKubeProxyTeardown } from './kube-proxy.js';
import {
  CLUSTER_CIDR, NODE_NAME, PORT_NAME, SERVICE_NAME, SERVICE_NAMESPACE, clusterObjects, serviceObjects, weightOptions,
} from './manifests.js';
import { OperatorUnderTest, cleanUpOperatorState } from './operator.js';
import { summarizeLatency } from './stats.js';
import {
  type Backend, type BackendProfile, type CompareResults, type LoadSpec, type Mode, type ModeRun, type Profile, speedWeights,
} from './types.js';

const LOADGEN = fileURLToPath(new URL('../lab/loadgen.js', import.meta.url));
export const VIP = '10.200.1.10';
export const PORT = 80;
const CLIENT = { name: 'client', ip: '192.168.100.10' };

export interface CompareOptions {
  backends: number;
  profiles: Profile[];
  modes: Mode[];
  load: LoadSpec;
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

/** Runs every mode under every profile; tears down all it set up, also on failure. */
export async function runCompare(o: CompareOptions): Promise<CompareResults> {
  if (process.env.IPVS_LAB !== '1') throw new Error('lab compare runs inside the lab VM (IPVS_LAB=1): use `ipvs-operator lab compare`');
  const backends = labBackends(o.backends);
  const results: CompareResults = {
    version: 1, startedAt: new Date().toISOString(), kernel: release(), vip: VIP, port: PORT, backends,
    load: o.load, profiles: o.profiles, modes: o.modes.map((m) => m.name), runs: [],
  };
  const total = o.modes.length * o.profiles.length;
  let step = 0;
  const measure = async (p: Profile, mode: Mode, options?: Record<string, unknown>) => {
    step++;
    o.onProgress?.({ step, total, profile: p.name, mode: mode.name });
    const r = toModeRun(p.name, mode.name, await runLoad(o.load), options);
    results.runs.push(r);
    o.onProgress?.({ step, total, profile: p.name, mode: mode.name, run: r });
  };

  try {
    // cleanup talks to IPVS over generic netlink, which does not autoload the module.
    await runOk('modprobe', ['ip_vs']);
    await ensureNode();
    await Promise.all(backends.map((b) => createPod({ name: b.name, ip: b.ip, port: b.port })));
    await createClient(CLIENT);
    // Nothing of an earlier operator may intercept the VIP in iptables mode.
    await cleanUpOperatorState();
    const iptables = o.modes.filter((m): m is Extract<Mode, { kind: 'iptables' }> => m.kind === 'iptables');
    if (iptables.length) {
      const restore = (await detectBackend((c, a, input) => run(c, a, input === undefined ? {} : { input }))).restore;
      for (const mode of iptables) {
        const svc = kubeProxyService(backends, mode.affinity);
        await runOk(restore, ['--noflush', '--wait'], { input: renderKubeProxyRestore(svc) });
        try {
          for (const p of o.profiles) {
            await setProfile(backends, p);
            await measure(p, mode);
          }
        } finally {
          await runOk(restore, ['--noflush', '--wait'], { input: renderKubeProxyTeardown(svc) });
        }
      }
    }
    const ipvs = o.modes.filter((m): m is Extract<Mode, { kind: 'ipvs' }> => m.kind === 'ipvs');
    if (ipvs.length) {
      const op = new OperatorUnderTest(NODE_NAME);
      op.write('cluster', clusterObjects());
      try {
        await op.start();
        for (const mode of ipvs) {
          for (const p of o.profiles) {
            await setProfile(backends, p);
            const options = mode.scheduler === 'wrr' ? weightOptions(backends, speedWeights(p)) : undefined;
            op.write('service', serviceObjects(VIP, PORT, backends, mode.scheduler, options));
            await waitForVirtualServer(mode.scheduler, backends.length, op);
            await measure(p, mode, options);
            op.remove('service');
            await waitForNoVirtualServer(op);
          }
        }
      } finally {
        await op.stopAndCleanUp();
      }
    }
  } finally {
    await cleanupTopology();
  }
  return results;
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

async function runLoad(l: LoadSpec): Promise<LoadResult> {
  const args = [LOADGEN, '--url', `http://${VIP}:${PORT}/`, '--count', String(l.requests),
    '--concurrency', String(l.concurrency), '--timeout-ms', String(l.timeoutMs), '--samples'];
  if (l.keepAlive) args.push('--keep-alive');
  const r = await netnsExec(CLIENT.name, [process.execPath, ...args]);
  if (r.code !== 0) throw new Error(`loadgen exited with ${r.code}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as LoadResult;
}

function toModeRun(profile: string, mode: string, r: LoadResult, options?: Record<string, unknown>): ModeRun {
  const samples = r.samples ?? [];
  return {
    profile, mode, ...(options ? { options } : {}), requests: r.count, ok: r.ok, errors: r.errors,
    errorKinds: r.errorKinds, byPod: r.byPod, latencyMs: summarizeLatency(samples), durationMs: r.durationMs, samples,
  };
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
