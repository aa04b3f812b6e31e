// The real operator (dist/src/cli/main.js run) as a child process in the lab VM, on a files
// source directory that lab compare rewrites for each scheduler. Its JSON log is kept in memory
// and shown when something goes wrong.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { run } from '../proc.js';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/** A files-source directory and the operator watching it. */
export class OperatorUnderTest {
  readonly dir = mkdtempSync(join(tmpdir(), 'compare-'));
  private child: ChildProcess | undefined;
  private log: string[] = [];

  constructor(readonly nodeName: string, readonly addr = '127.0.0.1:10249') {}

  /** Writes `objects` as multi-document YAML to `name`.yaml (the operator picks it up). */
  write(name: string, objects: readonly object[]): void {
    writeFileSync(join(this.dir, `${name}.yaml`), objects.map((o) => stringify(o)).join('---\n'));
  }

  /** Removes `name`.yaml; missing is fine. */
  remove(name: string): void {
    rmSync(join(this.dir, `${name}.yaml`), { force: true });
  }

  /** Starts the operator and waits for /readyz (180 s: its first full sync is slow under TCG on busy cores). */
  async start(): Promise<void> {
    const child = spawn(process.execPath, [CLI, 'run', '--source', `files:${this.dir}`, '--node-name', this.nodeName,
      '--metrics-addr', this.addr], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.log.push(...d.split('\n').filter(Boolean));
      if (this.log.length > 200) this.log = this.log.slice(-100);
    });
    const end = Date.now() + 180_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the operator exited with ${child.exitCode}:\n${this.tail()}`);
      try {
        if ((await fetch(`http://${this.addr}/readyz`)).ok) return;
      } catch { /* not listening yet */ }
      if (Date.now() > end) throw new Error(`the operator was not ready after 180 s:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** The last lines of its log. */
  tail(n = 10): string {
    return this.log.slice(-n).join('\n');
  }

  /** SIGTERM and wait; then `ipvs-operator cleanup` removes its virtual servers, VIPs, chains and sets. */
  async stopAndCleanUp(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((done) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', () => { clearTimeout(timer); done(); });
        child.kill('SIGTERM');
      });
    }
    await cleanUpOperatorState();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `ipvs-operator cleanup`: what an operator left behind (nothing when none ran). Throws when it fails. */
export async function cleanUpOperatorState(): Promise<void> {
  const r = await run(process.execPath, [CLI, 'cleanup']);
  if (r.code !== 0) throw new Error(`ipvs-operator cleanup exited with ${r.code}: ${r.stderr.trim()}`);
}
