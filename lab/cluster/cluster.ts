// The lab cluster inside the lab VM (IPVS_LAB=1): node netns on a shared bridge, pods behind
// them, an external client, and the operator on every node started from manifests/daemonset.yaml
// (see nodes.ts for the addressing, daemonset.ts for how the container becomes a process). IPVS,
// netfilter and conntrack are per network namespace, so each operator runs inside its node's
// netns; nothing global is loaded but kernel modules. The API server is not started here: the
// caller says where the nodes reach it (ApiAccess) and registers objects through apiRequest().
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, type WriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { run, runOk, stopChild, type RunResult } from '../proc.js';
import { projectRoot } from '../paths.js';
import { containerScript, graceMsOf, launchFromDaemonSet, podFromDaemonSet, type Launch } from './daemonset.js';
import { NETNS_ANNOTATION } from './exec.js';
import { Kubelet, type PodLaunch } from './kubelet.js';
import { WorkloadKubelet } from './workload-kubelet.js';
import {
  BRIDGE, EXTERNAL, LB_POOL, NODE_SYSCTLS, POD_CIDR, SERVICE_CIDR, bridgeLines, externalLines, freePodIndex, nodeLines, nodeRootLines, planNodes,
  planPod, podLines, podNodeLines, type NodePlan, type PodPlan,
} from './nodes.js';

const POD_SERVER = fileURLToPath(new URL('./pod.js', import.meta.url));
/** SCTP echo server and client (Node.js has no SCTP sockets): Debian's python3, from the source tree. */
export const SCTP_TOOL = join(projectRoot, 'lab', 'cluster', 'sctp.py');
const APISERVER = fileURLToPath(new URL('./apiserver-main.js', import.meta.url));
const KUBE_PROXY = fileURLToPath(new URL('./kube-proxy.js', import.meta.url));
const OPERATOR_CLI = join(projectRoot, 'dist', 'src', 'cli', 'main.js');
/** The node flags of the image's `ipvs-operator` wrapper (Dockerfile), so a lab node runs the operator as the image does. */
export const IMAGE_NODE_FLAGS = ['--optimize-for-size'];
export const DAEMONSET_FILE = join(projectRoot, 'manifests', 'daemonset.yaml');
/** Where nodes keep their "host" files (hostPath volumes, logs, kubeconfig): one directory each. */
export const CLUSTER_RUN_DIR = '/run/lab-cluster';
/** Where the lab's kubelet writes the operator pods' container logs (podlog.ts), which the API server serves to `kubectl logs`. */
export const POD_LOG_DIR = join(CLUSTER_RUN_DIR, 'pods');
/** The namespace of the operator's DaemonSet pods (manifests/daemonset.yaml). */
const OPERATOR_NAMESPACE = 'ipvs-operator';
/** Every IPVS scheduler module, loaded once: the operator's container cannot load modules. */
export const MODULES = ['ip_vs', 'ip_vs_rr', 'ip_vs_wrr', 'ip_vs_lc', 'ip_vs_wlc', 'ip_vs_lblc', 'ip_vs_lblcr', 'ip_vs_dh',
  'ip_vs_sh', 'ip_vs_sed', 'ip_vs_nq', 'ip_vs_fo', 'ip_vs_ovf', 'ip_vs_mh', 'nf_conntrack', 'br_netfilter', 'sctp'] as const;

/** How the nodes reach the API server, and with which credentials. */
export interface ApiAccess {
  /** e.g. https://172.18.0.2:6443; reachable from every node netns and from the VM's root ns. */
  url: string;
  /** PEM CA of an https server (the service account's ca.crt); undefined for http. */
  caPem?: string | undefined;
  /** The operator's ServiceAccount token (RBAC from manifests/clusterrole.yaml); undefined: none. */
  operatorToken?: string | undefined;
  /** A token allowed everything, for the cluster's own writes (Nodes, Pods) and kubectl. */
  adminToken?: string | undefined;
}

export interface ClusterOptions {
  nodes?: number;
  api: ApiAccess;
  /** The DaemonSet manifest the operators are started from (default manifests/daemonset.yaml). */
  daemonSetFile?: string;
  log?: (line: string) => void;
}

/** A pod of the cluster. */
export interface LabPod extends PodPlan {
  labels: Record<string, string>;
  /** The server process (undefined for a client-only pod). */
  server: ChildProcess | undefined;
  /** Its SCTP echo servers (sctpPorts). */
  sctp: ChildProcess[];
  /** The namespace of its Pod object, when it was registered with the API server. */
  registered?: string;
  /** Its terminationGracePeriodSeconds, in ms: how long deletePod lets the server finish. */
  graceMs: number;
}

/** What a pod's server reported as it terminated (pod.ts): its connections and requests at SIGTERM, how many it cut at the grace deadline. */
export interface PodTermination { open: number; inFlight: number; cut: number; ms: number }

interface OperatorRun {
  child: ChildProcess;
  log: WriteStream;
  exited: Promise<number | null>;
}

/** Sends one request to the API server with the admin token; the parsed body, or throws (with `status`) with the Status message. */
export function apiRequest(api: ApiAccess, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const data = body !== undefined ? JSON.stringify(body) : undefined;
  if (data !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  if (api.adminToken) headers.authorization = `Bearer ${api.adminToken}`;
  const url = new URL(`${api.url}${path}`);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, { method, headers, ...(api.caPem ? { ca: api.caPem } : {}), timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => { text += d; });
      res.on('end', () => {
        let parsed: Record<string, unknown> = {};
        try {
          parsed = text ? JSON.parse(text) as Record<string, unknown> : {};
        } catch {
          parsed = { message: text };
        }
        const code = res.statusCode ?? 0;
        if (code >= 200 && code < 300) resolve(parsed);
        else reject(Object.assign(new Error(`${method} ${path}: ${code} ${String(parsed.message ?? text)}`), { status: code }));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on('error', reject);
    req.end(data);
  });
}

/** The lab API server process (lab/cluster/apiserver-main.ts) over its etcd, and how to reach it. */
export interface ApiServerProcess {
  access: ApiAccess;
  child: ChildProcess;
  /** Stops the API server (SIGTERM: it writes what etcd lacks and exits) and starts it again on the same etcd, port and certificate; resolves once it listens. */
  restart(): Promise<void>;
  /** Stops the API server, then etcd. */
  stop(): Promise<void>;
}

/**
 * Starts etcd (Debian's, etcd.ts) and the API server inside the control-plane node's netns: etcd
 * on the node's address, port 2379, with its data under /run/lab-cluster/etcd, the API server on
 * 0.0.0.0:6443 over HTTPS (a self-signed certificate for the node's address), with two tokens: an
 * admin (system:masters) for the cluster's own writes and kubectl, and the ipvs-operator
 * ServiceAccount's, authorized by manifests/clusterrole.yaml + clusterrolebinding.yaml. Resolves
 * once it listens.
 */
export async function startApiServer(controlPlane: NodePlan): Promise<ApiServerProcess> {
  const dir = join(CLUSTER_RUN_DIR, 'apiserver');
  mkdirSync(dir, { recursive: true });
  const { makeSelfSignedCert } = await import('./tls.js');
  const { EtcdProcess } = await import('./etcd.js');
  // On the node's address, as kubeadm's etcd also listens: this process (the VM's root netns)
  // checks it is up from outside the node's netns, where its 127.0.0.1 is not reachable.
  const etcd = await EtcdProcess.start({ dir: join(CLUSTER_RUN_DIR, 'etcd'), client: `http://${controlPlane.ipv4}:2379`, peer: 'http://127.0.0.1:2380', netns: controlPlane.name });
  const cert = makeSelfSignedCert(dir, { ips: [controlPlane.ipv4, '127.0.0.1'], dns: ['kubernetes', 'kubernetes.default', 'localhost'] });
  const adminToken = randomBytes(16).toString('hex');
  const operatorToken = randomBytes(16).toString('hex');
  const tokens = join(dir, 'tokens.csv');
  writeFileSync(tokens, `${adminToken},kubernetes-admin,uid-admin,"system:masters"
${operatorToken},system:serviceaccount:ipvs-operator:ipvs-operator,uid-ipvs-operator
`, { mode: 0o600 });
  const argv = ['netns', 'exec', controlPlane.name, process.execPath, APISERVER,
    '--listen', '0.0.0.0:6443', '--cert', cert.cert, '--key', cert.key, '--tokens', tokens,
    '--rbac', join(projectRoot, 'manifests', 'clusterrole.yaml'), '--rbac', join(projectRoot, 'manifests', 'clusterrolebinding.yaml'),
    '--service-cidr', SERVICE_CIDR, '--node-port-range', '30000-32767', '--advertise-address', controlPlane.ipv4,
    '--load-balancer-pool', LB_POOL, '--etcd-servers', etcd.url, '--pod-log-dir', POD_LOG_DIR, '--exec', 'netns'];
  let child: ChildProcess;
  try {
    child = await spawnApiServer(argv);
  } catch (e) {
    await etcd.stop();
    throw e;
  }
  const p: ApiServerProcess = {
    access: { url: `https://${controlPlane.ipv4}:6443`, caPem: readFileSync(cert.cert, 'utf8'), operatorToken, adminToken },
    get child() { return child; },
    restart: async () => {
      await stopChild(child, 30_000);
      child = await spawnApiServer(argv);
    },
    stop: async () => {
      await stopChild(child, 30_000);
      await etcd.stop();
    },
  };
  return p;
}

/** `ip ...argv` (the API server in a netns); resolves with the process once it reports ready. */
async function spawnApiServer(argv: readonly string[]): Promise<ChildProcess> {
  const child = spawn('ip', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.unref();
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err = (err + d).slice(-4000); });
  await new Promise<void>((resolveReady, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`lab cluster: the API server is not ready after 600 s: ${err}`)), 600_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('"ready":true')) { clearTimeout(timer); resolveReady(); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`lab cluster: the API server exited (${code}): ${err}`)); });
  });
  child.stdout!.destroy();
  return child;
}

/** Runs `ip -batch -` (in netns `ns` when given); `force` keeps going past errors. */
async function ipBatch(lines: readonly string[], ns?: string, force = false): Promise<void> {
  if (lines.length === 0) return;
  const args = [...(ns ? ['-n', ns] : []), ...(force ? ['-force'] : []), '-batch', '-'];
  await runOk('ip', args, { input: `${lines.join('\n')}\n` });
}

/** The cluster (see the file comment). Build it with LabCluster.up(); down() removes all of it. */
export class LabCluster {
  readonly pods = new Map<string, LabPod>();
  /** Runs the operator pods (kubelet.ts). */
  private readonly kubelet = new Kubelet({
    request: (method, path, body) => apiRequest(this.api, method, path, body), endpoint: () => this.api, logDir: POD_LOG_DIR, log: (l) => this.log(l),
  });
  /** Runs the workload pods (a Deployment's): workload-kubelet.ts; started by runWorkloads(). */
  private readonly workloadKubelet = new WorkloadKubelet({
    request: (method, path, body) => apiRequest(this.api, method, path, body), endpoint: () => this.api, log: (l) => this.log(l),
    host: {
      nodes: () => this.nodes.map((n) => n.name),
      isHarnessPod: (name) => this.pods.has(name) && !this.workloadPods.has(name),
      startPod: async (name, node, run) => {
        this.workloadPods.add(name);
        try {
          const p = await this.addPod({ name, node, ports: run.tcp, udpPorts: run.udp, terminationGracePeriodSeconds: run.graceSeconds });
          return { ipv4: p.ipv4, ipv6: p.ipv6, hostIP: this.node(node).ipv4, pid: p.server?.pid };
        } catch (e) {
          if (!this.pods.has(name)) this.workloadPods.delete(name);
          throw e;
        }
      },
      stopPod: async (name) => {
        await this.deletePod(name);
        this.workloadPods.delete(name);
      },
    },
  });
  /** The pods (netns names) the workload kubelet made. */
  private readonly workloadPods = new Set<string>();
  private readonly kubeProxies = new Map<string, OperatorRun>();
  private readonly log: (line: string) => void;
  private daemonSet: unknown;

  private constructor(readonly nodes: NodePlan[], public api: ApiAccess, private readonly daemonSetFile: string, log?: (line: string) => void) {
    this.log = log ?? (() => undefined);
  }

  /** Builds nodes, bridge and external client, and registers the Nodes; operators are started by startOperators(). */
  static async up(o: ClusterOptions): Promise<LabCluster> {
    if (process.env.IPVS_LAB !== '1') throw new Error('lab cluster: only inside the lab VM (IPVS_LAB=1 is not set)');
    const c = new LabCluster(planNodes(o.nodes ?? 4), o.api, o.daemonSetFile ?? DAEMONSET_FILE, o.log);
    if (existsSync(`/sys/class/net/${BRIDGE}`)) throw new Error('lab cluster: a cluster is up already (bridge kind exists)');
    await runOk('modprobe', ['-a', ...MODULES]);
    await ipBatch([...bridgeLines(), ...c.nodes.flatMap(nodeRootLines)]);
    await Promise.all([
      ipBatch(externalLines(), EXTERNAL.name),
      ...c.nodes.map((n) => ipBatch(nodeLines(n, c.nodes), n.name)),
      ...c.nodes.map((n) => runOk('ip', ['netns', 'exec', n.name, 'sysctl', '-q', '-w', ...NODE_SYSCTLS])),
    ]);
    for (const n of c.nodes) mkdirSync(c.nodeRoot(n.name), { recursive: true });
    return c;
  }

  /** The directory standing for node `name`'s `/` (hostPath volumes). */
  nodeRoot(name: string): string {
    return join(CLUSTER_RUN_DIR, 'nodes', name);
  }

  node(name: string): NodePlan {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`lab cluster: no node ${name} (nodes: ${this.nodes.map((x) => x.name).join(', ')})`);
    return n;
  }

  /** The Node objects, as the kubelets register them (addresses, pod CIDRs, role labels). */
  nodeObjects(): object[] {
    return this.nodes.map((n) => ({
      apiVersion: 'v1', kind: 'Node',
      metadata: {
        name: n.name,
        labels: {
          'kubernetes.io/hostname': n.name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64',
          ...(n.role === 'control-plane' ? { 'node-role.kubernetes.io/control-plane': '' } : {}),
        },
      },
      spec: {
        podCIDR: n.podCIDR, podCIDRs: [n.podCIDR, n.podCIDRv6],
        ...(n.role === 'control-plane' ? { taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] } : {}),
      },
      status: {
        addresses: [{ type: 'InternalIP', address: n.ipv4 }, { type: 'InternalIP', address: n.ipv6 }, { type: 'Hostname', address: n.name }],
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'lab node' }],
      },
    }));
  }

  /** Creates (or replaces) the Node objects in the API server. */
  async registerNodes(): Promise<void> {
    for (const node of this.nodeObjects()) await this.apply('/api/v1/nodes', node as { metadata: { name: string } });
  }

  /** POST, or PUT over an existing object (create-or-replace). */
  async apply(collection: string, obj: { metadata: { name: string } }): Promise<Record<string, unknown>> {
    try {
      return await apiRequest(this.api, 'POST', collection, obj);
    } catch (e) {
      if ((e as { status?: number }).status !== 409) throw e;
      const current = await apiRequest(this.api, 'GET', `${collection}/${obj.metadata.name}`);
      const rv = (current.metadata as { resourceVersion?: string }).resourceVersion;
      return apiRequest(this.api, 'PUT', `${collection}/${obj.metadata.name}`, { ...obj, metadata: { ...obj.metadata, resourceVersion: rv } });
    }
  }

  /** The DaemonSet's container as it runs on node `name`. */
  launch(name: string): Launch {
    const n = this.node(name);
    const l = launchFromDaemonSet(this.operatorDaemonSet(), this.podFacts(n));
    if (new URL(this.api.url).protocol === 'http:') {
      // client-node's in-cluster config is https only: over http the node gets a kubeconfig
      // (KUBECONFIG, read when KUBERNETES_SERVICE_HOST is unset) with the same server and token.
      delete l.env.KUBERNETES_SERVICE_HOST;
      delete l.env.KUBERNETES_SERVICE_PORT;
      delete l.env.KUBERNETES_SERVICE_PORT_HTTPS;
      l.env.KUBECONFIG = join(this.nodeRoot(n.name), 'kubeconfig');
    }
    return l;
  }

  private operatorDaemonSet(): unknown {
    this.daemonSet ??= parseAllDocuments(readFileSync(this.daemonSetFile, 'utf8')).map((d) => d.toJS() as unknown)
      .find((d) => (d as { kind?: string } | null)?.kind === 'DaemonSet');
    return this.daemonSet;
  }

  private podFacts(n: NodePlan) {
    const url = new URL(this.api.url);
    return {
      nodeName: n.name, podName: `ipvs-operator-${n.name}`, namespace: OPERATOR_NAMESPACE, podIP: n.ipv4,
      serviceAccountName: 'ipvs-operator', apiHost: url.hostname, apiPort: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
    };
  }

  private writeCredentials(name: string): string | undefined {
    const root = this.nodeRoot(name);
    const url = new URL(this.api.url);
    if (url.protocol === 'http:') {
      writeFileSync(join(root, 'kubeconfig'), JSON.stringify({
        apiVersion: 'v1', kind: 'Config', 'current-context': 'lab',
        clusters: [{ name: 'lab', cluster: { server: this.api.url, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'ipvs-operator', user: this.api.operatorToken ? { token: this.api.operatorToken } : {} }],
        contexts: [{ name: 'lab', context: { cluster: 'lab', user: 'ipvs-operator' } }],
      }));
      return undefined;
    }
    const sa = join(root, 'serviceaccount');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), this.api.operatorToken ?? '');
    writeFileSync(join(sa, 'ca.crt'), this.api.caPem ?? '');
    writeFileSync(join(sa, 'namespace'), 'ipvs-operator');
    return sa;
  }

  /**
   * Starts the operator on node `name` as its DaemonSet pod would run; resolves once /readyz
   * answers. From the working tree (dist/, this node binary with the image's node flags), or with
   * `imageRootfs` from the built image's filesystem (`lab image export`): the container's `/` is
   * the image's, and the DaemonSet's command is looked up in it as a runtime does.
   * As a kubelet (kubelet.ts): its Pod `ipvs-operator-<node>` is created in the API server first,
   * the container restarts with back-off whenever it exits and its status is the Pod's; a
   * `kubectl delete pod` of it stops it and starts a new pod. Its output goes to
   * operator.log (all runs) and to the run's own file under POD_LOG_DIR (`kubectl logs`). Throws
   * when the first run exits before it is ready.
   */
  async startOperator(name: string, readyMs = 900_000, extraArgs: readonly string[] = [], imageRootfs?: string): Promise<void> {
    const supervisor = await this.kubelet.run(name, () => this.operatorLaunch(name, extraArgs, imageRootfs));
    try {
      await supervisor.whenReady(readyMs);
    } catch (e) {
      await this.stopOperator(name);
      throw new Error(`lab cluster: the operator on ${name}: ${(e as Error).message}: ${this.operatorLog(name).slice(-2000)}`);
    }
    this.log(`operator ready on ${name}`);
  }

  /** The operator's pod on node `name`, its container script written: what the kubelet runs (again for each new pod). */
  private operatorLaunch(name: string, extraArgs: readonly string[], imageRootfs: string | undefined): PodLaunch {
    const n = this.node(name);
    const l = this.launch(name);
    l.argv.push(...extraArgs);
    const serviceAccount = this.writeCredentials(name);
    const image = imageRootfs ? { rootfs: imageRootfs, dir: join(this.nodeRoot(name), 'container') } : undefined;
    const program = image ? [l.argv[0]!] : [process.execPath, ...IMAGE_NODE_FLAGS, OPERATOR_CLI];
    const files = l.env.KUBECONFIG ? [l.env.KUBECONFIG] : [];
    const script = containerScript(l, { nodeRoot: this.nodeRoot(name), program, serviceAccount, image, files, keep: [projectRoot] });
    writeFileSync(join(this.nodeRoot(name), 'operator.sh'), script);
    const ds = this.operatorDaemonSet();
    return {
      pod: podFromDaemonSet(ds, this.podFacts(n)), hostIP: n.ipv4, hostIPv6: n.ipv6, graceMs: graceMsOf(ds),
      readyUrl: `http://${n.ipv4}:${l.readyPort ?? 10262}${l.readyPath ?? '/readyz'}`,
      spawn: (podLog) => this.spawnOperator(name, podLog),
    };
  }

  /** One run of node `name`'s operator container: `ip netns exec <node> sh operator.sh`, its output appended to operator.log and `podLog`. */
  private spawnOperator(name: string, podLog: string): ChildProcess {
    mkdirSync(dirname(podLog), { recursive: true });
    const logs = [createWriteStream(join(this.nodeRoot(name), 'operator.log'), { flags: 'a' }), createWriteStream(podLog, { flags: 'a' })];
    const child = spawn('ip', ['netns', 'exec', name, 'sh', join(this.nodeRoot(name), 'operator.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
    for (const log of logs) {
      child.stdout!.pipe(log, { end: false });
      child.stderr!.pipe(log, { end: false });
    }
    // 'close': after the pipes gave their last bytes ('exit' may come before).
    child.once('close', () => { for (const log of logs) log.end(); });
    return child;
  }

  /** The pid of node `name`'s running operator (its container's process; undefined when none runs, e.g. during a back-off). */
  operatorPid(name: string): number | undefined {
    return this.kubelet.pid(name);
  }

  /** Starts the operator on every node, all at once; the nodes in `fromImage.nodes` run it from the image's filesystem. */
  async startOperators(fromImage?: { rootfs: string; nodes: readonly string[] }, extraArgs: readonly string[] = []): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.startOperator(n.name, undefined, extraArgs, fromImage?.nodes.includes(n.name) ? fromImage.rootfs : undefined)));
  }

  /** The operator's log file on node `name` (JSON lines). */
  operatorLog(name: string): string {
    const f = join(this.nodeRoot(name), 'operator.log');
    return existsSync(f) ? readFileSync(f, 'utf8') : '';
  }

  /**
   * Stops the operator on `name` on purpose: SIGTERM (the kernel table is left as it is, as on a
   * pod deletion), no restart, and its Pod object removed; its exit code. A replacement pod being
   * started (after a `kubectl delete pod`) is waited for and stopped too.
   */
  stopOperator(name: string, removePod = true): Promise<number | null> {
    return this.kubelet.stop(name, removePod);
  }

  /**
   * Starts kube-proxy's iptables mode on node `name` (kube-proxy.ts: it follows the API server's
   * Services and EndpointSlices with the admin token, and owns the Services without the
   * service-proxy-name label); resolves after its first sync. Its log: kubeProxyLog(name).
   */
  async startKubeProxy(name: string): Promise<void> {
    if (this.kubeProxies.has(name)) throw new Error(`lab cluster: kube-proxy on ${name} runs already`);
    const dir = this.nodeRoot(name);
    const tokenFile = join(dir, 'kube-proxy.token');
    writeFileSync(tokenFile, this.api.adminToken ?? '', { mode: 0o600 });
    const args = [KUBE_PROXY, '--server', this.api.url, '--token-file', tokenFile, '--cluster-cidr', POD_CIDR];
    if (this.api.caPem) {
      writeFileSync(join(dir, 'kube-proxy.ca.crt'), this.api.caPem);
      args.push('--ca', join(dir, 'kube-proxy.ca.crt'));
    }
    const log = createWriteStream(join(dir, 'kube-proxy.log'), { flags: 'a' });
    const child = spawn('ip', ['netns', 'exec', name, process.execPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    void exited.then(() => log.end());
    this.kubeProxies.set(name, { child, log, exited });
    await new Promise<void>((ready, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`lab cluster: kube-proxy on ${name} not ready after 120 s: ${this.kubeProxyLog(name).slice(-2000)}`)), 120_000);
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out = (out + d).slice(-100);
        if (out.includes('ready\n')) { clearTimeout(timer); ready(); }
      });
      void exited.then((code) => { clearTimeout(timer); reject(new Error(`lab cluster: kube-proxy on ${name} exited with ${code}: ${this.kubeProxyLog(name).slice(-2000)}`)); });
    });
    this.log(`kube-proxy (iptables mode) synced on ${name}`);
  }

  /** kube-proxy on every node, all at once. */
  async startKubeProxies(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.startKubeProxy(n.name)));
  }

  /** SIGTERM to kube-proxy on `name`: it removes its jumps and chains and exits; its exit code. */
  async stopKubeProxy(name: string): Promise<number | null> {
    const kp = this.kubeProxies.get(name);
    if (!kp) return null;
    this.kubeProxies.delete(name);
    if (kp.child.exitCode !== null || kp.child.signalCode !== null) return kp.child.exitCode;
    const timer = setTimeout(() => kp.child.kill('SIGKILL'), 30_000);
    kp.child.kill('SIGTERM');
    const code = await kp.exited;
    clearTimeout(timer);
    return code;
  }

  /** kube-proxy's log on node `name` (JSON lines). */
  kubeProxyLog(name: string): string {
    const f = join(this.nodeRoot(name), 'kube-proxy.log');
    return existsSync(f) ? readFileSync(f, 'utf8') : '';
  }

  /**
   * Creates a pod on `node`: its netns wired to the node, the whoami server (pod.ts) when `serve`
   * (default true), and its Pod object when the API server serves pods (Pod-lite: the
   * EndpointSlice controller follows its labels, node and readiness).
   */
  async addPod(o: { name: string; node: string; labels?: Record<string, string>; serve?: boolean; ports?: number[]; udpPorts?: number[]; sctpPorts?: number[]; namespace?: string; register?: boolean; terminationGracePeriodSeconds?: number }): Promise<LabPod> {
    if (this.pods.has(o.name) || existsSync(`/run/netns/${o.name}`)) throw new Error(`lab cluster: pod ${o.name} exists already`);
    const n = this.node(o.node);
    const used = new Set([...this.pods.values()].filter((p) => p.node === n.name).map((p) => Number(p.ipv4.split('.')[3])));
    const plan = planPod(o.name, n, freePodIndex(used));
    const graceMs = (o.terminationGracePeriodSeconds ?? 30) * 1000;
    const pod: LabPod = { ...plan, labels: o.labels ?? {}, server: undefined, sctp: [], graceMs };
    this.pods.set(o.name, pod);
    await ipBatch([`netns add ${plan.name}`]);
    await ipBatch(podNodeLines(plan, n), n.name);
    await ipBatch(podLines(plan, n), plan.name);
    if (o.serve ?? true) pod.server = await startServer(plan.name, [process.execPath, POD_SERVER, '--name', plan.name, '--ports', (o.ports ?? [80]).join(','), '--udp-ports', (o.udpPorts ?? [53]).join(','), '--grace-ms', String(graceMs)]);
    for (const port of o.sctpPorts ?? []) pod.sctp.push(await startServer(plan.name, ['python3', SCTP_TOOL, 'serve', '--name', plan.name, '--port', String(port)]));
    if (o.register) pod.registered = o.namespace ?? 'default';
    if (o.register) await this.apply(`/api/v1/namespaces/${o.namespace ?? 'default'}/pods`, this.podObject(o.name, o.namespace) as { metadata: { name: string } });
    return pod;
  }

  /** The Pod-lite object of a pod (namespace default unless given). */
  podObject(name: string, namespace = 'default', ready = true): object {
    const p = this.pods.get(name);
    if (!p) throw new Error(`lab cluster: no pod ${name}`);
    return {
      apiVersion: 'v1', kind: 'Pod',
      // Where `kubectl exec` runs its commands (exec.ts): the pod's own netns.
      metadata: { name, namespace, labels: p.labels, annotations: { [NETNS_ANNOTATION]: p.name } },
      spec: { nodeName: p.node, containers: [{ name: 'whoami', image: 'lab/pod', ports: [{ name: 'web', containerPort: 80, protocol: 'TCP' }, { name: 'dns', containerPort: 53, protocol: 'UDP' }] }] },
      status: {
        phase: 'Running', podIP: p.ipv4, podIPs: [{ ip: p.ipv4 }, { ip: p.ipv6 }], hostIP: this.node(p.node).ipv4,
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      },
    };
  }

  /**
   * Deletes a pod as a kubelet does: SIGTERM to its server, which finishes what it is answering
   * within the grace period (pod.ts); SIGKILL only after it (plus a margin for a slow machine);
   * then its netns goes (its veth with it; the node's route too). Resolves with the server's
   * termination report (undefined: no server, or it died without one). Missing pod: nothing.
   */
  async deletePod(name: string): Promise<PodTermination | undefined> {
    const p = this.pods.get(name);
    if (!p) return undefined;
    this.pods.delete(name);
    const [report] = await Promise.all([p.server ? terminate(p.server, p.graceMs + 10_000) : undefined, ...p.sctp.map((c) => stopChild(c))]);
    if (p.registered) await apiRequest(this.api, 'DELETE', `/api/v1/namespaces/${p.registered}/pods/${name}`).catch((e: { status?: number }) => { if (e.status !== 404) throw e; });
    if (existsSync(`/run/netns/${name}`)) await runOk('ip', ['netns', 'del', name]);
    return report;
  }

  /** Runs a command in a node's or pod's netns (or `external`); never throws on a non-zero exit. */
  exec(target: string, cmd: readonly string[], input?: string): Promise<RunResult> {
    if (!this.nodes.some((n) => n.name === target) && !this.pods.has(target) && target !== EXTERNAL.name) {
      throw new Error(`lab cluster: no node or pod ${target}`);
    }
    return run('ip', ['netns', 'exec', target, ...cmd], input !== undefined ? { input } : {});
  }

  /**
   * Starts the kubelet of workload pods (workload-kubelet.ts): from now on a Pod bound to a node
   * that the harness did not make (a Deployment's) gets its netns, address and server, and
   * terminates as a kubelet does. Needs the API server's workload controllers (its `lab` options)
   * to have Deployments turned into bound Pods.
   */
  runWorkloads(): void {
    this.workloadKubelet.start();
  }

  /** Stops operators and pods and removes every netns, the bridge and the nodes' directories. */
  async down(): Promise<void> {
    await this.workloadKubelet.stop();
    await this.kubelet.stopAll();
    await Promise.all([...this.kubeProxies.keys()].map((n) => this.stopKubeProxy(n)));
    await Promise.all([...this.pods.values()].flatMap((p) => [p.server, ...p.sctp]).map(stopChild));
    const lines = [...this.pods.keys(), ...this.nodes.map((n) => n.name), EXTERNAL.name]
      .filter((ns) => existsSync(`/run/netns/${ns}`)).map((ns) => `netns del ${ns}`);
    this.pods.clear();
    if (existsSync(`/sys/class/net/${BRIDGE}`)) lines.push(`link del ${BRIDGE}`);
    await ipBatch(lines, undefined, true);
    rmSync(CLUSTER_RUN_DIR, { recursive: true, force: true });
  }
}

/** What each server printed after "ready" (the last 4000 characters): pod.ts's termination report. */
const serverOutput = new WeakMap<ChildProcess, string>();

/** Starts `argv` in netns `ns`; resolves once it prints "ready". */
async function startServer(ns: string, argv: readonly string[]): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.unref();
  await new Promise<void>((resolveReady, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`pod ${ns}: server not ready after 60 s: ${err}`)), 60_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      if (serverOutput.has(child)) {
        serverOutput.set(child, (serverOutput.get(child)! + d).slice(-4000));
        return;
      }
      out += d;
      if (out.includes('ready\n')) {
        clearTimeout(timer);
        serverOutput.set(child, out.slice(out.indexOf('ready\n') + 6));
        // Read on to the termination report, without holding a caller's event loop open.
        for (const s of [child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();
        resolveReady();
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { err = (err + d).slice(-4000); });
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`pod ${ns}: server exited (${code}): ${err}`)); });
  });
  return child;
}

/** SIGTERM, then SIGKILL after `killAfterMs`; the pod server's termination report, if it printed one. */
async function terminate(child: ChildProcess, killAfterMs: number): Promise<PodTermination | undefined> {
  await stopChild(child, killAfterMs);
  // The pipe may deliver the last line just after 'exit': wait for the stream's end.
  const out = child.stdout;
  if (out && !out.readableEnded && !out.destroyed) await new Promise((r) => { out.once('end', r); out.once('close', r); });
  const line = (serverOutput.get(child) ?? '').split('\n').find((l) => l.startsWith('{"terminated"'));
  return line ? (JSON.parse(line) as { terminated: PodTermination }).terminated : undefined;
}
