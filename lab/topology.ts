// Network topology helpers for the kernel tests, used INSIDE the lab VM (IPVS_LAB=1). They shell
// out to `ip` (test infrastructure only) and batch commands (`ip -batch`) because each process
// start costs 80-150 ms in the guest.
//
// Addressing (private test ranges; the VM has no NIC, so nothing here can leave the guest):
//   node     the guest's root netns: IPVS is programmed and jest runs there. Dummy `lab-node0`
//            holds 10.10.1.1/32 (the pods' gateway, and the node address pods see when traffic
//            is masqueraded: it is the first global address in the root netns) and
//            192.168.100.1/32 (the clients' gateway). ip_forward=1, rp_filter=0.
//   pods     10.10.0.0/16, normally 10.10.1.2-254. Netns <name>; veth `lp-<name>` (root side, no
//            address, route <ip>/32 dev lp-<name>) <-> `eth0` in the pod with <ip>/32, a link
//            route to 10.10.1.1 and `default via 10.10.1.1` (Calico-style /32 pods: no L2 between
//            pods, every packet goes through the node, so IPVS masquerading (-m) sees replies).
//            The root ns answers ARP for 10.10.1.1 because it is a local address (arp_ignore=0).
//   clients  192.168.100.2-254, same shape: veth `lc-<name>`, `default via 192.168.100.1`, so
//            VIPs and pods are routed through the node.
//   VIPs     10.200.1.0/24 on dummy `ipvs-lab0` in the root ns (addVip): IPVS intercepts at
//            LOCAL_IN, so a VIP must be a local address of the netns that holds the service.
// Names: [a-z0-9-], at most 12 characters (interface names are limited to 15).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { LoadResult } from './loadgen.js';
import { run, runOk, type RunResult } from './proc.js';

export type { LoadResult } from './loadgen.js';

export const NODE_DEV = 'lab-node0';
export const VIP_DEV = 'ipvs-lab0';
export const POD_GATEWAY = '10.10.1.1';
export const CLIENT_GATEWAY = '192.168.100.1';

const POD_SERVER = fileURLToPath(new URL('./pod-server.js', import.meta.url));
const LOADGEN = fileURLToPath(new URL('./loadgen.js', import.meta.url));

const namespaces = new Set<string>();
const servers = new Map<string, ChildProcess>();
let exitHooked = false;

function checkName(name: string): void {
  if (!/^[a-z0-9][a-z0-9-]{0,11}$/.test(name)) {
    throw new Error(`lab topology: bad name ${JSON.stringify(name)} (use [a-z0-9-], at most 12 characters)`);
  }
}

function ipv4(ip: string): number[] {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new Error(`lab topology: bad IPv4 address ${JSON.stringify(ip)}`);
  }
  return parts;
}

function checkRange(ip: string, kind: 'pod' | 'client' | 'vip'): void {
  const [a, b, c, d] = ipv4(ip);
  const ok = kind === 'pod' ? a === 10 && b === 10 && ip !== POD_GATEWAY && d !== 0 && d !== 255
    : kind === 'client' ? a === 192 && b === 168 && c === 100 && d !== 1 && d !== 0 && d !== 255
      : a === 10 && b === 200;
  if (!ok) {
    const range = { pod: '10.10.0.0/16 (not 10.10.1.1)', client: '192.168.100.2-254', vip: '10.200.0.0/16' }[kind];
    throw new Error(`lab topology: ${kind} address ${ip} is outside the lab range ${range}`);
  }
}

/** Runs `ip -batch -` (in netns `ns` when given) with one command per line. */
export async function ipBatch(lines: readonly string[], ns?: string): Promise<void> {
  const args = ns ? ['-n', ns, '-batch', '-'] : ['-batch', '-'];
  await runOk('ip', args, { input: `${lines.join('\n')}\n` });
}

/** Runs a command in the root (node) netns; never throws on a non-zero exit. */
export function hostExec(cmd: readonly string[]): Promise<RunResult> {
  const [file, ...args] = cmd;
  if (!file) throw new Error('hostExec: empty command');
  return run(file, args);
}

/** Runs a command in netns `name` (`ip netns exec`); never throws on a non-zero exit. */
export function netnsExec(name: string, cmd: readonly string[]): Promise<RunResult> {
  return run('ip', ['netns', 'exec', name, ...cmd]);
}

function sysctl(path: string, value: string): void {
  writeFileSync(`/proc/sys/${path.replace(/\./g, '/')}`, value);
}

let nodeReady: Promise<void> | undefined;

/** Sets up the node side (idempotent, safe to call concurrently): lab-node0 with the gateways, forwarding on. */
export function ensureNode(): Promise<void> {
  if (!nodeReady) {
    nodeReady = setUpNode();
    nodeReady.catch(() => { nodeReady = undefined; });
  }
  return nodeReady;
}

async function setUpNode(): Promise<void> {
  if (process.env.IPVS_LAB !== '1') {
    throw new Error('lab topology: refusing to touch this machine\'s network outside the lab VM (IPVS_LAB=1 is not set)');
  }
  sysctl('net.ipv4.ip_forward', '1');
  sysctl('net.ipv4.conf.all.rp_filter', '0');
  sysctl('net.ipv4.conf.default.rp_filter', '0');
  if (existsSync(`/sys/class/net/${NODE_DEV}`)) return;
  await ipBatch([
    'link set lo up',
    `link add ${NODE_DEV} type dummy`,
    `link set ${NODE_DEV} up`,
    `addr add ${POD_GATEWAY}/32 dev ${NODE_DEV}`,
    `addr add ${CLIENT_GATEWAY}/32 dev ${NODE_DEV}`,
  ]);
}

/** Adds VIP addresses (/32) to the dummy `ipvs-lab0` in the root netns (creating it). */
export async function addVip(...ips: string[]): Promise<void> {
  await ensureNode();
  ips.forEach((ip) => checkRange(ip, 'vip'));
  const lines = existsSync(`/sys/class/net/${VIP_DEV}`) ? [] : [`link add ${VIP_DEV} type dummy`, `link set ${VIP_DEV} up`];
  const have = existsSync(`/sys/class/net/${VIP_DEV}`) ? (await runOk('ip', ['-4', '-o', 'addr', 'show', 'dev', VIP_DEV])) : '';
  for (const ip of ips) if (!have.includes(` ${ip}/32 `)) lines.push(`addr add ${ip}/32 dev ${VIP_DEV}`);
  if (lines.length) await ipBatch(lines);
}

async function addEndpoint(name: string, ip: string, rootDev: string, gateway: string): Promise<void> {
  await ensureNode();
  if (namespaces.has(name) || existsSync(`/run/netns/${name}`)) throw new Error(`lab topology: netns ${name} exists already`);
  namespaces.add(name);
  await ipBatch([
    `netns add ${name}`,
    `link add ${rootDev} type veth peer name eth0 netns ${name}`,
    `link set ${rootDev} up`,
    `route add ${ip}/32 dev ${rootDev}`,
  ]);
  await ipBatch([
    'link set lo up',
    'link set eth0 up',
    `addr add ${ip}/32 dev eth0`,
    `route add ${gateway}/32 dev eth0 scope link`,
    `route add default via ${gateway} dev eth0`,
  ], name);
}

export interface PodOptions {
  name: string;
  ip: string;
  /** Default 80. */
  port?: number;
  /** Artificial delay before each answer (slow-backend profiles). */
  delayMs?: number;
}

export interface Pod {
  name: string;
  ip: string;
  port: number;
  pid: number;
  /** Stops the server and deletes the netns (and so the veth pair). */
  stop(): Promise<void>;
}

/** Creates a pod netns wired to the node and starts its HTTP server; resolves once it listens. */
export async function createPod(opts: PodOptions): Promise<Pod> {
  checkName(opts.name);
  checkRange(opts.ip, 'pod');
  const port = opts.port ?? 80;
  await addEndpoint(opts.name, opts.ip, `lp-${opts.name}`, POD_GATEWAY);
  const child = spawn('ip', ['netns', 'exec', opts.name, process.execPath, POD_SERVER,
    '--name', opts.name, '--port', String(port), '--delay-ms', String(opts.delayMs ?? 0)],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.set(opts.name, child);
  // A server must never keep the test process alive; exitHandler kills what is left.
  child.unref();
  if (!exitHooked) {
    process.on('exit', killServersOnExit);
    exitHooked = true;
  }
  await new Promise<void>((resolveReady, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`pod ${opts.name}: server not ready after 30 s: ${err}`)), 30_000);
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('ready\n')) { clearTimeout(timer); resolveReady(); }
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => { err += d; });
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`pod ${opts.name}: server exited (${code}): ${err}`)); });
  }).finally(() => {
    // Stop reading: the pipes must not keep the event loop alive either.
    child.stdout?.destroy();
    child.stderr?.destroy();
  });
  return {
    name: opts.name, ip: opts.ip, port, pid: child.pid ?? -1,
    stop: async () => {
      await stopServer(opts.name);
      await deleteNetns(opts.name);
    },
  };
}

function killServersOnExit(): void {
  for (const child of servers.values()) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

async function stopServer(name: string): Promise<void> {
  const child = servers.get(name);
  servers.delete(name);
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((done) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); }, 3000);
    child.once('exit', () => { clearTimeout(timer); done(); });
    child.kill('SIGTERM');
  });
}

export interface ClientOptions {
  name: string;
  ip: string;
}

/** Creates a client netns wired to the node (default route via the node: VIPs, pods). */
export async function createClient(opts: ClientOptions): Promise<{ name: string; ip: string }> {
  checkName(opts.name);
  checkRange(opts.ip, 'client');
  await addEndpoint(opts.name, opts.ip, `lc-${opts.name}`, CLIENT_GATEWAY);
  return { name: opts.name, ip: opts.ip };
}

export interface LoadOptions {
  /** Client netns to send from. */
  client: string;
  url: string;
  count: number;
  /** Requests in flight at once; default 1 (sequential). */
  concurrency?: number;
  /** Re-use connections (HTTP keep-alive); default false: one connection per request. */
  keepAlive?: boolean;
  timeoutMs?: number;
}

/** Sends a batch of HTTP requests from a client netns in ONE loadgen process; returns its result. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const args = ['--url', opts.url, '--count', String(opts.count), '--concurrency', String(opts.concurrency ?? 1),
    '--timeout-ms', String(opts.timeoutMs ?? 5000)];
  if (opts.keepAlive) args.push('--keep-alive');
  const r = await netnsExec(opts.client, [process.execPath, LOADGEN, ...args]);
  if (r.code !== 0) throw new Error(`loadgen in ${opts.client} exited with ${r.code}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as LoadResult;
}

/** A fresh, empty netns (lo up): its own IPVS table, conntrack, iptables. */
export async function freshNetns(name: string): Promise<void> {
  checkName(name);
  if (process.env.IPVS_LAB !== '1') throw new Error('lab topology: only inside the lab VM (IPVS_LAB=1)');
  namespaces.add(name);
  await runOk('ip', ['netns', 'add', name]);
  await runOk('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
}

/** Deletes a netns (its veth pairs go with it). Missing is fine. */
export async function deleteNetns(name: string): Promise<void> {
  await stopServer(name);
  namespaces.delete(name);
  if (existsSync(`/run/netns/${name}`)) await runOk('ip', ['netns', 'del', name]);
}

/** Removes everything the helpers created: servers, netns (with their veths), lab dummies. */
export async function cleanupTopology(): Promise<void> {
  await Promise.all([...servers.keys()].map(stopServer));
  const lines = [...namespaces].filter((n) => existsSync(`/run/netns/${n}`)).map((n) => `netns del ${n}`);
  namespaces.clear();
  nodeReady = undefined;
  for (const dev of [VIP_DEV, NODE_DEV]) if (existsSync(`/sys/class/net/${dev}`)) lines.push(`link del ${dev}`);
  if (lines.length) await runOk('ip', ['-force', '-batch', '-'], { input: `${lines.join('\n')}\n` });
}
