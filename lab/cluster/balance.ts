#!/usr/bin/env node
// The cross-node balance experiment (docs/balance-measure.md), run in the lab VM by
// `npm run lab -- balance`: a lab cluster, the three webpods serving port 8090 with a service-time
// profile, and closed-loop clients in the nodes' own network namespaces, each going through its
// own node's IPVS table towards one ClusterIP. Either every client on one node ("one node") or
// one client per node ("spread"), for each mode (a scheduler and annotations) and per-client
// concurrency. A new Service per run, so no mode inherits another's connection counters.
// Writes results.json and table.md to --out and prints the table.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { apiRequest } from './cluster.js';
import { bringUp } from './cli.js';
import { BALANCE_PROFILES, type ClientResult, type RunSummary, renderBalanceTable, summarize } from './balance-stats.js';
import type { LoadResult } from '../loadgen.js';
import { SERVICE_PROXY_NAME_LABEL } from '../../src/desired/service-parse.js';

const POD_SERVER = new URL('../pod-server.js', import.meta.url).pathname;
const LOADGEN = new URL('../loadgen.js', import.meta.url).pathname;
const PORT = 8090;
const BACKENDS = ['webpod-1', 'webpod-2', 'webpod-3'];

/**
 * kube-proxy's iptables mode as a mode of its own (src/lab/cluster/kube-proxy.ts, the lab's
 * stand-in: `-m statistic --mode random` per endpoint). With it in --modes, kube-proxy runs on
 * every node beside the operators, which then take only Services labelled for them (the
 * coexistence install, examples/coexist/).
 */
export const IPTABLES_MODE = 'iptables';

/** Which long-lived processes of the VM the CPU figures are kept for, by their command line. */
const CPU_GROUPS: ReadonlyArray<[string, RegExp]> = [
  ['operators', /src\/cli\/main\.js/], ['apiserver', /apiserver-main\.js/], ['pods', /pod-server\.js/],
];

/** CPU seconds per group of processes (utime + stime, /proc/PID/stat) and the VM's busy seconds (/proc/stat). */
export function cpuSnapshot(proc = '/proc'): Record<string, number> {
  const out: Record<string, number> = Object.fromEntries(CPU_GROUPS.map(([g]) => [g, 0]));
  for (const pid of readdirSync(proc).filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`${proc}/${pid}/cmdline`, 'latin1');
      const group = CPU_GROUPS.find(([, re]) => re.test(cmd))?.[0];
      if (!group) continue;
      // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
      const stat = readFileSync(`${proc}/${pid}/stat`, 'latin1');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out[group]! += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      // The process ended between the listing and the read.
    }
  }
  // The first line: user nice system idle iowait irq softirq steal ...; busy = all but idle and iowait.
  const cpu = readFileSync(`${proc}/stat`, 'latin1').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  out.vm = (cpu.reduce((a, b) => a + b, 0) - (cpu[3] ?? 0) - (cpu[4] ?? 0)) / 100;
  return out;
}

/** What each group used between two snapshots, seconds, one decimal. */
export function cpuUsed(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.keys(after).map((k) => [k, Math.round(10 * Math.max(0, after[k]! - (before[k] ?? 0))) / 10]));
}

/**
 * A mode: a scheduler, then `+key=value` annotations of ipvs-operator.io/ (e.g.
 * `sed+endpoint-order=sorted`, `wlc+balance=cluster`); or `iptables`.
 */
export function modeAnnotations(mode: string): Record<string, string> {
  const [scheduler, ...extra] = mode.split('+');
  if (!scheduler || !/^[a-z0-9-]+$/.test(scheduler)) throw new Error(`mode ${JSON.stringify(mode)}: a scheduler first`);
  const out: Record<string, string> = { 'ipvs-operator.io/scheduler': scheduler };
  for (const e of extra) {
    const m = /^([a-z0-9-]+)=(.+)$/.exec(e);
    if (!m) throw new Error(`mode ${JSON.stringify(mode)}: ${JSON.stringify(e)} is not key=value`);
    out[`ipvs-operator.io/${m[1]}`] = m[2]!;
  }
  return out;
}

function startBackend(pod: string, delayMs: number): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', pod, process.execPath, POD_SERVER, '--name', pod, '--port', String(PORT), '--delay-ms', String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`pod-server in ${pod} exited ${code}`)));
    child.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('ready')) resolve(child); });
  });
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '4' },
      modes: { type: 'string', default: 'rr,lc,sed' },
      profile: { type: 'string', default: 'one-slow' },
      requests: { type: 'string', default: '240' },
      clients: { type: 'string', default: '4' },
      placements: { type: 'string', default: 'one,spread' },
      concurrency: { type: 'string', default: '1' },
      reps: { type: 'string', default: '1' },
      'keep-alive': { type: 'boolean', default: false },
      out: { type: 'string', default: 'bench/results/balance' },
      'balance-period': { type: 'string', default: '2' },
      warmup: { type: 'string', default: '240' },
    },
    strict: true,
  });
  const serviceMs = BALANCE_PROFILES[values.profile!];
  if (!serviceMs) throw new Error(`--profile: one of ${Object.keys(BALANCE_PROFILES).join(', ')}`);
  const modes = values.modes!.split(',');
  modes.filter((m) => m !== IPTABLES_MODE).forEach(modeAnnotations);
  const kubeProxy = modes.includes(IPTABLES_MODE);
  const placements = values.placements!.split(',');
  if (placements.some((p) => p !== 'one' && p !== 'spread')) throw new Error('--placements: one, spread');
  const concurrencies = values.concurrency!.split(',').map(Number);
  const [nodes, requests, clients, reps] = [values.nodes, values.requests, values.clients, values.reps].map(Number) as [number, number, number, number];
  const log = (l: string) => process.stderr.write(`balance: ${l}\n`);

  // The cluster load view's period on every operator: short, so a run converges in seconds, not minutes.
  const s = await bringUp(nodes, log, kubeProxy, [`--balance-period=${Number(values['balance-period'])}`]);
  const warmup = Number(values.warmup);
  const servers: ChildProcess[] = [];
  try {
    for (const [i, pod] of BACKENDS.entries()) servers.push(await startBackend(pod, serviceMs[i]!));
    const cluster = s.cluster;
    const names = cluster.nodes.map((n) => n.name);
    // kube-proxy's DNAT rules for the Service on a node (its rules carry "default/<name>:http").
    const kubeProxyDnats = async (node: string, svc: string) => (await cluster.exec(node, ['iptables-save', '-t', 'nat'])).stdout
      .split('\n').filter((l) => l.includes(`default/${svc}:http`) && l.includes('-j DNAT')).length;
    const runs: RunSummary[] = [];
    const raw: unknown[] = [];
    let seq = 0;
    // Interleaved: each repeat goes through every mode before the next repeat.
    for (let rep = 0; rep < reps; rep++) {
      for (const concurrency of concurrencies) {
        for (const placement of placements) {
          for (const mode of modes) {
            const name = `bal-${seq}`;
            const vip = `10.200.1.${200 + (seq++ % 50)}`;
            const iptables = mode === IPTABLES_MODE;
            await cluster.apply('/api/v1/namespaces/default/services', {
              apiVersion: 'v1', kind: 'Service',
              metadata: {
                name, namespace: 'default', ...(iptables ? {} : { annotations: modeAnnotations(mode) }),
                ...(kubeProxy && !iptables ? { labels: { [SERVICE_PROXY_NAME_LABEL]: 'ipvs-operator' } } : {}),
              },
              spec: { type: 'ClusterIP', clusterIP: vip, clusterIPs: [vip], ipFamilies: ['IPv4'], selector: { app: 'webpod' }, ports: [{ name: 'http', port: PORT, targetPort: PORT, protocol: 'TCP' }] },
            } as { metadata: { name: string } });
            await Promise.all(names.map((n) => until(`${vip}:${PORT} with 3 ${iptables ? 'KUBE-SEP DNATs' : 'real servers'} on ${n}`, async () => {
              if (iptables) return (await kubeProxyDnats(n, name)) === BACKENDS.length;
              const t = (await cluster.exec(n, ['ipvsadm', '-Ln', '-t', `${vip}:${PORT}`])).stdout;
              return (t.match(/->\s+\d/g) ?? []).length === BACKENDS.length;
            })));
            const at = Array.from({ length: clients }, (_, i) => (placement === 'one' ? names[0]! : names[i % names.length]!));
            const load = (count: number) => Promise.all(at.map(async (node): Promise<ClientResult> => {
              const args = ['--url', `http://${vip}:${PORT}/json`, '--count', String(count), '--concurrency', String(concurrency), '--timeout-ms', '15000', '--samples'];
              if (values['keep-alive']) args.push('--keep-alive');
              const r = await cluster.exec(node, [process.execPath, LOADGEN, ...args]);
              if (r.code !== 0) throw new Error(`loadgen on ${node} exited ${r.code}: ${r.stderr}`);
              const l = JSON.parse(r.stdout) as LoadResult;
              return { node, ok: l.ok, errors: l.errors, samples: l.samples ?? [], first: l.sequence[0] ?? '' };
            }));
            // A cluster-balanced mode first learns: the same clients warm up while the nodes report
            // and the leader publishes; the weights in force when measuring starts are recorded.
            let weights: unknown;
            if (modeAnnotations(mode)['ipvs-operator.io/balance'] === 'cluster' && warmup > 0) {
              await load(Math.floor(warmup / clients));
              const w = await apiRequest(s.api, 'GET', `/apis/ipvs-operator.io/v1alpha1/namespaces/default/ipvsserviceweights/${name}`).catch(() => undefined);
              weights = (w as { spec?: unknown } | undefined)?.spec;
              log(`${mode} ${placement}: weights after warm-up ${JSON.stringify(weights)}`);
            }
            const t0 = Date.now();
            const cpu0 = cpuSnapshot();
            const results = await load(Math.floor(requests / clients));
            // What the measured load cost the VM, and who: the view's own work (reads, reports, the
            // leader) lands in "operators" and "apiserver" (docs/balance-measure.md).
            const cpu = cpuUsed(cpu0, cpuSnapshot());
            const summary = summarize({ mode, placement, concurrency, backends: BACKENDS, serviceMs, clients: results, seconds: (Date.now() - t0) / 1000 });
            runs.push(summary);
            // Per client node, its requests per backend: where each node's own choices went.
            const byNode = Object.fromEntries(results.map((c) => [c.node, BACKENDS.map((b) => c.samples.filter(([p]) => p === b).length)]));
            raw.push({ ...summary, rep, cpu, byNode, ...(weights ? { weights } : {}) });
            log(`${mode} ${placement} x${concurrency}: ${summary.byBackend.join('/')} p50 ${summary.p50} ms p95 ${summary.p95} ms imbalance ${summary.imbalance}; first: ${summary.firsts.join(', ')}; cpu s ${JSON.stringify(cpu)}`);
            await apiRequest(s.api, 'DELETE', `/api/v1/namespaces/default/services/${name}`);
            await Promise.all(names.map((n) => until(`${vip} gone on ${n}`, async () => (iptables
              ? (await kubeProxyDnats(n, name)) === 0
              : !(await cluster.exec(n, ['ipvsadm', '-Ln'])).stdout.includes(` ${vip}:${PORT} `)))));
          }
        }
      }
    }
    const header = `profile ${values.profile} (service ms ${BACKENDS.map((b, i) => `${b} ${serviceMs[i]}`).join(', ')}); ${requests} requests from ${clients} closed-loop clients, ` +
      `${values['keep-alive'] ? 'keep-alive' : 'a new connection each'}; ${nodes} nodes; ${reps} repeat(s), interleaved; each figure median [min-max]`;
    const table = `${header}\n\n${renderBalanceTable(runs, BACKENDS)}\n`;
    mkdirSync(values.out!, { recursive: true });
    writeFileSync(join(values.out!, 'results.json'), `${JSON.stringify({ header, argv: process.argv.slice(2), runs: raw }, null, 1)}\n`);
    writeFileSync(join(values.out!, 'table.md'), table);
    process.stdout.write(table);
  } finally {
    for (const c of servers) c.kill('SIGTERM');
    await s.stop();
  }
}

if (process.argv[1]?.endsWith('/cluster/balance.js')) {
  main().then(() => process.exit(0), (e: unknown) => {
    process.stderr.write(`balance: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    process.exit(1);
  });
}
