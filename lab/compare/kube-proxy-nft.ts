// kube-proxy's nftables mode for one ClusterIP Service, as an `nft -f` script: the state its
// nftables proxier (pkg/proxy/nftables, 1.31+) writes, in the `add ...` form its own tests compare
// whole (the fake's Dump()): table `ip kube-proxy`; the `services` chain looks the destination up in
// the `service-ips` verdict map (ClusterIP . proto . port : goto service-HASH-ns/name/proto/port);
// the service chain marks traffic from outside the cluster CIDR for masquerade, then picks an
// endpoint with `numgen random mod N vmap { 0 : goto endpoint-..., ... }` (one draw, uniform,
// where iptables mode walks a chain of 1/n, 1/(n-1), ... probabilities); each endpoint chain
// marks hairpin traffic and DNATs. sessionAffinity ClientIP: a dynamic set with a timeout per
// endpoint, checked before the numgen rule and updated in the endpoint chain. pure: no I/O.
import { createHash } from 'node:crypto';
import type { KubeProxyService } from './kube-proxy.js';

/** What kube-proxy's base rules need beyond the Service: the service CIDR and the node's IPs. */
export interface NftNode {
  /** `--service-cluster-ip-range`: traffic to unallocated ClusterIPs is dropped. */
  serviceCIDR: string;
  /** Addresses that accept NodePort traffic (the nodeport-ips set). */
  nodeIPs: readonly string[];
}

const TABLE = 'ip kube-proxy';
const MARK = '0x4000';
const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 (with the standard alphabet) of `buf`, unpadded. */
function base32(buf: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

/** kube-proxy's hashAndTruncate: the first 8 base32 characters of sha256(name), a dash, the name (at most 240). */
export function hashName(name: string): string {
  const s = `${base32(createHash('sha256').update(name).digest()).slice(0, 8)}-${name}`;
  return s.length > 240 ? `${s.slice(0, 237)}...` : s;
}

/** The Service's chain and set names: service-…, endpoint-… and affinity-… per endpoint. */
export function nftNames(svc: KubeProxyService): { service: string; endpoints: string[]; affinity: string[] } {
  const base = `${svc.namespace}/${svc.name}/tcp/${svc.portName}`;
  const eps = svc.endpoints.map((e) => hashName(`${base}__${e.ip}/${e.port}`));
  return { service: `service-${hashName(base)}`, endpoints: eps.map((e) => `endpoint-${e}`), affinity: eps.map((e) => `affinity-${e}`) };
}

/** kube-proxy's base ruleset (setupNFTables): table, sets, maps, base and helper chains. */
function baseRules(node: NftNode): string[] {
  const t = TABLE;
  const addrMap = 'type ipv4_addr . inet_proto . inet_service : verdict';
  return [
    `add table ${t} { comment "rules for kube-proxy" ; }`,
    '',
    `add set ${t} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`,
    `add set ${t} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }`,
    '',
    `add map ${t} firewall-ips { ${addrMap} ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }`,
    `add map ${t} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }`,
    `add map ${t} no-endpoint-services { ${addrMap} ; comment "vmap to drop or reject packets to services with no endpoints" ; }`,
    `add map ${t} service-ips { ${addrMap} ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
    `add map ${t} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`,
    '',
    `add chain ${t} cluster-ips-check`,
    `add chain ${t} filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }`,
    `add chain ${t} filter-output-pre-dnat { type filter hook output priority -110 ; }`,
    `add chain ${t} filter-forward { type filter hook forward priority 0 ; }`,
    `add chain ${t} filter-input { type filter hook input priority 0 ; }`,
    `add chain ${t} filter-output { type filter hook output priority 0 ; }`,
    `add chain ${t} firewall-check`,
    `add chain ${t} mark-for-masquerade`,
    `add chain ${t} masquerading`,
    `add chain ${t} nat-output { type nat hook output priority -100 ; }`,
    `add chain ${t} nat-postrouting { type nat hook postrouting priority 100 ; }`,
    `add chain ${t} nat-prerouting { type nat hook prerouting priority -100 ; }`,
    `add chain ${t} nodeport-endpoints-check`,
    `add chain ${t} reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }`,
    `add chain ${t} services`,
    `add chain ${t} service-endpoints-check`,
    '',
    `add rule ${t} cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"`,
    `add rule ${t} cluster-ips-check ip daddr { ${node.serviceCIDR} } drop comment "Drop traffic to unallocated ClusterIPs"`,
    `add rule ${t} filter-prerouting-pre-dnat ct state new jump firewall-check`,
    `add rule ${t} filter-forward ct state new jump service-endpoints-check`,
    `add rule ${t} filter-forward ct state new jump cluster-ips-check`,
    `add rule ${t} filter-input ct state new jump nodeport-endpoints-check`,
    `add rule ${t} filter-input ct state new jump service-endpoints-check`,
    `add rule ${t} filter-output ct state new jump service-endpoints-check`,
    `add rule ${t} filter-output-pre-dnat ct state new jump firewall-check`,
    `add rule ${t} filter-output ct state new jump cluster-ips-check`,
    `add rule ${t} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips`,
    `add rule ${t} mark-for-masquerade mark set mark or ${MARK}`,
    `add rule ${t} masquerading mark and ${MARK} == 0 return`,
    `add rule ${t} masquerading mark set mark xor ${MARK}`,
    `add rule ${t} masquerading masquerade fully-random`,
    `add rule ${t} nat-output jump services`,
    `add rule ${t} nat-postrouting jump masquerading`,
    `add rule ${t} nat-prerouting jump services`,
    `add rule ${t} nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports`,
    `add rule ${t} reject-chain reject`,
    `add rule ${t} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add rule ${t} services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
    '',
    ...node.nodeIPs.map((ip) => `add element ${t} nodeport-ips { ${ip} }`),
    `add rule ${t} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services`,
  ];
}

/** The whole ruleset (an `nft -f` script) for one ClusterIP Service with at least one endpoint. */
export function renderNftRuleset(svc: KubeProxyService, node: NftNode): string {
  if (!svc.endpoints.length) throw new Error('renderNftRuleset: the lab Service needs at least one endpoint');
  const t = TABLE;
  const n = nftNames(svc);
  const affinity = svc.affinitySeconds;
  const lines = [...baseRules(node), '', `# ${svc.namespace}/${svc.name}`];
  if (affinity !== undefined) {
    for (const set of n.affinity) lines.push(`add set ${t} ${set} { type ipv4_addr ; flags dynamic,timeout ; timeout ${affinity}s ; }`);
  }
  // Endpoint chains are created first, as the proxier's transaction does: a vmap's goto needs them.
  for (const ep of n.endpoints) lines.push(`add chain ${t} ${ep}`);
  lines.push(
    `add chain ${t} ${n.service}`,
    `add rule ${t} ${n.service} ip daddr ${svc.clusterIP} ip saddr != ${svc.clusterCIDR} jump mark-for-masquerade`,
  );
  if (affinity !== undefined) {
    n.endpoints.forEach((ep, i) => lines.push(`add rule ${t} ${n.service} ip saddr @${n.affinity[i]} goto ${ep}`));
  }
  lines.push(`add rule ${t} ${n.service} numgen random mod ${n.endpoints.length} vmap { ` +
    `${n.endpoints.map((ep, i) => `${i} : goto ${ep}`).join(' , ')} }`, '');
  svc.endpoints.forEach((e, i) => {
    const ep = n.endpoints[i]!;
    lines.push(`add rule ${t} ${ep} ip saddr ${e.ip} jump mark-for-masquerade`);
    if (affinity !== undefined) lines.push(`add rule ${t} ${ep} update @${n.affinity[i]} { ip saddr }`);
    lines.push(`add rule ${t} ${ep} meta l4proto tcp dnat to ${e.ip}:${e.port}`);
  });
  lines.push(
    '',
    `add element ${t} cluster-ips { ${svc.clusterIP} }`,
    `add element ${t} service-ips { ${svc.clusterIP} . tcp . ${svc.port} : goto ${n.service} }`,
    '',
  );
  return lines.join('\n');
}

/** The `nft -f` script that removes all of it (kube-proxy's own cleanup deletes its table). */
export function renderNftTeardown(): string {
  return `delete table ${TABLE}\n`;
}
