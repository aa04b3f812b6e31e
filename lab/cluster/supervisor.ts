// One container run as `restartPolicy: Always` runs it (the lab's kubelet, kubelet.ts, gives each
// operator pod one): every exit, whatever its code, is followed by a restart after the kubelet's
// crash-loop back-off (backoff.ts); the readiness probe runs after each start until it succeeds;
// the container's status is reported as the pod's status.containerStatuses shows it
// (restartCount, state running / waiting CrashLoopBackOff / terminated, lastState). stop() is a
// deliberate stop (the pod deleted, the cluster going down): SIGTERM, SIGKILL after the grace
// period, and no restart.
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { type BackoffEntry, type BackoffPolicy, KUBELET_BACKOFF, formatBackoff, planRestart } from './backoff.js';

/** How a container ended (v1 ContainerStateTerminated). */
export interface Terminated { exitCode: number; signal?: number; reason: string; startedAt: string; finishedAt: string; containerID: string }

/** The container's status as the API shows it (a v1 ContainerStatus). */
export interface ContainerStatus {
  name: string; image: string; imageID: string; containerID?: string;
  restartCount: number; ready: boolean; started: boolean;
  state: { running?: { startedAt: string }; waiting?: { reason: string; message?: string }; terminated?: Terminated };
  lastState: { terminated?: Terminated };
}

/** What the Supervisor runs and whom it tells. */
export interface ContainerSpec {
  /** The container's name and image, for its status. */
  name: string;
  image: string;
  /** The pod's namespace/name, for the CrashLoopBackOff message. */
  pod: string;
  /** Starts run `restartCount` of the container (numbered from 0); its output is the caller's business. */
  spawn(restartCount: number): ChildProcess;
  /** One readiness probe: true when the container answers its readinessProbe. */
  probe(): Promise<boolean>;
  /** After every change of the status. */
  onStatus(status: ContainerStatus): void;
  /** terminationGracePeriodSeconds in ms: SIGKILL this long after SIGTERM. */
  graceMs: number;
  policy?: BackoffPolicy;
  /** How often the readiness probe runs until it succeeds (default 250 ms). */
  probeEveryMs?: number;
  log?: (line: string) => void;
}

/** A timestamp as the API writes one (seconds). */
export const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

interface Run { child: ChildProcess; startedAt: string; exit: Promise<Terminated> }

/** One supervised container (see the file comment). */
export class Supervisor {
  private current: Run | undefined;
  private entry: BackoffEntry | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private waiters: Array<{ ready: () => void; fail: (e: Error) => void }> = [];
  private status: ContainerStatus;

  constructor(private readonly spec: ContainerSpec) {
    this.status = { name: spec.name, image: spec.image, imageID: '', restartCount: 0, ready: false, started: false, state: { waiting: { reason: 'ContainerCreating' } }, lastState: {} };
  }

  /** Starts the first run. */
  start(): void {
    this.runOnce();
  }

  /** The running container's pid (undefined between runs and after stop): what `kill -9` takes. */
  get pid(): number | undefined {
    const c = this.current?.child;
    return c && c.exitCode === null && c.signalCode === null ? c.pid : undefined;
  }

  /** The status as last reported. */
  get containerStatus(): ContainerStatus {
    return structuredClone(this.status);
  }

  /** Resolves when the current run answers its probe; rejects when it exits first, or after `ms`. */
  whenReady(ms: number): Promise<void> {
    if (this.status.ready) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`not ready after ${ms / 1000} s`)), ms);
      const w = { ready: () => { clearTimeout(timer); resolve(); }, fail: (e: Error) => { clearTimeout(timer); reject(e); } };
      const fail = (e: Error) => { this.waiters = this.waiters.filter((x) => x !== w); w.fail(e); };
      this.waiters.push(w);
    });
  }

  /**
   * A deliberate stop: no restart (a pending one is cancelled), SIGTERM, SIGKILL after the grace
   * period. The exit code of the last run (null when a signal ended it, or it never ran).
   */
  async stop(): Promise<number | null> {
    this.stopped = true;
    clearTimeout(this.timer);
    const run = this.current;
    if (!run) return null;
    const { child } = run;
    if (child.exitCode === null && child.signalCode === null) {
      const kill = setTimeout(() => child.kill('SIGKILL'), this.spec.graceMs);
      child.kill('SIGTERM');
      await run.exit;
      clearTimeout(kill);
    }
    return child.exitCode;
  }

  private setStatus(change: Partial<ContainerStatus>): void {
    this.status = { ...this.status, ...change };
    this.spec.onStatus(this.containerStatus);
  }

  private runOnce(): void {
    const child = this.spec.spawn(this.status.restartCount);
    const containerID = `lab://${child.pid ?? 0}`;
    const startedAt = now();
    const exit = new Promise<Terminated>((resolve) => {
      child.once('exit', (code, signal) => {
        const signo = signal ? constants.signals[signal] : undefined;
        // As the container runtime reports a signal: 128 + its number.
        const exitCode = code ?? 128 + (signo ?? 0);
        resolve({ exitCode, ...(signo ? { signal: signo } : {}), reason: exitCode === 0 ? 'Completed' : 'Error', startedAt, finishedAt: now(), containerID });
      });
      // A spawn that fails (no such program) emits 'error' and never 'exit': a run that ended at
      // once, as a runtime reports a container it could not start (StartError, 128); restarted
      // with back-off like any exit, and stop() does not wait for an exit that never comes.
      child.once('error', (e) => {
        this.spec.log?.(`${this.spec.pod}: ${e.message}`);
        if (child.pid === undefined) resolve({ exitCode: 128, reason: 'StartError', startedAt, finishedAt: now(), containerID });
      });
    });
    const run: Run = { child, startedAt, exit };
    this.current = run;
    this.setStatus({ containerID, started: true, ready: false, state: { running: { startedAt } } });
    void this.probeUntilReady(run);
    void exit.then((t) => this.exited(run, t));
  }

  private async probeUntilReady(run: Run): Promise<void> {
    const alive = () => this.current === run && run.child.exitCode === null && run.child.signalCode === null && !this.stopped;
    while (alive()) {
      if (await this.spec.probe().catch(() => false)) {
        if (!alive()) return;
        this.setStatus({ ready: true });
        for (const w of this.waiters.splice(0)) w.ready();
        return;
      }
      await new Promise((r) => setTimeout(r, this.spec.probeEveryMs ?? 250));
    }
  }

  private exited(run: Run, t: Terminated): void {
    if (this.current !== run) return;
    for (const w of this.waiters.splice(0)) w.fail(new Error(`exited with ${t.exitCode}${t.signal ? ` (signal ${t.signal})` : ''}`));
    if (this.stopped) {
      this.setStatus({ ready: false, state: { terminated: t } });
      return;
    }
    const d = planRestart(this.entry, Date.parse(t.finishedAt), this.spec.policy ?? KUBELET_BACKOFF);
    this.entry = d.entry;
    this.spec.log?.(`${this.spec.pod}: container ${this.spec.name} exited with ${t.exitCode}; restart ${d.delayMs ? `in ${formatBackoff(d.delayMs)}` : 'now'}`);
    if (d.delayMs === 0) {
      this.status = { ...this.status, restartCount: this.status.restartCount + 1, lastState: { terminated: t } };
      this.runOnce();
      return;
    }
    this.setStatus({
      ready: false, lastState: { terminated: t },
      state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${formatBackoff(d.delayMs)} restarting failed container=${this.spec.name} pod=${this.spec.pod}` } },
    });
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      this.status = { ...this.status, restartCount: this.status.restartCount + 1 };
      this.runOnce();
    }, d.delayMs);
  }
}
