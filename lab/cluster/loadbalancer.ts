// The lab's LoadBalancer controller: what cloud-provider-kind or MetalLB's L2 mode do for a kind
// cluster. A Service of type LoadBalancer gets an ingress IP from a pool on the nodes' bridge
// (status.loadBalancer.ingress, ipMode VIP); a Service that stops being a LoadBalancer gives its
// IP back (status.loadBalancer cleared). An ingress already there is kept, whoever wrote it (a
// test acting as another cloud); when the pool is used up the Service stays pending (no
// ingress), as MetalLB leaves it. IPv4 only. The
// "cloud" routes the pool to the control plane node (cluster.ts), whose IPVS takes it from there.
// pure: the API server (apiserver.ts) writes what this returns.
import { formatIp, parseCidr, parseIp } from './alloc.js';

export interface LbService {
  metadata: { name: string; namespace?: string };
  spec?: { type?: string };
  status?: { loadBalancer?: { ingress?: Array<{ ip?: string }> } };
}

/** Every usable address of a pool given as an IPv4 CIDR (network and broadcast included: it is a range, not a subnet). */
export function poolAddresses(cidr: string): string[] {
  const r = parseCidr(cidr);
  if (r.family !== 'IPv4') throw new Error(`load balancer pool "${cidr}": IPv4 only`);
  return Array.from({ length: Number(r.size) }, (_, i) => formatIp('IPv4', r.base + BigInt(i)));
}

/** The ingress each Service should have now, for those whose status must change (`undefined`: clear it). */
export function reconcileLoadBalancers(services: readonly LbService[], pool: readonly string[]): Map<LbService, string | undefined> {
  const inPool = new Set(pool);
  const ipOf = (s: LbService) => s.status?.loadBalancer?.ingress?.map((i) => i.ip).find((ip) => ip !== undefined && inPool.has(ip));
  const used = new Set<string>();
  const keep = new Map<LbService, string>();
  // Keep what is assigned first (oldest claim wins a duplicate), then hand out the rest in order.
  for (const s of services) {
    const ip = ipOf(s);
    if (s.spec?.type === 'LoadBalancer' && ip && !used.has(ip)) {
      used.add(ip);
      keep.set(s, ip);
    }
  }
  const changes = new Map<LbService, string | undefined>();
  const free = pool.filter((ip) => !used.has(ip) && parseIp(ip));
  for (const s of services) {
    if (s.spec?.type !== 'LoadBalancer') {
      if (ipOf(s)) changes.set(s, undefined);
      continue;
    }
    if (keep.has(s) || (s.status?.loadBalancer?.ingress?.length && !ipOf(s))) continue;
    const next = free.shift();
    if (next) changes.set(s, next);
  }
  return changes;
}
