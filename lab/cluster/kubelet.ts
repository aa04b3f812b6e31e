// The lab cluster's kubelet for the operator's DaemonSet pods (cluster.ts wires it in): it creates
// a node's Pod, runs its container under a Supervisor (supervisor.ts: restartPolicy Always with the
// kubelet's back-off), writes the container's status as the Pod's, and follows the Pods
// (followPods) to answer `kubectl delete pod` as a kubelet and the DaemonSet controller do: the
// container stopped, the Pod removed with grace 0, a new Pod (a new UID) started. Each run of a
// container writes its output to its own file (podlog.ts), which the lab API server serves to
// `kubectl logs`.
import type { ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { BackoffPolicy } from './backoff.js';
import { podLogPath } from './podlog.js';
import { type ContainerStatus, Supervisor, now } from './supervisor.js';

/** Where the API server is and the token the kubelet uses (cluster.ts's ApiAccess fits). */
export interface ApiEndpoint { url: string; caPem?: string | undefined; adminToken?: string | undefined }

/** One request to the API server (cluster.ts's apiRequest): the parsed body, or throws an Error with the HTTP `status`. */
export type ApiRequest = (method: string, path: string, body?: unknown) => Promise<Record<string, unknown>>;

/** One pod to run, made afresh for every pod under a key (the first, and each that replaces a deleted one). */
export interface PodLaunch {
  /** The Pod to create; spec.containers[0] is the container the kubelet runs. */
  pod: { metadata: { name: string; namespace: string }; spec: Record<string, unknown> };
  hostIP: string;
  hostIPv6?: string;
  /** The readinessProbe's URL. */
  readyUrl: string;
  /** terminationGracePeriodSeconds in ms. */
  graceMs: number;
  /** Starts one run of the container, its output appended to `logFile` (and wherever else the caller wants). */
  spawn(logFile: string): ChildProcess;
}

interface RunningPod {
  make: () => PodLaunch;
  namespace: string;
  pod: { name: string; uid: string; resourceVersion: string };
  supervisor: Supervisor;
  /** Status writes, in order; after `closed` none is sent. */
  writes: Promise<unknown>;
  closed: boolean;
  /** The replacement after a deletion, in progress. */
  replacing?: Promise<void>;
}

/** The lab's kubelet (see the file comment): at most one pod per key (a node's DaemonSet pod). */
export class Kubelet {
  private readonly pods = new Map<string, RunningPod>();
  /** The watch of each namespace that has pods of ours. */
  private readonly watches = new Map<string, AbortController>();

  constructor(private readonly o: { request: ApiRequest; endpoint: () => ApiEndpoint; logDir: string; log: (line: string) => void; policy?: BackoffPolicy }) {}

  /**
   * Creates the Pod `make()` describes (a leftover of the same name is removed first) and starts
   * its container without waiting for it; its Supervisor. Throws when `key` has a pod running or
   * the API server refuses the Pod.
   */
  run(key: string, make: () => PodLaunch): Promise<Supervisor> {
    return this.start(key, make);
  }

  /** run(), or with `replacing` the pod that takes over from a deleted one (which stays under `key` until then, so stop() finds it). */
  private async start(key: string, make: () => PodLaunch, replacing?: RunningPod): Promise<Supervisor> {
    const existing = this.pods.get(key);
    if (existing && existing !== replacing) throw new Error(`lab kubelet: ${key} has a pod running already`);
    const launch = make();
    const { name, namespace } = launch.pod.metadata;
    const collection = `/api/v1/namespaces/${namespace}/pods`;
    const body = { apiVersion: 'v1', kind: 'Pod', ...launch.pod };
    const created = await this.o.request('POST', collection, body).catch(async (e: { status?: number }) => {
      if (e.status !== 409) throw e;
      await this.o.request('DELETE', `${collection}/${name}?gracePeriodSeconds=0`);
      return this.o.request('POST', collection, body);
    }) as { metadata: { uid: string; resourceVersion: string } };
    const pod = { name, uid: created.metadata.uid, resourceVersion: created.metadata.resourceVersion };
    const container = (launch.pod.spec.containers as Array<{ name: string; image?: string }>)[0]!;
    const startTime = now();
    const run: RunningPod = { make, namespace, pod, writes: Promise.resolve(), closed: false, supervisor: undefined as unknown as Supervisor };
    run.supervisor = new Supervisor({
      name: container.name, image: container.image ?? '', pod: `${namespace}/${name}`, graceMs: launch.graceMs, log: this.o.log,
      ...(this.o.policy ? { policy: this.o.policy } : {}),
      spawn: (restartCount) => launch.spawn(podLogPath(this.o.logDir, { namespace, ...pod }, container.name, restartCount)),
      probe: async () => (await fetch(launch.readyUrl, { signal: AbortSignal.timeout(2000) })).ok,
      onStatus: (c: ContainerStatus) => this.writeStatus(run, podStatusOf(c, { hostIP: launch.hostIP, ...(launch.hostIPv6 ? { hostIPv6: launch.hostIPv6 } : {}), startTime })),
    });
    this.pods.set(key, run);
    this.follow(namespace);
    run.supervisor.start();
    return run.supervisor;
  }

  /** The pid of `key`'s running container (undefined when none runs, e.g. during a back-off). */
  pid(key: string): number | undefined {
    return this.pods.get(key)?.supervisor.pid;
  }

  /**
   * Stops `key`'s pod on purpose: its container without a restart (a replacement being started is
   * waited for and stopped), and with `removePod` its Pod object (a failure to remove it is
   * logged). The container's last exit code; null when there is no pod.
   */
  async stop(key: string, removePod = true): Promise<number | null> {
    await this.pods.get(key)?.replacing;
    const run = this.pods.get(key);
    if (!run) return null;
    this.pods.delete(key);
    const code = await this.close(run);
    if (removePod) await this.removePod(run).catch((e: Error) => this.o.log(`pod ${run.pod.name}: not deleted: ${e.message}`));
    return code;
  }

  /** Ends the watches and stops every container, leaving the Pod objects (the cluster goes down with its API server). */
  async stopAll(): Promise<void> {
    for (const w of this.watches.values()) w.abort();
    this.watches.clear();
    await Promise.all([...this.pods.keys()].map((k) => this.stop(k, false)));
  }

  private async close(run: RunningPod): Promise<number | null> {
    const code = await run.supervisor.stop();
    await run.writes;
    run.closed = true;
    return code;
  }

  private removePod(run: RunningPod): Promise<unknown> {
    return this.o.request('DELETE', `/api/v1/namespaces/${run.namespace}/pods/${run.pod.name}?gracePeriodSeconds=0`)
      .catch((e: { status?: number }) => { if (e.status !== 404) throw e; });
  }

  /** Writes the pod's status (merge patch of /status), after the writes before it; failures are logged, not thrown (the API server may be down). */
  private writeStatus(run: RunningPod, status: Record<string, unknown>): void {
    if (run.closed) return;
    run.writes = run.writes.then(() => this.o.request('PATCH', `/api/v1/namespaces/${run.namespace}/pods/${run.pod.name}/status`, { status }))
      .catch((e: Error) => this.o.log(`pod ${run.pod.name}: status not written: ${e.message}`));
  }

  private follow(namespace: string): void {
    if (this.watches.has(namespace)) return;
    const w = new AbortController();
    this.watches.set(namespace, w);
    followPods(this.o.endpoint(), namespace, (u) => this.podsChanged(namespace, u), w.signal, (e) => this.o.log(`lab kubelet: pods of ${namespace}: ${e.message}`));
  }

  private podsChanged(namespace: string, u: PodsUpdate): void {
    for (const [key, run] of this.pods) {
      if (run.namespace !== namespace || run.replacing || run.closed) continue;
      let gone: boolean;
      if (u.type === 'LIST') {
        const p = u.items.find((x) => x.metadata.uid === run.pod.uid);
        // A pod created after the list was taken is not in it, and not gone.
        gone = p ? p.metadata.deletionTimestamp !== undefined : Number(run.pod.resourceVersion) <= Number(u.resourceVersion);
      } else {
        if (u.pod.metadata.uid !== run.pod.uid) continue;
        gone = u.type === 'DELETED' || u.pod.metadata.deletionTimestamp !== undefined;
      }
      if (gone) run.replacing = this.replace(key, run);
    }
  }

  /** `kubectl delete pod`: the container stopped (SIGTERM, the grace period), the Pod removed with grace 0 as the kubelet does, and a new Pod started. */
  private async replace(key: string, run: RunningPod): Promise<void> {
    this.o.log(`pod ${run.pod.name} deleted: stopping it, a new pod follows`);
    await this.close(run);
    try {
      await this.removePod(run);
      if (this.pods.get(key) !== run) return; // stopped meanwhile
      await this.start(key, run.make, run);
    } catch (e) {
      if (this.pods.get(key) === run) this.pods.delete(key);
      this.o.log(`pod ${run.pod.name}: not replaced: ${(e as Error).message}`);
    }
  }
}

/** The pod status the kubelet writes for one supervised container on a hostNetwork pod. */
export function podStatusOf(c: ContainerStatus, o: { hostIP: string; hostIPv6?: string; startTime: string }): Record<string, unknown> {
  const ready = c.ready ? 'True' : 'False';
  const at = now();
  return {
    phase: 'Running', hostIP: o.hostIP, podIP: o.hostIP, podIPs: [{ ip: o.hostIP }, ...(o.hostIPv6 ? [{ ip: o.hostIPv6 }] : [])], startTime: o.startTime,
    conditions: [
      { type: 'PodScheduled', status: 'True', lastTransitionTime: o.startTime },
      { type: 'Initialized', status: 'True', lastTransitionTime: o.startTime },
      { type: 'ContainersReady', status: ready, lastTransitionTime: at },
      { type: 'Ready', status: ready, lastTransitionTime: at },
    ],
    containerStatuses: [c],
  };
}

/** A Pod as far as the kubelet reads it. */
export interface PodLike { metadata: { name: string; uid?: string; resourceVersion?: string; deletionTimestamp?: string } }

/** What followPods reports: a full list (`items`, at `resourceVersion`), or one watch event. */
export type PodsUpdate = { type: 'LIST'; items: PodLike[]; resourceVersion: string } | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; pod: PodLike };

/**
 * Lists the Pods of `namespace` and watches them from the list's resourceVersion, with the admin
 * token; after a watch ends or fails (the API server restarted, 410 Gone), lists again a second
 * later. Until `signal` aborts; errors go to `onError`, never thrown.
 */
export function followPods(api: ApiEndpoint, namespace: string, onUpdate: (u: PodsUpdate) => void, signal: AbortSignal, onError: (e: Error) => void = () => undefined): void {
  const path = `/api/v1/namespaces/${namespace}/pods`;
  const loop = async () => {
    while (!signal.aborted) {
      try {
        const list = JSON.parse(await get(api, path, signal)) as { items?: PodLike[]; metadata?: { resourceVersion?: string } };
        const rv = list.metadata?.resourceVersion ?? '0';
        onUpdate({ type: 'LIST', items: list.items ?? [], resourceVersion: rv });
        await get(api, `${path}?watch=true&resourceVersion=${rv}`, signal, (line) => {
          const e = JSON.parse(line) as { type: string; object: PodLike & { message?: string } };
          if (e.type === 'ERROR') throw new Error(`watch: ${e.object.message ?? 'error'}`);
          if (e.type === 'ADDED' || e.type === 'MODIFIED' || e.type === 'DELETED') onUpdate({ type: e.type, pod: e.object });
        });
      } catch (e) {
        if (!signal.aborted) onError(e as Error);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void loop();
}

/** GET with the admin token: the body, or with `onLine` each line as it arrives (a watch); rejects on a non-2xx answer. */
function get(api: ApiEndpoint, path: string, signal: AbortSignal, onLine?: (line: string) => void): Promise<string> {
  const url = new URL(`${api.url}${path}`);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, { headers: { accept: 'application/json', ...(api.adminToken ? { authorization: `Bearer ${api.adminToken}` } : {}) }, ...(api.caPem ? { ca: api.caPem } : {}), signal }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => {
        text += d;
        if (!onLine || (res.statusCode ?? 0) >= 300) return;
        let nl: number;
        while ((nl = text.indexOf('\n')) >= 0) {
          const line = text.slice(0, nl);
          text = text.slice(nl + 1);
          try {
            if (line.trim()) onLine(line);
          } catch (e) {
            req.destroy(e as Error);
            return;
          }
        }
      });
      res.on('end', () => ((res.statusCode ?? 0) < 300 ? resolve(text) : reject(new Error(`GET ${path}: ${res.statusCode} ${text.slice(0, 200)}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
