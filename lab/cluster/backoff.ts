// The kubelet's crash-loop back-off for `restartPolicy: Always`, pure: when the lab's kubelet
// (kubelet.ts) starts an exited container again. It follows the kubelet's code rather than its
// documentation's summary ("10s, 20s, 40s, ... capped at 300 seconds"): kuberuntime_manager's
// doBackOff asks flowcontrol.Backoff whether the container is in back-off since it finished, and
// calls Next() as it restarts it. So:
//
//   exit 1 (no back-off entry yet)        -> restarted at once, back-off := 10 s
//   exit 2 within 10 min of restart 1     -> restarted 10 s after the exit, back-off := 20 s
//   exit 3                                -> 20 s later, back-off := 40 s ... capped at 5 min
//   an exit more than 2 x max (10 min)    -> the entry has expired: restarted at once, back-off
//     after the last restart                 := 10 s again (the container "ran long enough")
//
// The back-off is kept per pod UID and container: a new pod (kubectl delete pod, the DaemonSet
// makes another) starts with none. The kubelet adds no jitter to the container back-off.

/** The back-off's shape: first delay, cap, and how long a container must run for it to reset. */
export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  /** The kubelet's is 2 x maxMs (flowcontrol's hasExpired). */
  resetMs: number;
}

/** The kubelet's values: 10 s doubling to 5 min, reset after 10 min of running. */
export const KUBELET_BACKOFF: BackoffPolicy = { initialMs: 10_000, maxMs: 300_000, resetMs: 600_000 };

/** One container's back-off entry: the current delay and when the container was last (re)started (ms). */
export interface BackoffEntry { backoffMs: number; restartedAt: number }

/** What to do at an exit: wait `delayMs`, then restart and keep `entry` (its restartedAt is the restart time). */
export interface RestartDecision { delayMs: number; entry: BackoffEntry }

/**
 * The restart after an exit at `exitedAt` (ms) given the container's entry (undefined: it never
 * restarted): at once with a fresh entry when there is none or it expired, else after the entry's
 * back-off, which doubles (up to the cap) for the next exit.
 */
export function planRestart(entry: BackoffEntry | undefined, exitedAt: number, policy: BackoffPolicy = KUBELET_BACKOFF): RestartDecision {
  if (!entry || exitedAt - entry.restartedAt > policy.resetMs) return { delayMs: 0, entry: { backoffMs: policy.initialMs, restartedAt: exitedAt } };
  return { delayMs: entry.backoffMs, entry: { backoffMs: Math.min(entry.backoffMs * 2, policy.maxMs), restartedAt: exitedAt + entry.backoffMs } };
}

/** A back-off as Go prints a duration in the kubelet's CrashLoopBackOff message ("10s", "2m40s", "5m0s"; "500ms" for a short lab policy). */
export function formatBackoff(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}
