// The forwarding annotation, a stable user API (kube-router's `kube-router.io/service.dsr=tunnel`):
//   ipvs-operator.io/forwarding: masq | tunnel      (default: masq)
// `tunnel` makes the real servers of the Service's external IPs and load-balancer IPs IPVS tunnel
// (ipip) destinations: the pod answers the client directly from the VIP (direct server return).
// ClusterIPs and NodePorts stay masqueraded, as in kube-router (why: docs/dsr.md). A mistake never
// takes the Service down: an unknown value is a Problem and the Service stays masqueraded.
// pure: no I/O.
import { describe, str } from './fields.js';
import type { Problem, VipKind } from './types.js';

export const FORWARDING_ANNOTATION = 'ipvs-operator.io/forwarding';

/** The forwarding methods a Service may ask for, the first the default. */
export const SERVICE_FORWARDINGS = ['masq', 'tunnel'] as const;
/** A Service's forwarding method. */
export type ServiceForwarding = (typeof SERVICE_FORWARDINGS)[number];

/**
 * The forwarding the Service's annotations ask for: `masq` when absent or empty; anything but
 * `masq`/`tunnel` (surrounding blanks ignored) is an InvalidForwarding problem and `masq`.
 */
export function chooseForwarding(
  serviceId: string, annotations: Record<string, unknown> | undefined, problems: Problem[],
): ServiceForwarding {
  const raw = annotations?.[FORWARDING_ANNOTATION];
  if (raw === undefined || raw === null) return 'masq';
  const value = str(raw)?.trim();
  if (value === '') return 'masq';
  if (value !== undefined && (SERVICE_FORWARDINGS as readonly string[]).includes(value)) {
    return value as ServiceForwarding;
  }
  problems.push({ service: serviceId, reason: 'InvalidForwarding',
    message: `${FORWARDING_ANNOTATION}: ${describe(raw)} is not one of ${SERVICE_FORWARDINGS.join(', ')}; using ` +
      `masq` });
  return 'masq';
}

/** Whether virtual servers of this kind are tunnelled when their Service asks for `tunnel`. */
export function tunnelledKind(kind: VipKind): boolean {
  return kind === 'external-ip' || kind === 'load-balancer';
}
