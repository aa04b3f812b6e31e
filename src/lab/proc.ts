// Small process helpers for the host side of the lab (and for the in-guest topology helpers).
import { spawn, type SpawnOptions } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion, capturing its output. Never throws for a non-zero exit. */
export function run(cmd: string, args: readonly string[], opts: SpawnOptions & { input?: string } = {}): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const { input, ...spawnOpts } = opts;
    const child = spawn(cmd, args, { ...spawnOpts, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
    if (input !== undefined) {
      child.stdin?.on('error', () => { /* the child may not read its input */ });
      child.stdin?.end(input);
    }
  });
}

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
