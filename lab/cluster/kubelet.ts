// The lab cluster's kubelet for the operator's DaemonSet pods (cluster.ts wires it in): it creates
// a node's Pod, runs its container under a Supervisor (supervisor.ts: restartPolicy Always with the
// kubelet's back-off), writes the container's status as the Pod's, and follows the Pods
// (followPods) to answer `kubectl delete pod` as a kubelet and the DaemonSet controller do: the
// container stopped, the Pod removed with grace 0, a new Pod (a new UID) started. Each run of a
// container writes its output to its own file (podlog.ts), which the lab API server serves to
// `kubectl logs`.
//
// The harness (LabCluster.stopOperator / startOperator: a test restarting an operator, maybe with
// other flags) and the kubelet's own replacement of a deleted pod must never fight. The rules:
// 1. A pod is replaced only on evidence about that pod itself, by UID (deletedBy): a DELETED event
//    or a deletionTimestamp of its UID, or a relist that lacks it and was taken after it was
//    created. The old pod's late events, or a list older than the new pod, never touch the new one.
// 2. Everything done under one key (run, stop, a replacement) happens in turn, never two at once.
// 3. Each run() and stop() is a deliberate act on the key; a replacement is decided for the pod it
//    saw deleted, and any deliberate act after that decision supersedes it: it starts no pod then
//    (the harness's stop finishes the old container, its run() starts the pod it asked for).
// 4. A pod stopped on purpose is never restarted (Supervisor.stop, no back-off restart pending).
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
  /** The count of statuses queued: a write that failed is tried again only while it is the last. */
  statuses: number;
  closed: boolean;
  /** The replacement after a deletion, decided (in turn or under way). */
  replacing?: Promise<void>;
}

/** What the kubelet knows of a pod it runs: its UID and the resourceVersion it was created at. */
export interface OwnPod { uid: string; resourceVersion: string }

/**
 * Whether `u` shows the pod `own` deleted (rule 1 of the file comment): a watch event of its UID
 * that is DELETED or carries a deletionTimestamp; or a list in which its UID carries one, or from
 * which it is missing although the list was taken at or after its creation (the lab API servers'
 * resourceVersions are one increasing counter, so they compare as numbers; a list taken before
 * the pod was created cannot show it). Any other pod's update, the same name's included, is not.
 */
export function deletedBy(u: PodsUpdate, own: OwnPod): boolean {
  if (u.type === 'LIST') {
    const p = u.items.find((x) => x.metadata.uid === own.uid);
    if (p) return p.metadata.deletionTimestamp !== undefined;
    const listed = Number(u.resourceVersion);
    const created = Number(own.resourceVersion);
    return Number.isFinite(listed) && Number.isFinite(created) && created > 0 && created <= listed;
  }
  if (u.pod.metadata.uid !== own.uid) return false;
  return u.type === 'DELETED' || u.pod.metadata.deletionTimestamp !== undefined;
}

/** How many times a pod's status is sent before the kubelet gives it up (writeStatus). */
export const STATUS_TRIES = 5;

/** The lab's kubelet (see the file comment): at most one pod per key (a node's DaemonSet pod). */
export class Kubelet {
  private readonly pods = new Map<string, RunningPod>();
  /** The watch of each namespace that has pods of ours. */
  private readonly watches = new Map<string, AbortController>();
  /** Each key's operations, chained: one at a time, in the order asked (rule 2). */
  private readonly turns = new Map<string, Promise<unknown>>();
  /** Each key's count of deliberate acts (run, stop): a replacement decided at one count is superseded by the next (rule 3). */
  private readonly acts = new Map<string, number>();

  constructor(private readonly o: { request: ApiRequest; endpoint: () => ApiEndpoint; logDir: string; log: (line: string) => void; policy?: BackoffPolicy }) {}

  /**
   * Creates the Pod `make()` describes (a leftover of the same name is removed first) and starts
   * its container without waiting for it; its Supervisor. After whatever was asked of `key`
   * before (a stop, a replacement) is done. Throws when `key` has a pod running then or the API
   * server refuses the Pod.
   */
  run(key: string, make: () => PodLaunch): Promise<Supervisor> {
    this.act(key);
    return this.inTurn(key, async () => {
      const existing = this.pods.get(key);
      if (existing && !existing.closed) throw new Error(`lab kubelet: ${key} has a pod running already`);
      // A pod whose deletion was seen and whose replacement this run() superseded: its container is stopped.
      if (existing) this.pods.delete(key);
      return this.begin(key, make, await this.createPod(make()));
    });
  }

  /** Counts a deliberate act on `key`; the new count. */
  private act(key: string): number {
    const n = (this.acts.get(key) ?? 0) + 1;
    this.acts.set(key, n);
    return n;
  }

  /** Runs `op` once every earlier operation on `key` has ended (whether it failed or not). */
  private inTurn<T>(key: string, op: () => Promise<T>): Promise<T> {
    const done = (this.turns.get(key) ?? Promise.resolve()).then(op, op);
    const settled = done.then(() => undefined, () => undefined);
    this.turns.set(key, settled);
    void settled.then(() => { if (this.turns.get(key) === settled) this.turns.delete(key); });
    return done;
  }

  /** POSTs the pod (a leftover of the same name removed first, as the kubelet's 409 tells). */
  private async createPod(launch: PodLaunch): Promise<{ launch: PodLaunch; pod: RunningPod['pod'] }> {
    const { name, namespace } = launch.pod.metadata;
    const collection = `/api/v1/namespaces/${namespace}/pods`;
    const body = { apiVersion: 'v1', kind: 'Pod', ...launch.pod };
    const created = await this.o.request('POST', collection, body).catch(async (e: { status?: number }) => {
      if (e.status !== 409) throw e;
      await this.o.request('DELETE', `${collection}/${name}?gracePeriodSeconds=0`);
      return this.o.request('POST', collection, body);
    }) as { metadata: { uid: string; resourceVersion: string } };
    return { launch, pod: { name, uid: created.metadata.uid, resourceVersion: created.metadata.resourceVersion } };
  }

  /** Starts the created pod's container under a Supervisor, the pod kept under `key`. */
  private begin(key: string, make: () => PodLaunch, { launch, pod }: { launch: PodLaunch; pod: RunningPod['pod'] }): Supervisor {
    const { namespace } = launch.pod.metadata;
    const container = (launch.pod.spec.containers as Array<{ name: string; image?: string }>)[0]!;
    const startTime = now();
    const run: RunningPod = { make, namespace, pod, writes: Promise.resolve(), statuses: 0, closed: false, supervisor: undefined as unknown as Supervisor };
    run.supervisor = new Supervisor({
      name: container.name, image: container.image ?? '', pod: `${namespace}/${pod.name}`, graceMs: launch.graceMs, log: this.o.log,
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
   * Stops `key`'s pod on purpose: its container without a restart, and with `removePod` its Pod
   * object (a failure to remove it is logged). After whatever was asked of `key` before; a
   * replacement decided before this call starts no new pod (rule 3). The container's last exit
   * code; null when there is no pod.
   */
  stop(key: string, removePod = true): Promise<number | null> {
    this.act(key);
    return this.inTurn(key, async () => {
      const run = this.pods.get(key);
      if (!run) return null;
      this.pods.delete(key);
      const code = await this.close(run);
      if (removePod) await this.removePod(run).catch((e: Error) => this.o.log(`pod ${run.pod.name}: not deleted: ${e.message}`));
      return code;
    });
  }

  /** Ends the watches and stops every container, leaving the Pod objects (the cluster goes down with its API server). */
  async stopAll(): Promise<void> {
    for (const w of this.watches.values()) w.abort();
    this.watches.clear();
    // Keys being started count too: their stop comes after the start, in turn.
    await Promise.all([...new Set([...this.pods.keys(), ...this.turns.keys()])].map((k) => this.stop(k, false)));
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

  /**
   * Writes the pod's status (merge patch of /status), after the writes before it. A write that
   * failed without an answer or with a 5xx or 429 is tried again after 1 s, STATUS_TRIES times at
   * most, while no newer status is queued, as the kubelet's status manager syncs a status again
   * (a CI run's kubelet lost its operators' first status to connections closed under it). Failures
   * are logged, not thrown (the API server may be down), except a 404 of a pod seen deleted: its
   * container's last status has no pod left to go to, as expected.
   */
  private writeStatus(run: RunningPod, status: Record<string, unknown>): void {
    if (run.closed) return;
    const nth = ++run.statuses;
    run.writes = run.writes.then(() => this.patchStatus(run, status, nth));
  }

  private async patchStatus(run: RunningPod, status: Record<string, unknown>, nth: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.o.request('PATCH', `/api/v1/namespaces/${run.namespace}/pods/${run.pod.name}/status`, { status });
        return;
      } catch (err) {
        const e = err as Error & { status?: number };
        if (e.status === 404 && run.replacing) return;
        const again = attempt < STATUS_TRIES && nth === run.statuses && (e.status === undefined || e.status >= 500 || e.status === 429);
        this.o.log(`pod ${run.pod.name}: status not written: ${e.message}${again ? '; again in 1 s' : ''}`);
        if (!again) return;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private follow(namespace: string): void {
    if (this.watches.has(namespace)) return;
    const w = new AbortController();
    this.watches.set(namespace, w);
    followPods(this.o.endpoint(), namespace, (u) => this.podsChanged(namespace, u), w.signal, (e) => this.o.log(`lab kubelet: pods of ${namespace}: ${e.message}`));
  }

  private podsChanged(namespace: string, u: PodsUpdate): void {
    if (u.type === 'LIST') this.o.log(`lab kubelet: pods of ${namespace} listed at resourceVersion ${u.resourceVersion}`);
    for (const [key, run] of this.pods) {
      if (run.namespace !== namespace || run.replacing || run.closed || !deletedBy(u, run.pod)) continue;
      const decidedAt = this.acts.get(key) ?? 0;
      run.replacing = this.inTurn(key, () => this.replace(key, run, decidedAt));
    }
  }

  /**
   * `kubectl delete pod`: the container stopped (SIGTERM, the grace period), the Pod removed with
   * grace 0 as the kubelet does, and a new Pod started, unless the harness acted on `key` since the
   * deletion was seen (`decidedAt`): then it does nothing, or stops at the new pod's creation.
   */
  private async replace(key: string, run: RunningPod, decidedAt: number): Promise<void> {
    const superseded = () => this.pods.get(key) !== run || (this.acts.get(key) ?? 0) !== decidedAt;
    if (superseded()) return;
    this.o.log(`pod ${run.pod.name} deleted: stopping it, a new pod follows`);
    await this.close(run);
    try {
      await this.removePod(run);
      if (superseded()) return; // a deliberate stop or start came meanwhile: it finishes the job
      const created = await this.createPod(run.make());
      if (superseded()) {
        this.o.log(`pod ${run.pod.name}: the replacement is not started: stopped or started on purpose meanwhile`);
        await this.removePod({ ...run, pod: created.pod });
        return;
      }
      this.pods.delete(key);
      this.begin(key, run.make, created);
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

/** followPods' deadlines; the defaults suit the lab API server. */
export interface FollowTimes {
  /** A list that has not answered in this long is abandoned and tried again (default 30 000 ms). */
  listMs?: number;
  /** The watch asks the server to end it after this long (`timeoutSeconds`, default 300); it is
   *  abandoned 30 s after that if the server does not, and the pods are listed again. */
  watchSeconds?: number;
}

/**
 * Lists the Pods of `namespace` (undefined: of every namespace) and watches them from the list's
 * resourceVersion, with the admin token; after a watch ends or fails (the API server restarted,
 * 410 Gone, a deadline of `times` passed), lists again a second later. Until `signal` aborts;
 * errors go to `onError`, never thrown: an API server that never answers holds nothing forever.
 */
export function followPods(api: ApiEndpoint, namespace: string | undefined, onUpdate: (u: PodsUpdate) => void, signal: AbortSignal, onError: (e: Error) => void = () => undefined, times: FollowTimes = {}): void {
  const path = namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${namespace}/pods`;
  const listMs = times.listMs ?? 30_000;
  const watchSeconds = times.watchSeconds ?? 300;
  const within = (ms: number) => AbortSignal.any([signal, AbortSignal.timeout(ms)]);
  const loop = async () => {
    while (!signal.aborted) {
      try {
        const list = JSON.parse(await get(api, path, within(listMs))) as { items?: PodLike[]; metadata?: { resourceVersion?: string } };
        const rv = list.metadata?.resourceVersion ?? '0';
        onUpdate({ type: 'LIST', items: list.items ?? [], resourceVersion: rv });
        const watch = `${path}?watch=true&resourceVersion=${rv}&timeoutSeconds=${watchSeconds}`;
        await get(api, watch, within((watchSeconds + 30) * 1000), (line) => {
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
