// What /healthz and /readyz answer, from values only, after kube-proxy's healthz: /healthz fails
// (503, so the kubelet restarts the pod) when for longer than the bound syncs have been failing,
// the source has been disconnected or the kernel socket has been failing, or when no sync has
// ended for 2 × syncPeriod + 60 s; /readyz answers 200 only after a successful sync, and only
// while /healthz does. A Service's refused op is its Problem, not a failed sync. The rules:
// docs/running.md ("Health, kube-proxy's rule"). pure: no I/O.

/** A component's health as it reports it: ok, and since when (ms since the epoch). */
export interface ComponentHealth {
  ok: boolean;
  since: number;
  reason?: string;
}

/** Everything the verdict is made of. */
export interface HealthInput {
  now: number;
  syncPeriodMs: number;
  /** How long a failure may last before /healthz fails; default 2 × syncPeriod (kube-proxy's). */
  boundMs?: number;
  /** When the last sync ended (undefined before the first). */
  lastSyncEnd?: number;
  /** When the current run of failed syncs began (undefined after a successful sync). */
  failingSince?: number;
  lastError?: string;
  /** A sync has succeeded since start. */
  everSynced: boolean;
  source?: ComponentHealth;
  kernel?: ComponentHealth;
}

/** The verdict; `reason` names what failed for how long (empty when ok). */
export interface HealthVerdict {
  healthy: boolean;
  ready: boolean;
  reason: string;
}

/** The default bound: kube-proxy's healthz timeout, 2 × syncPeriod. */
export function healthBoundMs(syncPeriodMs: number): number {
  return 2 * syncPeriodMs;
}

/** Applies the rules in the file comment. */
export function evaluateHealth(h: HealthInput): HealthVerdict {
  const bound = h.boundMs ?? healthBoundMs(h.syncPeriodMs);
  const secs = (ms: number) => `${Math.round(ms / 1000)} s`;
  const reasons: string[] = [];
  if (h.failingSince !== undefined && h.now - h.failingSince > bound) {
    reasons.push(`syncs failing for ${secs(h.now - h.failingSince)}${h.lastError ? `: ${h.lastError}` : ''}`);
  }
  if (h.source && !h.source.ok && h.now - h.source.since > bound) {
    const why = h.source.reason ? `: ${h.source.reason}` : '';
    reasons.push(`source disconnected for ${secs(h.now - h.source.since)}${why}`);
  }
  if (h.kernel && !h.kernel.ok && h.now - h.kernel.since > bound) {
    const why = h.kernel.reason ? `: ${h.kernel.reason}` : '';
    reasons.push(`kernel socket failing for ${secs(h.now - h.kernel.since)}${why}`);
  }
  if (h.lastSyncEnd !== undefined && h.now - h.lastSyncEnd > 2 * h.syncPeriodMs + 60_000) {
    reasons.push(`no sync for ${secs(h.now - h.lastSyncEnd)}`);
  }
  const healthy = reasons.length === 0;
  return { healthy, ready: healthy && h.everSynced, reason: reasons.join('; ') };
}
