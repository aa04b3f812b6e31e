// Running the real operator (dist/src/cli/main.js run) as a child process in the lab VM, on a
// files source in a temp directory the test writes YAML into, with its JSON log lines captured.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/** Waits until `check` returns a truthy value (polling), or throws after `ms`. */
export async function waitFor<T>(what: string, check: () => Promise<T> | T, ms = 30_000, every = 200): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** A manifests directory the operator watches (`args` are the operator's source flags for it). */
export class ManifestDir {
  readonly dir = mkdtempSync(join(tmpdir(), 'ipvsop-'));
  get args(): string[] {
    return ['--source', `files:${this.dir}`];
  }
  /** Writes `objects` (multi-document YAML) as `name`.yaml. */
  write(name: string, ...objects: object[]): void {
    writeFileSync(join(this.dir, `${name}.yaml`), objects.map((o) => stringify(o)).join('---\n'));
  }
  remove(name: string): void {
    rmSync(join(this.dir, `${name}.yaml`), { force: true });
  }
  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** An operator process. */
export class OperatorProcess {
  readonly logs: Array<Record<string, unknown>> = [];
  private child: ChildProcess | undefined;
  /** `sourceArgs`: e.g. ['--source', 'files:DIR'] or ['--source', 'kube', '--kubeconfig', FILE]. */
  constructor(readonly sourceArgs: string[], readonly addr = '127.0.0.1:10249', readonly extraArgs: string[] = []) {}

  /** Starts it and waits (up to `readyMs`) for /readyz. */
  async start(readyMs = 120_000): Promise<void> {
    const child = spawn(process.execPath, [CLI, 'run', ...this.sourceArgs, '--node-name', 'lab-node',
      '--metrics-addr', this.addr, '--log-level', 'debug', ...this.extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    let buf = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          this.logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          this.logs.push({ message: line });
        }
      }
    });
    await this.waitHttp('/readyz', (code) => code === 200, readyMs);
  }

  /**
   * Waits (up to `ms`) until `path` answers with a code `ok` accepts, and returns the answer. Throws
   * at once if the process exits, and on time out; both errors carry its last log lines.
   */
  async waitHttp(path: string, ok: (code: number) => boolean, ms = 120_000): Promise<{ code: number; body: string }> {
    const child = this.child;
    if (!child) throw new Error('the operator was not started');
    const withLogs = (message: string) =>
      new Error(`${message}; its last log lines: ${JSON.stringify(this.logs.slice(-6))}`);
    const got = await waitFor(`operator ${path}`, async () => {
      if (child.exitCode !== null) return { exited: child.exitCode };
      const r = await fetch(`http://${this.addr}${path}`);
      const answer = { code: r.status, body: (await r.text()).trim() };
      return ok(answer.code) ? { answer } : undefined;
    }, ms).catch((e: unknown) => { throw withLogs((e as Error).message); });
    if ('exited' in got) throw withLogs(`operator exited with ${got.exited} while waiting for ${path}`);
    return got.answer;
  }

  /** The process id (to SIGSTOP/SIGCONT it in a test), undefined before start. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Syncs that ended since start (from the log). */
  syncs(): Array<Record<string, unknown>> {
    return this.logs.filter((l) => l.message === 'synced');
  }

  /** Waits for a sync that starts after now and ends. */
  async nextSync(ms = 30_000): Promise<Record<string, unknown>> {
    const n = this.syncs().length;
    return waitFor('a sync', () => this.syncs()[n], ms);
  }

  /** SIGTERM, and waits for the exit. */
  async stop(): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null) return child?.exitCode ?? null;
    child.kill('SIGTERM');
    return new Promise((r) => child.once('exit', (code) => r(code)));
  }
}

/** A Service manifest like `kubectl get -o yaml` shows one. */
export function service(name: string, clusterIP: string, annotations: Record<string, string> = {}, port = 80): object {
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { name, namespace: 'default', annotations },
    spec: {
      type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], ipFamilies: ['IPv4'], selector: { app: name },
      ports: [{ name: 'http', port, protocol: 'TCP', targetPort: 80 }],
    },
  };
}

/** An EndpointSlice of Service `name` with ready endpoints on port 80. */
export function slice(name: string, ips: string[]): object {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    endpoints: ips.map((ip) => ({ addresses: [ip], nodeName: 'lab-node', conditions: { ready: true, serving: true, terminating: false } })),
  };
}
