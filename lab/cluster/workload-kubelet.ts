// The lab cluster's kubelet for workload pods (a Deployment's, a `kubectl run`'s): every Pod bound
// to one of the cluster's nodes that the harness did not make itself (not an operator's hostNetwork
// pod, not a LabCluster.addPod pod) gets what a kubelet and its CNI give it. cluster.ts wires it in.
//   start   a network namespace behind its node with the next free address of the node's pod CIDR
//           (LabCluster.addPod's wiring), the pod server (pod.ts) on the container ports, then the
//           status: Running, podIP/podIPs, hostIP, Ready (the server listens: ready);
//   stop    on a deletionTimestamp: SIGTERM and the pod's grace period (pod.ts finishes what it is
//           answering), the netns removed, then the Pod deleted with grace 0 as the kubelet's last
//           word; a Pod deleted outright (a DELETED event, or a relist without it) is stopped alike.
// One operation per pod at a time, in the order seen; a pod of the same name with a new UID waits
// for the old one's stop. decidePod is the pure decision.
import { type ApiEndpoint, type ApiRequest, type PodsUpdate, followPods } from './kubelet.js';

/** What the kubelet reads of a Pod. */
export interface WorkloadPod {
  metadata: { name: string; namespace?: string; uid?: string; deletionTimestamp?: string };
  spec?: {
    nodeName?: string; hostNetwork?: boolean; terminationGracePeriodSeconds?: number;
    containers?: Array<{ name?: string; image?: string; ports?: Array<{ containerPort?: number; protocol?: string }> }>;
  };
  status?: { phase?: string };
}

/** How a pod runs: its server's TCP and UDP ports and its grace period. */
export interface PodRun { tcp: number[]; udp: number[]; graceSeconds: number }

/** What the kubelet needs of the cluster (LabCluster): the nodes, the pods the harness made, starting and stopping a pod's netns and server. */
export interface WorkloadHost {
  nodes(): readonly string[];
  /** Whether `name` is a pod the harness made itself (LabCluster.addPod), which this kubelet leaves alone. */
  isHarnessPod(name: string): boolean;
  /** Creates the pod's netns on `node` and starts its server; its addresses. */
  startPod(name: string, node: string, run: PodRun): Promise<{ ipv4: string; ipv6: string; hostIP: string; pid: number | undefined }>;
  /** Stops the pod's server (SIGTERM, the grace period) and removes its netns. */
  stopPod(name: string): Promise<void>;
}

/** What to do about one pod update, given the UID this kubelet runs under the pod's key (if any). */
export type PodDecision = 'start' | 'stop' | 'finish' | 'none';

/**
 * The decision for `pod` as seen (`deleted`: a DELETED event): `start` a bound pod of ours not
 * running, `stop` (then finish) one running that is terminating or gone, `finish` (only the
 * grace-0 delete) a terminating one never started, else `none`. A pod not ours (another node, the
 * harness's, hostNetwork, finished) is `none`, unless it is the one running here.
 */
export function decidePod(pod: WorkloadPod, deleted: boolean, runningUid: string | undefined, host: Pick<WorkloadHost, 'nodes' | 'isHarnessPod'>): PodDecision {
  const mine = runningUid !== undefined && runningUid === pod.metadata.uid;
  if (deleted || pod.metadata.deletionTimestamp) {
    if (mine) return 'stop';
    if (deleted || !isOurs(pod, host)) return 'none';
    return 'finish';
  }
  if (mine || !isOurs(pod, host) || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return 'none';
  return 'start';
}

function isOurs(pod: WorkloadPod, host: Pick<WorkloadHost, 'nodes' | 'isHarnessPod'>): boolean {
  const node = pod.spec?.nodeName;
  return !!node && host.nodes().includes(node) && !pod.spec?.hostNetwork && !host.isHarnessPod(pod.metadata.name);
}

/** The server's ports from the containers' ports (TCP and UDP; none declared: TCP 80, whoami's), and the grace period (default 30 s). */
export function podRunOf(pod: WorkloadPod): PodRun {
  const ports = (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? []).filter((p) => Number.isInteger(p.containerPort) && p.containerPort! > 0 && p.containerPort! < 65536);
  const of = (proto: string) => [...new Set(ports.filter((p) => (p.protocol ?? 'TCP') === proto).map((p) => p.containerPort!))].sort((a, b) => a - b);
  const tcp = of('TCP');
  const grace = pod.spec?.terminationGracePeriodSeconds;
  const udp = of('UDP');
  return { tcp: tcp.length ? tcp : udp.length ? [] : [80], udp, graceSeconds: typeof grace === 'number' && grace >= 0 ? grace : 30 };
}

/** The status a started pod gets: Running, its addresses, every condition True, each container running and ready. */
export function runningStatus(pod: WorkloadPod, a: { ipv4: string; ipv6: string; hostIP: string; pid: number | undefined }, at: string): Record<string, unknown> {
  return {
    phase: 'Running', hostIP: a.hostIP, hostIPs: [{ ip: a.hostIP }], podIP: a.ipv4, podIPs: [{ ip: a.ipv4 }, { ip: a.ipv6 }], startTime: at,
    conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: at })),
    containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
      name: c.name ?? '', image: c.image ?? '', imageID: '', containerID: `lab://${a.pid ?? 0}`, ready: true, started: true, restartCount: 0,
      state: { running: { startedAt: at } },
    })),
  };
}

/** The kubelet (see the file comment). */
export class WorkloadKubelet {
  /** The UID running under each pod key (namespace/name). */
  private readonly running = new Map<string, string>();
  private readonly turns = new Map<string, Promise<unknown>>();
  private watch: AbortController | undefined;

  constructor(private readonly o: { host: WorkloadHost; request: ApiRequest; endpoint: () => ApiEndpoint; log: (line: string) => void }) {}

  /** Lists and watches every namespace's pods until stop(). */
  start(): void {
    if (this.watch) return;
    this.watch = new AbortController();
    followPods(this.o.endpoint(), undefined, (u) => this.changed(u), this.watch.signal, (e) => this.o.log(`workload kubelet: pods: ${e.message}`));
  }

  /** Ends the watch and waits for what is under way (the pods themselves are left to LabCluster.down). */
  async stop(): Promise<void> {
    this.watch?.abort();
    this.watch = undefined;
    await Promise.all([...this.turns.values()]);
  }

  /** The pods this kubelet runs (namespace/name). */
  pods(): string[] {
    return [...this.running.keys()];
  }

  private changed(u: PodsUpdate): void {
    if (u.type === 'LIST') {
      const listed = new Set<string>();
      for (const p of u.items as WorkloadPod[]) {
        listed.add(keyOf(p));
        this.seen(p, false);
      }
      // Running here, missing from the list: deleted while the watch was down.
      for (const [key, uid] of this.running) {
        if (!listed.has(key)) this.seen({ metadata: { name: key.split('/')[1]!, namespace: key.split('/')[0]!, uid } }, true);
      }
      return;
    }
    this.seen(u.pod as WorkloadPod, u.type === 'DELETED');
  }

  /** Decides in turn (after whatever this pod's key has under way), so `running` is what earlier operations left. */
  private seen(pod: WorkloadPod, deleted: boolean): void {
    const key = keyOf(pod);
    this.inTurn(key, async () => {
      const runningUid = this.running.get(key);
      if (runningUid !== undefined && pod.metadata.uid !== runningUid && !deleted && !pod.metadata.deletionTimestamp) {
        // A new pod of the same name: the old one (whose end we missed) goes first.
        await this.end(key, { ...pod, metadata: { ...pod.metadata, uid: runningUid } }, true);
      }
      const d = decidePod(pod, deleted, this.running.get(key), this.o.host);
      if (d === 'start') await this.begin(key, pod);
      else if (d === 'stop') await this.end(key, pod, deleted);
      else if (d === 'finish') await this.finish(pod);
    });
  }

  private async begin(key: string, pod: WorkloadPod): Promise<void> {
    const node = pod.spec!.nodeName!;
    try {
      const a = await this.o.host.startPod(pod.metadata.name, node, podRunOf(pod));
      this.running.set(key, pod.metadata.uid ?? '');
      const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      await this.o.request('PATCH', `${podPath(pod)}/status`, { status: runningStatus(pod, a, at) });
      this.o.log(`workload kubelet: pod ${key} running on ${node} at ${a.ipv4}`);
    } catch (e) {
      this.o.log(`workload kubelet: pod ${key} not started on ${node}: ${(e as Error).message}`);
    }
  }

  /** Stops the pod's server and netns; unless the Pod is gone already, deletes it with grace 0. */
  private async end(key: string, pod: WorkloadPod, gone: boolean): Promise<void> {
    try {
      await this.o.host.stopPod(pod.metadata.name);
    } catch (e) {
      this.o.log(`workload kubelet: pod ${key} not stopped cleanly: ${(e as Error).message}`);
    }
    this.running.delete(key);
    this.o.log(`workload kubelet: pod ${key} stopped`);
    if (!gone) await this.finish(pod);
  }

  /** The kubelet's last word on a terminating pod: DELETE with grace 0 (a 404 is fine: it went meanwhile). */
  private async finish(pod: WorkloadPod): Promise<void> {
    await this.o.request('DELETE', `${podPath(pod)}?gracePeriodSeconds=0`).catch((e: Error & { status?: number }) => {
      if (e.status !== 404) this.o.log(`workload kubelet: pod ${keyOf(pod)} not deleted: ${e.message}`);
    });
  }

  private inTurn(key: string, op: () => Promise<void>): void {
    const done = (this.turns.get(key) ?? Promise.resolve()).then(op).catch((e: Error) => this.o.log(`workload kubelet: pod ${key}: ${e.message}`));
    this.turns.set(key, done);
    void done.then(() => { if (this.turns.get(key) === done) this.turns.delete(key); });
  }
}

const keyOf = (p: WorkloadPod) => `${p.metadata.namespace ?? 'default'}/${p.metadata.name}`;
const podPath = (p: WorkloadPod) => `/api/v1/namespaces/${p.metadata.namespace ?? 'default'}/pods/${p.metadata.name}`;
