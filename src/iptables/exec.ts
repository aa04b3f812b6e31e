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

/**
 * How long one run of a tool may take (ms) before it is killed: 120 s. The longest run measured is
 * `ipset restore` of every member at 30 000 Services x 10 endpoints, 6.4 s in the lab VM under TCG;
 * the restores wait at most 5 s for the xtables lock. Too short would fail every sync of a large
 * node; too long only delays the retry of a wedged one.
 */
export const TOOL_DEADLINE_MS = 120_000;

/** Arms a deadline: calls `fire` once `ms` have passed; returns what disarms it (tests pass their own). */
export type ArmDeadline = (fire: () => void, ms: number) => () => void;

const armTimer: ArmDeadline = (fire, ms) => {
  const t = setTimeout(fire, ms);
  return () => clearTimeout(t);
};

/**
 * `run` with a deadline on each command. Past `ms` the tool is killed and the call fails with an
 * IptablesError (code 124, as timeout(1) exits): a wedged tool (a lock never released, a kernel
 * that stops answering) fails its sync, which is retried, instead of holding every sync after it.
 * The call ends at the deadline even when the tool does not die. The caller's own `signal` still
 * ends a call with AbortError.
 */
export function withDeadline(run: Runner, ms: number, arm: ArmDeadline = armTimer): Runner {
  return (cmd, args, input, signal) => {
    const deadline = new AbortController();
    const late = () => new IptablesError([cmd, ...args].join(' '), 124, `no answer after ${ms / 1000} s: killed`);
    const gaveUp = new Promise<never>((_, reject) => deadline.signal.addEventListener('abort', () => reject(late())));
    const disarm = arm(() => deadline.abort(), ms);
    const running = run(cmd, args, input, signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal);
    running.catch(() => { /* past the deadline, the deadline's error is the one reported */ });
    // The runner rejects with AbortError when its signal aborts; which abort it was decides the error.
    return Promise.race([running, gaveUp])
      .catch((e: unknown) => { throw deadline.signal.aborted && !signal?.aborted ? late() : e; })
      .finally(disarm);
  };
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
