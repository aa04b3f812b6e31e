// The lab kubelet's pure parts: the crash-loop back-off of restartPolicy Always (backoff.ts), the
// pod log files' layout and the pods/log query (podlog.ts), and the operator's Pod from its
// DaemonSet (daemonset.ts); and the Supervisor (supervisor.ts) with short-lived node processes and a
// short back-off. Times are ms from 0; a container "runs" from its restart to its exit.
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { type BackoffEntry, KUBELET_BACKOFF, formatBackoff, planRestart } from '../../../lab/cluster/backoff.js';
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
