// Running a program to completion with its output captured: the one spawn helper, used by the
// iptables path (its Runner) and by the lab.
import { type SpawnOptions, spawn } from 'node:child_process';

/** What a program printed and how it ended. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion, capturing its output. Never throws for a non-zero exit. */
export function run(cmd: string, args: readonly string[],
  opts: SpawnOptions & { input?: string } = {}): Promise<RunResult> {
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

