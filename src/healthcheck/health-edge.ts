// The operator's afterSync step for kube-proxy's health checking: after each successful sync the
// proxy counts as updated (ProxierHealth), the proxy health server listens on the configured
// healthzBindAddress, and the health-check NodePorts' listeners are made to match the desired
// state's wanted set. Listeners go on the node's NodePort addresses when nodePortAddresses is set,
// on every address when it is not (kube-proxy: service_health.go, nodePortAddresses.MatchAll).
import type { ProxyConfig } from '../config/types.js';
import type { Desired, Problem } from '../desired/types.js';
import { type HealthCheck, wantedHealthServers } from '../desired/health-checks.js';
import type { ServiceHealthServers, ProxierHealthServer } from './health-servers.js';
import type { ProxierHealth } from './proxier-health.js';

/**
 * What the hook reads of a sync: the sync loop's AfterSyncView (src/sync/operator.ts), restated
 * here so that health checking does not import the loop it sits below.
 */
export interface HealthEdgeView {
  desired: Desired;
  healthChecks: readonly HealthCheck[];
  config: ProxyConfig;
}

/**
 * The afterSync hook wiring the three together; its problems are the health-check ports' (listen
 * failures, conflicts).
 */
export function healthEdge(
  parts: { health: ProxierHealth; proxier: ProxierHealthServer; services: ServiceHealthServers },
): (view: HealthEdgeView) => Promise<readonly Problem[]> {
  return async ({ desired, healthChecks, config }) => {
    parts.health.setTimeout(2 * config.syncPeriod * 1000);
    parts.health.updated();
    await parts.proxier.ensure(config.healthzBindAddress);
    const wanted = wantedHealthServers(healthChecks);
    const addresses = config.nodePortAddresses.length ? [...desired.nodePortAddresses] : undefined;
    return [...wanted.problems, ...await parts.services.sync(wanted.servers, addresses)];
  };
}
