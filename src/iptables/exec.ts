// Running the iptables/ipset binaries: the Runner seam (a fake in unit tests, child_process in
// production) and the error every failed command becomes.

import type { RunResult } from '../util/proc.js';

export type { RunResult };

/**
 * Runs `cmd args` with `input` on stdin; never throws for a non-zero exit, rejects when it cannot
 * start (ENOENT), and when `signal` aborts (the child is killed; AbortError).
 */
export type Runner = (cmd: string, args: readonly string[], input?: string, signal?: AbortSignal) => Promise<RunResult>;

/** A command of the iptables path that failed; `stderr` holds the tool's own words. */
export class IptablesError extends Error {
  constructor(readonly cmd: string, readonly code: number, readonly stderr: string) {
    super(`${cmd} exited with ${code}${stderr.trim() ? `: ${stderr.trim()}` : ''}`);
    this.name = 'IptablesError';
  }
}

/** Whether `e` is a command of the iptables path that ran and failed. */
export function isIptablesError(e: unknown): e is IptablesError {
  return e instanceof IptablesError;
}

/** Runs and returns stdout; throws IptablesError on a non-zero exit. */
export async function runChecked(
  run: Runner, cmd: string, args: readonly string[], input?: string, signal?: AbortSignal,
): Promise<string> {
  signal?.throwIfAborted();
  const r = await run(cmd, args, input, signal);
  if (r.code !== 0) throw new IptablesError([cmd, ...args].join(' '), r.code, r.stderr || r.stdout);
  return r.stdout;
}
