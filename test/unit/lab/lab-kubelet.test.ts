// The lab kubelet's pure parts: the crash-loop back-off of restartPolicy Always (backoff.ts), the
// pod log files' layout and the pods/log query (podlog.ts), the operator's Pod from its DaemonSet
// (daemonset.ts) and when a pod counts as deleted (kubelet.ts's deletedBy); the Supervisor
// (supervisor.ts) with short-lived node processes and a short back-off; and the Kubelet against the
// lab API server, where a deliberate stop/start (what LabCluster.stopOperator/startOperator do)
// and the kubelet's replacement of a deleted pod must never fight. Times are ms from 0; a
// container "runs" from its restart to its exit.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseAllDocuments } from 'yaml';
import { LabApiServer } from '../../../lab/cluster/apiserver.js';
import { scratchDir } from '../../support/scratch.js';
import { type BackoffEntry, KUBELET_BACKOFF, formatBackoff, planRestart } from '../../../lab/cluster/backoff.js';
import { apiRequest } from '../../../lab/cluster/cluster.js';
import { type ApiRequest, Kubelet, type PodLaunch, type PodsUpdate, deletedBy, followPods } from '../../../lab/cluster/kubelet.js';
import { graceMsOf, podFromDaemonSet } from '../../../lab/cluster/daemonset.js';
import { type ContainerStatus, Supervisor } from '../../../lab/cluster/supervisor.js';
import { parseLogQuery, podLogPath, selectLog } from '../../../lab/cluster/podlog.js';
import { waitFor } from '../../support/operator-process.js';

/** The delays of successive exits, each after the container ran `ranMs` since its (re)start. */
function delays(ranMs: readonly number[], policy = KUBELET_BACKOFF): number[] {
  let entry: BackoffEntry | undefined;
  let t = 0; // when the current run started
  return ranMs.map((ran) => {
    const d = planRestart(entry, t + ran, policy);
    entry = d.entry;
    t = t + ran + d.delayMs;
    expect(entry.restartedAt).toBe(t);
    return d.delayMs;
  });
}

describe('lab kubelet: crash-loop back-off (the kubelet\'s flowcontrol.Backoff as doBackOff uses it)', () => {
  it('restarts at once after the first exit, then 10 s doubling to the 5 min cap', () => {
    expect(delays(Array(9).fill(1000)).map((ms) => ms / 1000)).toEqual([0, 10, 20, 40, 80, 160, 300, 300, 300]);
  });

  it('starts over once a run lasted more than 10 min (2 x the cap), and not at exactly 10 min', () => {
    expect(delays([1000, 1000, 1000, 600_001, 1000]).map((ms) => ms / 1000)).toEqual([0, 10, 20, 0, 10]);
    expect(delays([1000, 1000, 600_000]).map((ms) => ms / 1000)).toEqual([0, 10, 20]);
  });

  it('follows a stated shorter policy the same way', () => {
    expect(delays([1, 1, 1, 1, 3001, 1], { initialMs: 500, maxMs: 1500, resetMs: 3000 })).toEqual([0, 500, 1000, 1500, 0, 500]);
  });

  it('writes the delay as the CrashLoopBackOff message does', () => {
    expect([10_000, 160_000, 300_000, 500].map(formatBackoff)).toEqual(['10s', '2m40s', '5m0s', '500ms']);
  });
});

describe('lab kubelet: pod logs', () => {
  it('keeps one file per run of a container, under the pod\'s namespace, name and UID', () => {
    expect(podLogPath('/run/x', { namespace: 'ns', name: 'p', uid: 'u-1' }, 'c', 2)).toBe('/run/x/ns_p_u-1/c/2.log');
  });

  it.each([
    ['everything', {}, 'a\nb\nc\n'],
    ['the last two lines', { tailLines: 2 }, 'b\nc\n'],
    ['more lines than there are', { tailLines: 10 }, 'a\nb\nc\n'],
    ['no line', { tailLines: 0 }, ''],
    ['the first bytes', { limitBytes: 3 }, 'a\nb'],
    ['the last two lines, then 3 bytes of them', { tailLines: 2, limitBytes: 3 }, 'b\nc'],
  ])('selects %s', (_, q, want) => {
    expect(selectLog('a\nb\nc\n', q)).toBe(want);
  });

  it('a last line without a newline is a line too', () => {
    expect(selectLog('a\nb\nc', { tailLines: 2 })).toBe('b\nc');
  });

  it('reads kubectl\'s query and refuses a bad number', () => {
    expect(parseLogQuery(new URLSearchParams('container=c&tailLines=5&previous=true'))).toEqual({ container: 'c', tailLines: 5, previous: true });
    expect(parseLogQuery(new URLSearchParams(''))).toEqual({ previous: false });
    expect(() => parseLogQuery(new URLSearchParams('tailLines=-1'))).toThrow(/tailLines/);
    expect(() => parseLogQuery(new URLSearchParams('limitBytes=0'))).toThrow(/limitBytes/);
  });
});

describe('lab kubelet: the operator\'s Pod from manifests/daemonset.yaml', () => {
  const ds = parseAllDocuments(readFileSync(new URL('../../../../manifests/daemonset.yaml', import.meta.url), 'utf8')).map((d) => d.toJS() as { kind?: string })
    .find((d) => d?.kind === 'DaemonSet');

  it('has the template\'s labels and spec, bound to the node, restartPolicy Always', () => {
    const pod = podFromDaemonSet(ds, { nodeName: 'w1', podName: 'ipvs-operator-w1', namespace: 'ipvs-operator', podIP: '172.18.0.3', serviceAccountName: 'ipvs-operator', apiHost: 'h', apiPort: 6443 });
    expect(pod).toMatchObject({
      metadata: { name: 'ipvs-operator-w1', namespace: 'ipvs-operator', labels: { 'app.kubernetes.io/name': 'ipvs-operator' } },
      spec: { nodeName: 'w1', hostNetwork: true, restartPolicy: 'Always', serviceAccountName: 'ipvs-operator', containers: [{ name: 'ipvs-operator' }] },
    });
    expect(graceMsOf(ds)).toBe(30_000);
    expect(graceMsOf({ kind: 'DaemonSet' })).toBe(30_000);
  });
});

describe('lab kubelet: the Supervisor (restartPolicy Always)', () => {
  /** A supervisor of `node -e script`, ready at once, with a 100 ms back-off doubling to 200 ms; every status it reported. */
  function supervise(script: string) {
    const seen: ContainerStatus[] = [];
    const sup = new Supervisor({
      name: 'c', image: 'i', pod: 'ns/p', graceMs: 2000, policy: { initialMs: 100, maxMs: 200, resetMs: 60_000 }, probeEveryMs: 20,
      spawn: () => spawn(process.execPath, ['-e', script], { stdio: 'ignore' }),
      probe: () => Promise.resolve(true),
      onStatus: (c) => seen.push(c),
    });
    return { sup, seen };
  }

  it('restarts a crashing container at once, then after its back-off in CrashLoopBackOff, counting restarts', async () => {
    const { sup, seen } = supervise('process.exit(3)');
    sup.start();
    await waitFor('3 restarts', () => sup.containerStatus.restartCount >= 3, 10_000, 10);
    await sup.stop();
    expect(seen.find((c) => c.state.waiting)).toMatchObject({
      restartCount: 1, ready: false, state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 100ms restarting failed container=c pod=ns/p' } },
      lastState: { terminated: { exitCode: 3, reason: 'Error' } },
    });
  });

  it('reports a kill as exit code 128 + the signal, and a deliberate stop is not restarted', async () => {
    const { sup, seen } = supervise('setInterval(() => {}, 1000)');
    sup.start();
    await sup.whenReady(5000);
    const pid = sup.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor('restarted and ready', () => sup.containerStatus.restartCount === 1 && sup.containerStatus.ready, 10_000, 10);
    expect(sup.containerStatus).toMatchObject({ state: { running: expect.any(Object) }, lastState: { terminated: { exitCode: 137, signal: 9, reason: 'Error' } } });
    expect(sup.pid).not.toBe(pid);
    expect(await sup.stop()).toBeNull(); // SIGTERM ends a node process without an exit code
    await new Promise((r) => setTimeout(r, 300));
    expect({ pid: sup.pid, restartCount: sup.containerStatus.restartCount, state: Object.keys(seen.at(-1)!.state) }).toEqual({ pid: undefined, restartCount: 1, state: ['terminated'] });
  });

  it('whenReady rejects when the run exits before it is ready', async () => {
    const seen: ContainerStatus[] = [];
    const sup = new Supervisor({
      name: 'c', image: 'i', pod: 'ns/p', graceMs: 2000, policy: { initialMs: 5000, maxMs: 5000, resetMs: 60_000 },
      spawn: () => spawn(process.execPath, ['-e', 'process.exit(1)'], { stdio: 'ignore' }),
      probe: () => Promise.resolve(false),
      onStatus: (c) => seen.push(c),
    });
    sup.start();
    await expect(sup.whenReady(10_000)).rejects.toThrow(/exited with 1/);
    await sup.stop();
  });
});

describe('lab kubelet: when a pod it runs counts as deleted (deletedBy)', () => {
  const own = { uid: 'uid-9', resourceVersion: '40' };
  const pod = (uid: string, deleting = false) => ({ metadata: { name: 'op-n1', uid, ...(deleting ? { deletionTimestamp: '2026-11-26T00:00:00Z' } : {}) } });
  it.each<[string, PodsUpdate, boolean]>([
    ['its own DELETED event', { type: 'DELETED', pod: pod('uid-9') }, true],
    ['its own deletionTimestamp (graceful deletion)', { type: 'MODIFIED', pod: pod('uid-9', true) }, true],
    ['its own status write', { type: 'MODIFIED', pod: pod('uid-9') }, false],
    ['the old pod of the same name deleted late (a restart by the harness)', { type: 'DELETED', pod: pod('uid-8') }, false],
    ['the old pod terminating', { type: 'MODIFIED', pod: pod('uid-8', true) }, false],
    ['a list that has it', { type: 'LIST', items: [pod('uid-9')], resourceVersion: '50' }, false],
    ['a list that has it terminating', { type: 'LIST', items: [pod('uid-9', true)], resourceVersion: '50' }, true],
    ['a list taken before it was created (only the old pod in it)', { type: 'LIST', items: [pod('uid-8')], resourceVersion: '39' }, false],
    ['a list taken after its creation without it', { type: 'LIST', items: [pod('uid-8')], resourceVersion: '41' }, true],
    ['a list at its creation\'s resourceVersion without it', { type: 'LIST', items: [], resourceVersion: '40' }, true],
    ['a list with no resourceVersion', { type: 'LIST', items: [], resourceVersion: '' }, false],
  ])('%s: %s', (_, u, gone) => {
    expect(deletedBy(u, own)).toBe(gone);
  });
});

describe('lab kubelet: a deliberate stop/start and the kubelet\'s replacement never fight', () => {
  let api: LabApiServer;
  const logDir = scratchDir('lab-kubelet-');
  beforeAll(async () => {
    api = await LabApiServer.start();
  });
  afterAll(async () => {
    await api.close();
  });

  /** A port free on 127.0.0.1 now. */
  async function freePort(): Promise<number> {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const { port } = s.address() as { port: number };
    await new Promise((r) => s.close(r));
    return port;
  }

  /**
   * A kubelet on the API server; its containers are node processes that answer the readiness
   * probe on `port` once their SIGTERM handler is in place and take `exitMs` to exit after
   * SIGTERM (with 0); each spawn's flags, in order.
   */
  async function harness(podName: string, exitMs = 0, failStatus = 0) {
    const access = { url: api.url };
    const port = await freePort();
    const lines: string[] = [];
    const spawned: string[] = [];
    const children: ChildProcess[] = [];
    // The first `failStatus` status writes fail as a connection the API server closed does.
    let statusWrites = 0;
    const request: ApiRequest = (m, p, b) => (p.endsWith('/status') && ++statusWrites <= failStatus
      ? Promise.reject(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })) : apiRequest(access, m, p, b));
    const kubelet = new Kubelet({ request, endpoint: () => access, logDir, log: (l) => lines.push(l) });
    const script = `process.on('SIGTERM', () => setTimeout(() => process.exit(0), ${exitMs}));` +
      `require('node:http').createServer((q, r) => r.end('ok')).listen(${port}, '127.0.0.1');`;
    const make = (flags: string) => (): PodLaunch => ({
      pod: { metadata: { name: podName, namespace: 'kubelet-test' }, spec: { containers: [{ name: 'c', image: 'i' }] } },
      hostIP: '127.0.0.1', readyUrl: `http://127.0.0.1:${port}/readyz`, graceMs: 10_000,
      spawn: () => {
        spawned.push(flags);
        const child = spawn(process.execPath, ['-e', script, '--', flags], { stdio: 'ignore' });
        children.push(child);
        return child;
      },
    });
    const podNow = () => api.get('pods', podName, 'kubelet-test') as { metadata: { uid: string }; status?: { containerStatuses?: Array<{ ready: boolean }> } } | undefined;
    const seen = (re: RegExp) => lines.filter((l) => re.test(l)).length;
    return { kubelet, lines, spawned, children, make, podNow, seen };
  }

  it('a stop and a start with other flags are not undone by the old pod\'s late events or a relist', async () => {
    const h = await harness('op-restart');
    try {
      await (await h.kubelet.run('n1', h.make('--a'))).whenReady(10_000);
      const first = h.podNow()!.metadata.uid;
      expect(await h.kubelet.stop('n1')).toBe(0);
      expect(h.podNow()).toBeUndefined();
      await (await h.kubelet.run('n1', h.make('--b'))).whenReady(10_000);
      const second = h.podNow()!.metadata.uid;
      const pid = h.kubelet.pid('n1');
      // The watch ends (as when the API server drops it): the kubelet lists again, a list taken
      // after the new pod's creation, without the old pod.
      const lists = h.seen(/listed at/);
      api.dropWatches();
      await waitFor('the kubelet\'s relist', () => h.seen(/listed at/) > lists, 10_000, 20);
      expect({ pid: h.kubelet.pid('n1'), uid: h.podNow()?.metadata.uid, spawned: h.spawned, replaced: h.seen(/deleted: stopping/) })
        .toEqual({ pid, uid: second, spawned: ['--a', '--b'], replaced: 0 });
      expect(second).not.toBe(first);
    } finally {
      await h.kubelet.stopAll();
    }
  });

  it('kubectl delete pod racing a deliberate stop: the stop wins, no new pod is started', async () => {
    // The container takes 2 s to end on SIGTERM: the replacement is still stopping it when the stop comes.
    const h = await harness('op-race', 2000);
    try {
      await (await h.kubelet.run('n1', h.make('--a'))).whenReady(10_000);
      api.remove('pods', 'op-race', 'kubelet-test'); // kubectl delete pod: this API server removes it at once
      await waitFor('the kubelet to see the deletion', () => h.seen(/op-race deleted: stopping it/) === 1, 10_000, 20);
      expect(await h.kubelet.stop('n1')).toBe(0);
      expect({ pod: h.podNow(), pid: h.kubelet.pid('n1'), spawned: h.spawned, running: h.children.filter((c) => c.exitCode === null && c.signalCode === null).length })
        .toEqual({ pod: undefined, pid: undefined, spawned: ['--a'], running: 0 });
      // And the key is free for the harness's own start.
      await (await h.kubelet.run('n1', h.make('--b'))).whenReady(10_000);
      expect(h.spawned).toEqual(['--a', '--b']);
    } finally {
      await h.kubelet.stopAll();
    }
  });

  it('kubectl delete pod after a restart with other flags: the new pod runs the last start\'s flags', async () => {
    const h = await harness('op-delete');
    try {
      await (await h.kubelet.run('n1', h.make('--a'))).whenReady(10_000);
      expect(await h.kubelet.stop('n1')).toBe(0);
      await (await h.kubelet.run('n1', h.make('--b'))).whenReady(10_000);
      const before = h.podNow()!.metadata.uid;
      api.remove('pods', 'op-delete', 'kubelet-test');
      await waitFor('a new pod, ready', () => h.podNow() !== undefined && h.podNow()!.metadata.uid !== before && h.podNow()!.status?.containerStatuses?.[0]?.ready, 10_000, 20);
      expect({ spawned: h.spawned, running: h.children.filter((c) => c.exitCode === null && c.signalCode === null).length }).toEqual({ spawned: ['--a', '--b', '--b'], running: 1 });
      // The deleted pod's last status (its container terminated) had no pod to go to: not an error.
      expect(h.lines.filter((l) => /status not written/.test(l))).toEqual([]);
      expect(await h.kubelet.stop('n1')).toBe(0);
      expect(h.podNow()).toBeUndefined();
    } finally {
      await h.kubelet.stopAll();
    }
  });

  it('a status write that got no answer is sent again: the pod shows its ready container', async () => {
    const h = await harness('op-status', 0, 2);
    try {
      await (await h.kubelet.run('n1', h.make('--a'))).whenReady(10_000);
      await waitFor('the pod\'s status, ready', () => h.podNow()?.status?.containerStatuses?.[0]?.ready === true, 10_000, 20);
      // Twice, each followed by a try again (or given up for a newer status queued meanwhile).
      expect(h.lines.filter((l) => /status not written/.test(l)).map((l) => l.replace(/; again in 1 s$/, '')))
        .toEqual(['pod op-status: status not written: socket hang up', 'pod op-status: status not written: socket hang up']);
    } finally {
      await h.kubelet.stopAll();
    }
  });

  it('a container that cannot start is restarted with back-off (StartError), and a stop ends it at once', async () => {
    const seen: ContainerStatus[] = [];
    const sup = new Supervisor({
      name: 'c', image: 'i', pod: 'ns/p', graceMs: 2000, policy: { initialMs: 100, maxMs: 200, resetMs: 60_000 },
      spawn: () => spawn('/nonexistent/lab-kubelet-test', [], { stdio: 'ignore' }),
      probe: () => Promise.resolve(false),
      onStatus: (c) => seen.push(c),
    });
    sup.start();
    await waitFor('2 restarts', () => sup.containerStatus.restartCount >= 2, 10_000, 10);
    await sup.stop();
    expect(seen.find((c) => c.state.waiting?.reason === 'CrashLoopBackOff')).toMatchObject({ lastState: { terminated: { exitCode: 128, reason: 'StartError' } } });
  });
});

describe('lab kubelet: followPods never waits forever on the API server', () => {
  it('abandons a list that does not answer, lists again, and asks the watch to end in time', async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? '');
      if (paths.length === 1) return; // the first list: no answer, ever
      if (req.url?.includes('watch=true')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return; // a watch left open, with nothing to say
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [], metadata: { resourceVersion: '7' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const stop = new AbortController();
    const updates: PodsUpdate[] = [];
    const errors: string[] = [];
    try {
      followPods({ url: `http://127.0.0.1:${port}` }, 'default', (u) => updates.push(u), stop.signal,
        (e) => errors.push(e.message), { listMs: 300, watchSeconds: 45 });
      await waitFor('a list', () => updates.some((u) => u.type === 'LIST'), 20_000);
      await waitFor('a watch', () => paths.some((p) => p.includes('watch=true')), 20_000);
      expect(errors.length).toBeGreaterThanOrEqual(1);
      expect(paths[0]).toBe('/api/v1/namespaces/default/pods');
      expect(paths.find((p) => p.includes('watch=true')))
        .toBe('/api/v1/namespaces/default/pods?watch=true&resourceVersion=7&timeoutSeconds=45');
    } finally {
      stop.abort();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
