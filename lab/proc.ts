// Small process helpers for the host side of the lab (and for the in-guest topology helpers).
import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';
import { run } from '../src/util/proc.js';

export { type RunResult, run } from '../src/util/proc.js';

/** Runs a program and throws with its stderr when it fails; returns its stdout. */
export async function runOk(cmd: string, args: readonly string[], opts: SpawnOptions & { input?: string } = {}): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    const detail = (r.stderr || r.stdout).trim();
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.code}${detail ? `: ${detail}` : ''}`);
  }
  return r.stdout;
}

/** Runs a program with inherited stdio (its output goes to ours); resolves to its exit code. */
export function runInherit(cmd: string, args: readonly string[], opts: SpawnOptions = {}): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise(code ?? (signal ? 128 : 1)));
  });
}

/** Quotes a string for a POSIX shell (single quotes). */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** SIGTERM, then SIGKILL after `killAfterMs`; resolves once `child` has exited (at once if it has). */
export async function stopChild(child: ChildProcess | undefined, killAfterMs = 5000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((done) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.once('exit', () => { clearTimeout(timer); done(); });
    child.kill('SIGTERM');
  });
}
