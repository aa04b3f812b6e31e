// Health-check NodePorts, the pure half (kube-proxy pkg/proxy/healthcheck/service_health.go and the
// proxier's use of it): which Services want one, on which port, with how many local endpoints, and
// the wanted set of HTTP health servers (port -> Service, count) that the edge module
// (src/healthcheck/health-servers.ts) opens and closes. pure: no I/O. kube-proxy's rules it
// follows: docs/semantics.md ("Health-check NodePorts").
import type { Problem } from './types.js';

/** One Service's health-check NodePort as the desired state computed it. */
export interface HealthCheck {
  namespace: string;
  name: string;
  port: number;
  /** Distinct addresses of this node's ready endpoints, over every port and family. */
  localEndpoints: number;
}

/** One wanted health server: the Service it answers for and its local endpoint count. */
export interface WantedHealthServer {
  namespace: string;
  name: string;
  localEndpoints: number;
}

/** Whether the Service wants a health-check NodePort (kube-proxy's NeedsHealthCheck). */
export function needsHealthCheck(spec: Record<string, unknown>): boolean {
  return spec.type === 'LoadBalancer' && spec.externalTrafficPolicy === 'Local';
}

/**
 * The Service's health check, or undefined with a problem when it needs one but
 * spec.healthCheckNodePort is not an integer in 1..65535; undefined when it needs none.
 */
export function healthCheckOf(
  id: string, spec: Record<string, unknown>, localReady: ReadonlySet<string>, problems: Problem[],
): HealthCheck | undefined {
  if (!needsHealthCheck(spec)) return undefined;
  const raw = spec.healthCheckNodePort;
  const port = typeof raw === 'number' && Number.isInteger(raw) && raw >= 1 && raw <= 65535 ? raw : undefined;
  if (port === undefined) {
    problems.push({ service: id, reason: 'InvalidHealthCheckNodePort',
      message: `spec.healthCheckNodePort: ${raw === undefined ? 'missing' : JSON.stringify(raw)}; a LoadBalancer ` +
        `Service with externalTrafficPolicy Local needs a port in 1..65535; no health check served` });
    return undefined;
  }
  const [namespace = '', name = ''] = id.split('/');
  return { namespace, name, port, localEndpoints: localReady.size };
}

/**
 * The health servers wanted: one per port. Two Services on one port (the API server never
 * allocates that; a files source can): the lexicographically first "namespace/name" keeps it, as
 * for virtual servers, and the other gets a HealthCheckNodePortConflict problem.
 */
export function wantedHealthServers(
  checks: Iterable<HealthCheck>,
): { servers: Map<number, WantedHealthServer>; problems: Problem[] } {
  const byPort = new Map<number, HealthCheck[]>();
  for (const c of checks) {
    const list = byPort.get(c.port);
    if (list) list.push(c);
    else byPort.set(c.port, [c]);
  }
  const servers = new Map<number, WantedHealthServer>();
  const problems: Problem[] = [];
  for (const [port, list] of [...byPort].sort((a, b) => a[0] - b[0])) {
    const sorted = list.map((c) => ({ c, id: `${c.namespace}/${c.name}` })).sort((a, b) =>
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const [first, ...rest] = sorted;
    servers.set(port, { namespace: first!.c.namespace, name: first!.c.name, localEndpoints: first!.c.localEndpoints });
    for (const r of rest) {
      problems.push({ service: r.id, reason: 'HealthCheckNodePortConflict',
        message: `healthCheckNodePort ${port} is already served for Service ${first!.id}; not served for this one` });
    }
  }
  return { servers, problems };
}
