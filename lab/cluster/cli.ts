#!/usr/bin/env node
// `ipvs-operator lab cluster up|down|status|apiserver restart|exec|kubectl` (lab/commands.ts) and the agent that
// keeps a cluster alive inside the lab VM between those commands.
//
// How a cluster outlives one command: `up` starts, detached, one lab VM whose guest command is
// this file's `agent`, and returns once the agent reports ready. The agent builds the cluster
// (cluster.ts), starts the API server and the operators, then serves requests through the project
// share (read-write 9p, uncached): the host writes <dir>/requests/<id>.json ({"argv": [...]}),
// the agent answers <dir>/requests/<id>.out.json ({"code","stdout","stderr"}). `down` asks the
// agent to tear everything down and exit; the VM then powers off. <dir> = .cache/lab/cluster.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { labCacheDir, projectRoot } from '../paths.js';
import { kubeconfigYaml } from './apiserver.js';
import { CLUSTER_RUN_DIR, LabCluster, startApiServer, type ApiAccess } from './cluster.js';
import { BRIDGE_V4, EXTERNAL, POD_CIDR } from './nodes.js';
import { LabPrometheus, OPERATOR_METRICS_PORT, PROMETHEUS_PORT } from './prometheus.js';

/** Where the host and the agent meet (inside the project: the guest sees it read-write). */
export const CLUSTER_DIR = join(labCacheDir, 'cluster');
const REQUESTS = join(CLUSTER_DIR, 'requests');
const READY = join(CLUSTER_DIR, 'ready.json');
const VM_PID = join(CLUSTER_DIR, 'vm.pid');
const VM_LOG = join(CLUSTER_DIR, 'vm.log');

/** The notes' pods: webpod-1..3, one per worker (round robin when fewer), net-pod on the control plane. */
export function demoPods(nodes: readonly string[]): Array<{ name: string; node: string; labels: Record<string, string>; serve: boolean }> {
  const workers = nodes.length > 1 ? nodes.slice(1) : nodes;
  return [
    ...[1, 2, 3].map((i) => ({ name: `webpod-${i}`, node: workers[(i - 1) % workers.length]!, labels: { app: 'webpod' }, serve: true })),
    { name: 'net-pod', node: nodes[0]!, labels: { app: 'net-pod' }, serve: false },
  ];
}

export interface AgentState {
  cluster: LabCluster; api: ApiAccess; kubeconfig: string; prometheus?: LabPrometheus | undefined;
  /** Stops the API server and starts it again over the same etcd (`apiserver restart`). */
  restartApiServer: () => Promise<void>;
  stop: () => Promise<void>;
}

export async function bringUp(nodes: number, log: (l: string) => void, kubeProxy = false, operatorArgs: readonly string[] = [], prometheus = false): Promise<AgentState> {
  const t0 = Date.now();
  const cluster = await LabCluster.up({ nodes, api: { url: 'https://0.0.0.0' }, log });
  log(`network of ${nodes} nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const apiServer = await startApiServer(cluster.nodes[0]!);
  cluster.api = apiServer.access;
  const kubeconfig = join(CLUSTER_RUN_DIR, 'apiserver', 'admin.kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml(apiServer.access.url, apiServer.access.adminToken!, join(CLUSTER_RUN_DIR, 'apiserver', 'cert.pem')));
  log(`API server ${apiServer.access.url} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await cluster.registerNodes();
  cluster.runWorkloads();
  for (const ns of ['default', 'ipvs-operator']) await cluster.apply('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } as { metadata: { name: string } });
  await cluster.apply('/apis/ipvs-operator.io/v1alpha1/ipvsproxyconfigs', {
    apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
    // With kube-proxy beside it, the coexistence install (examples/coexist/): only labelled Services.
    spec: { defaultScheduler: 'rr', clusterCIDRs: [POD_CIDR], ...(kubeProxy ? { serviceProxyName: 'ipvs-operator' } : {}) },
  } as { metadata: { name: string } });
  await Promise.all(demoPods(cluster.nodes.map((n) => n.name)).map((p) => cluster.addPod({ ...p, register: true })));
  log(`pods in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await cluster.startOperators(undefined, operatorArgs);
  log(`operators ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (kubeProxy) {
    await cluster.startKubeProxies();
    log(`kube-proxy (iptables mode) synced on every node in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  // Prometheus on the bridge, scraping every node's operator (the DaemonSet's metrics port).
  const prom = prometheus ? await LabPrometheus.start({
    listen: `${BRIDGE_V4}:${PROMETHEUS_PORT}`, dir: join(CLUSTER_RUN_DIR, 'prometheus'),
    targets: cluster.nodes.map((n) => ({ node: n.name, address: `${n.ipv4}:${OPERATOR_METRICS_PORT}` })),
  }) : undefined;
  if (prom) log(`Prometheus ${prom.url} scraping ${cluster.nodes.length} operators in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return {
    cluster, api: apiServer.access, kubeconfig, prometheus: prom, restartApiServer: () => apiServer.restart(),
    stop: async () => { await prom?.stop(); await cluster.down(); await apiServer.stop(); },
  };
}

function statusText(s: AgentState): string {
  const rows = [['NODE', 'ROLE', 'INTERNAL-IP', 'POD-CIDR'], ...s.cluster.nodes.map((n) => [n.name, n.role, `${n.ipv4},${n.ipv6}`, n.podCIDR])];
  const pods = [['POD', 'NODE', 'IP', 'LABELS'], ...[...s.cluster.pods.values()].map((p) => [p.name, p.node, `${p.ipv4},${p.ipv6}`, Object.entries(p.labels).map(([k, v]) => `${k}=${v}`).join(',')])];
  const table = (r: string[][]) => {
    const w = r[0]!.map((_, i) => Math.max(...r.map((x) => x[i]!.length)));
    return r.map((x) => x.map((c, i) => c.padEnd(w[i]!)).join('  ').trimEnd()).join('\n');
  };
  const prom = s.prometheus ? `; Prometheus ${s.prometheus.url} (from the external client: npm run cluster -- exec external -- curl -s ${s.prometheus.url}/api/v1/query --data-urlencode 'query=...')` : '';
  return `${table(rows)}\n\n${table(pods)}\n\nAPI server ${s.api.url}; external client netns ${EXTERNAL.name} (${EXTERNAL.ipv4})${prom}\n`;
}

/**
 * Whether a request reads standard input: `kubectl ... -f -` (apply, create, replace, delete ...),
 * or `kubectl exec -i` / `--stdin`. The host sends its stdin only then, and only when it is not
 * a terminal, so a command never waits on a stdin nobody writes. pure.
 */
export function wantsStdin(argv: readonly string[]): boolean {
  const [cmd, ...rest] = argv;
  const end = rest.indexOf('--');
  const flags = end < 0 ? rest : rest.slice(0, end);
  if (cmd === 'kubectl') {
    return flags.some((a, i) => ((a === '-f' || a === '--filename') && flags[i + 1] === '-') || a === '-f=-' || a === '--filename=-' || a === '-f-'
      || a === '-i' || a === '--stdin' || a === '-it' || a === '-ti' || a === '--stdin=true');
  }
  return false;
}

/** Runs one request in the guest; what the host prints. `input`: the host's stdin, when sent. */
async function serve(s: AgentState, argv: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const [cmd, ...rest] = argv;
  if (cmd === 'status') return { code: 0, stdout: statusText(s), stderr: '' };
  if (cmd === 'apiserver') {
    if (rest.length !== 1 || rest[0] !== 'restart') return { code: 2, stdout: '', stderr: 'usage: apiserver restart\n' };
    const t0 = Date.now();
    try {
      await s.restartApiServer();
    } catch (e) {
      return { code: 1, stdout: '', stderr: `${(e as Error).message}\n` };
    }
    return { code: 0, stdout: `lab cluster: API server restarted over its etcd in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`, stderr: '' };
  }
  if (cmd === 'exec') {
    const [target, ...command] = rest;
    if (!target || command.length === 0) return { code: 2, stdout: '', stderr: 'usage: exec <node|pod> -- <command...>\n' };
    try {
      return await s.cluster.exec(target, command, input);
    } catch (e) {
      return { code: 1, stdout: '', stderr: `${(e as Error).message}\n` };
    }
  }
  if (cmd === 'kubectl') {
    const { run } = await import('../proc.js');
    return run('kubectl', rest, { env: { ...process.env, KUBECONFIG: s.kubeconfig }, ...(input === undefined ? {} : { input }) })
      .catch((e: Error) => ({ code: 127, stdout: '', stderr: `${e.message}\n` }));
  }
  return { code: 2, stdout: '', stderr: `unknown request ${JSON.stringify(cmd)}\n` };
}

/** The guest side: builds the cluster, reports ready, answers requests until `down`. */
async function agent(nodes: number, kubeProxy: boolean, prometheus: boolean): Promise<number> {
  const t0 = Date.now();
  const log = (l: string) => process.stdout.write(`lab cluster: ${l}\n`);
  mkdirSync(REQUESTS, { recursive: true });
  const s = await bringUp(nodes, log, kubeProxy, [], prometheus);
  const readyMs = Date.now() - t0;
  // Written whole, then renamed: the host polls for the file and must never read half of it.
  writeFileSync(`${READY}.tmp`, JSON.stringify({ readyMs, uptimeS: Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]), status: statusText(s) }));
  renameSync(`${READY}.tmp`, READY);
  log(`ready in ${(readyMs / 1000).toFixed(1)} s after the agent started`);
  // Requests run side by side, as kubectl's calls to an API server do: a long exec (a load
  // generator, a watch) does not hold up a `kubectl get` from another terminal.
  const running = new Set<Promise<void>>();
  for (;;) {
    const ids = readdirSync(REQUESTS).filter((f) => /^[a-z0-9-]+\.json$/.test(f));
    for (const f of ids) {
      const path = join(REQUESTS, f);
      let req: { argv: string[]; input?: string };
      try {
        req = JSON.parse(readFileSync(path, 'utf8')) as { argv: string[]; input?: string };
      } catch {
        continue; // being written
      }
      const argv = req.argv;
      rmSync(path, { force: true });
      const out = path.replace(/\.json$/, '.out.json');
      if (argv[0] === 'down') {
        // In-flight requests get 30 s to end (a `kubectl get -w` never would); then the cluster goes.
        await Promise.race([Promise.all(running), new Promise((r) => setTimeout(r, 30_000).unref())]);
        await s.stop();
        writeFileSync(`${out}.tmp`, JSON.stringify({ code: 0, stdout: 'lab cluster: down\n', stderr: '' }));
        renameSync(`${out}.tmp`, out);
        rmSync(READY, { force: true });
        return 0;
      }
      const task = serve(s, argv, typeof req.input === 'string' ? req.input : undefined).then((answer) => {
        writeFileSync(`${out}.tmp`, JSON.stringify(answer));
        renameSync(`${out}.tmp`, out);
      }).finally(() => running.delete(task));
      running.add(task);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** All of this process's standard input, as text. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function vmAlive(): number | undefined {
  if (!existsSync(VM_PID)) return undefined;
  const pid = Number(readFileSync(VM_PID, 'utf8'));
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

/** Host side: sends a request to the agent and waits for its answer. */
async function request(argv: string[], timeoutMs = 600_000, input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  if (!vmAlive() || !existsSync(READY)) throw new Error('lab cluster: no cluster is up (run `lab cluster up`)');
  mkdirSync(REQUESTS, { recursive: true });
  const id = `${process.pid}-${Date.now().toString(36)}`;
  writeFileSync(join(REQUESTS, `${id}.json.tmp`), JSON.stringify({ argv, ...(input === undefined ? {} : { input }) }));
  renameSync(join(REQUESTS, `${id}.json.tmp`), join(REQUESTS, `${id}.json`));
  const out = join(REQUESTS, `${id}.out.json`);
  const end = Date.now() + timeoutMs;
  while (!existsSync(out)) {
    if (!vmAlive()) throw new Error(`lab cluster: the VM stopped (see ${VM_LOG})`);
    if (Date.now() > end) throw new Error(`lab cluster: no answer after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const answer = JSON.parse(readFileSync(out, 'utf8')) as { code: number; stdout: string; stderr: string };
  rmSync(out, { force: true });
  return answer;
}

/** Host side of `up`: one detached VM running the agent; resolves once it is ready. */
async function up(nodes: number, kubeProxy: boolean, prometheus: boolean): Promise<number> {
  if (vmAlive()) throw new Error('lab cluster: a cluster is up already (`lab cluster down` first)');
  rmSync(CLUSTER_DIR, { recursive: true, force: true });
  mkdirSync(REQUESTS, { recursive: true });
  const t0 = Date.now();
  const fd = openSync(VM_LOG, 'a');
  const child = spawn(process.execPath, [join(projectRoot, 'dist', 'lab', 'cli.js'), 'run', '--timeout', String(7 * 24 * 3600), '--memory', '3072', '--',
    process.execPath, join(projectRoot, 'dist', 'lab', 'cluster', 'cli.js'), 'agent', '--nodes', String(nodes), ...(kubeProxy ? ['--kube-proxy'] : []), ...(prometheus ? ['--prometheus'] : [])],
  { detached: true, stdio: ['ignore', fd, fd], cwd: projectRoot });
  closeSync(fd);
  writeFileSync(VM_PID, String(child.pid));
  child.unref();
  process.stdout.write(`lab cluster: booting the VM (pid ${child.pid}, log ${VM_LOG})\n`);
  while (!existsSync(READY)) {
    if (!vmAlive()) {
      process.stderr.write(`lab cluster: the VM stopped before the cluster was ready; last log lines:\n${readFileSync(VM_LOG, 'utf8').slice(-3000)}\n`);
      return 1;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  const ready = JSON.parse(readFileSync(READY, 'utf8')) as { readyMs: number; uptimeS: number; status: string };
  process.stdout.write(`${ready.status}\nlab cluster: up in ${((Date.now() - t0) / 1000).toFixed(1)} s (VM boot to ready: guest uptime ${ready.uptimeS.toFixed(1)} s, of which the cluster ${(ready.readyMs / 1000).toFixed(1)} s)\n`);
  return 0;
}

async function down(): Promise<number> {
  const pid = vmAlive();
  if (!pid) {
    process.stdout.write('lab cluster: no cluster is up\n');
    return 0;
  }
  if (existsSync(READY)) {
    const r = await request(['down'], 300_000).catch((e: Error) => ({ code: 1, stdout: '', stderr: `${e.message}\n` }));
    process.stdout.write(r.stdout);
    process.stderr.write(r.stderr);
  }
  const end = Date.now() + 60_000;
  while (vmAlive() && Date.now() < end) await new Promise((r) => setTimeout(r, 500));
  if (vmAlive()) process.kill(pid, 'SIGTERM'); // the harness kills its qemu on SIGTERM
  rmSync(VM_PID, { force: true });
  return 0;
}

/** `lab cluster <sub> ...` on the host; the exit code. */
export async function clusterCommand(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  const afterDashes = (a: string[]) => (a[0] === '--' ? a.slice(1) : a);
  switch (sub) {
    case 'up': {
      const { values } = parseArgs({ args: rest, options: { nodes: { type: 'string', default: '4' }, 'kube-proxy': { type: 'boolean', default: false }, prometheus: { type: 'boolean', default: false } }, strict: true });
      const n = Number(values.nodes);
      if (!Number.isInteger(n) || n < 1 || n > 90) throw new Error('--nodes must be an integer from 1 to 90');
      return up(n, values['kube-proxy'] === true, values.prometheus === true);
    }
    case 'down': return down();
    case 'status': case 'exec': case 'kubectl': case 'apiserver': {
      const argv = sub === 'exec' ? [sub, rest[0] ?? '', ...afterDashes(rest.slice(1))] : [sub, ...afterDashes(rest)];
      // The host's stdin goes with the request when the command reads it and it is not a terminal.
      const input = wantsStdin(argv) && !process.stdin.isTTY ? await readStdin() : undefined;
      const r = await request(argv, undefined, input);
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      return r.code;
    }
    default: throw new Error(`cluster takes up, down, status, apiserver restart, exec <node|pod> -- <cmd...> or kubectl -- <args...>; got ${JSON.stringify(sub ?? '')}`);
  }
}

// Run as a script in the guest: `node dist/lab/cluster/cli.js agent --nodes N`.
if (process.argv[1] && process.argv[1].endsWith('/cluster/cli.js') && process.argv[2] === 'agent') {
  const { values } = parseArgs({ args: process.argv.slice(3), options: { nodes: { type: 'string', default: '4' }, 'kube-proxy': { type: 'boolean', default: false }, prometheus: { type: 'boolean', default: false } }, strict: true });
  agent(Number(values.nodes), values['kube-proxy'] === true, values.prometheus === true).then((code) => { process.exitCode = code; }, (e: unknown) => {
    process.stderr.write(`lab cluster agent: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    process.exitCode = 1;
  });
}
