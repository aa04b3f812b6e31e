// The node-level proxy health of kube-proxy's `:10256` server (pkg/proxy/healthcheck/
// proxier_health.go): what /healthz and /livez answer, from values only (the clock is injected;
// the HTTP edge is health-servers.ts). Healthy while no Service or EndpointSlice change waits
// longer than 2 × syncPeriod to be programmed; /healthz is also 503 while the Node is not
// eligible (being deleted, or tainted ToBeDeletedByClusterAutoscaler). Bodies, headers and time
// format as kube-proxy writes them: docs/running.md, "The proxy health server".
import type { V1Node } from '../desired/kube.js';

/** The Cluster Autoscaler's taint for a node about to be deleted (kube-proxy's ToBeDeletedTaint). */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** An HTTP answer as values. */
export interface HealthAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * kube-proxy's eligibility: not being deleted and not tainted ToBeDeletedByClusterAutoscaler; a
 * deleted Node (undefined) is not.
 */
export function nodeEligible(node: V1Node | undefined): boolean {
  if (!node) return false;
  if (node.metadata?.deletionTimestamp) return false;
  const taints = Array.isArray(node.spec?.taints) ? node.spec.taints : [];
  return !taints.some((t) => t?.key === TO_BE_DELETED_TAINT);
}

/**
 * `ms` (since the epoch) as Go's time.Time String() in UTC, e.g. `2026-11-23 08:30:00.123 +0000 UTC`;
 * 0 is Go's zero time. With `startMs`, the monotonic suffix ` m=+12.345000000` Go prints for
 * time.Now() values (seconds since start), as kube-proxy's bodies carry it.
 */
export function formatGoTime(ms: number | undefined, startMs?: number): string {
  if (ms === undefined) return '0001-01-01 00:00:00 +0000 UTC';
  const iso = new Date(ms).toISOString(); // 2026-11-23T08:30:00.123Z
  const frac = iso.slice(20, 23).replace(/0+$/, '');
  const mono = startMs === undefined ? '' : ` m=+${((ms - startMs) / 1000).toFixed(9)}`;
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${frac ? `.${frac}` : ''} +0000 UTC${mono}`;
}

/** The proxy's health state, updated by the runner's hooks; answers /healthz and /livez. */
export class ProxierHealth {
  private oldestPending: number | undefined;
  private lastUpdated: number | undefined;
  private eligible = true;
  private readonly start: number;

  constructor(private timeoutMs: number, private readonly now: () => number = Date.now) {
    this.start = now();
  }

  /** A new timeout (2 × syncPeriod after a configuration change). */
  setTimeout(ms: number): void {
    this.timeoutMs = ms;
  }

  /** A change was received that a sync must program (kube-proxy: QueuedUpdate); keeps the oldest. */
  queuedUpdate(): void {
    this.oldestPending ??= this.now();
  }

  /** A sync programmed everything received so far (kube-proxy: Updated). */
  updated(): void {
    this.oldestPending = undefined;
    this.lastUpdated = this.now();
  }

  /** The Node changed (or was deleted: undefined). */
  syncNode(node: V1Node | undefined): void {
    this.eligible = nodeEligible(node);
  }

  /** Healthy as kube-proxy's IsHealthy, ignoring the Node (serviceProxyHealthy of the health-check ports). */
  isHealthy(): boolean {
    return this.oldestPending === undefined || this.now() - this.oldestPending < this.timeoutMs;
  }

  /** Whether the Node is eligible (not being deleted, not tainted for deletion). */
  get nodeEligible(): boolean {
    return this.eligible;
  }

  /** The /healthz answer. */
  healthz(): HealthAnswer {
    return this.answer(true);
  }

  /** The /livez answer (the Node's eligibility is not part of it). */
  livez(): HealthAnswer {
    return this.answer(false);
  }

  private answer(withNode: boolean): HealthAnswer {
    const now = this.now();
    const healthy = this.isHealthy() && (!withNode || this.eligible);
    const last = healthy ? now : this.lastUpdated;
    const q = (ms: number | undefined) => JSON.stringify(formatGoTime(ms, ms === undefined ? undefined : this.start));
    const eligible = withNode ? `, "nodeEligible": ${this.eligible}` : '';
    const body = `{"lastUpdated": ${q(last)},"currentTime": ${q(now)}${eligible}}`;
    return { status: healthy ? 200 : 503, headers: JSON_HEADERS, body };
  }
}

/** kube-proxy's health answers' headers. */
export const JSON_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'Content-Type': 'application/json',
  'X-Content-Type-Options': 'nosniff' });

/** The body of a Service's health-check port, byte for byte as kube-proxy's (tabs, no final newline). */
export function serviceHealthBody(namespace: string, name: string, localEndpoints: number,
  proxyHealthy: boolean): string {
  return [
    '{',
    '\t"service": {',
    `\t\t"namespace": ${JSON.stringify(namespace)},`,
    `\t\t"name": ${JSON.stringify(name)}`,
    '\t},',
    `\t"localEndpoints": ${localEndpoints},`,
    `\t"serviceProxyHealthy": ${proxyHealthy}`,
    '}',
  ].join('\n');
}

/** A Service health-check answer: 200 when it has local endpoints and the proxy is healthy, else 503. */
export function serviceHealthAnswer(namespace: string, name: string, localEndpoints: number,
  proxyHealthy: boolean): HealthAnswer {
  return {
    status: localEndpoints !== 0 && proxyHealthy ? 200 : 503,
    headers: JSON_HEADERS,
    body: serviceHealthBody(namespace, name, localEndpoints, proxyHealthy),
  };
}
