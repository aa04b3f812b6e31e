// `ipvs-operator explain <namespace/name>`: how one Service maps to IPVS, and side by side the
// kube-proxy iptables-mode chains it replaces (KUBE-SERVICES -> KUBE-SVC-… with `statistic
// random` 1/n, 1/(n-1), … -> KUBE-SEP-… DNAT), as the study notes walk them.
import type { DesiredVirtualServer } from '../desired/types.js';
import { kubeProxyChain } from '../iptables/kube-proxy-names.js';
import { formatHostPort, formatRealServer, formatVirtualServer } from '../model/ipvs.js';

/** `explain` of a Service the source does not have: main.ts prints it to stderr and exits 1. */
export class ServiceNotFoundError extends Error {
  constructor(readonly service: string) {
    super(`Service ${service} not found`);
  }
}

/** The explanation text for the virtual servers of one Service. */
export function renderExplain(service: string, entries: readonly DesiredVirtualServer[]): string {
  if (!entries.length) {
    return `${service}: no virtual servers (not handled by this operator, headless, ExternalName, or no ports)`;
  }
  const out: string[] = [];
  for (const d of entries) {
    const { vs, dests, origin } = d;
    const spn = `${origin.namespace}/${origin.name}${origin.portName ? `:${origin.portName}` : ''}`;
    out.push(`${spn}  ${origin.kind}  plugin ${origin.plugin}`);
    out.push(`  IPVS (this operator):`);
    out.push(`    ${formatVirtualServer(vs)}`);
    for (const rs of dests) out.push(`      -> ${formatRealServer(rs)}`);
    if (!dests.length) {
      out.push('      (no endpoints: the virtual server rejects nothing, connections find no real server)');
    }
    const svc = kubeProxyChain('KUBE-SVC-', spn, vs.protocol);
    const proto = vs.protocol.toLowerCase();
    out.push(`  kube-proxy iptables mode would instead write (nat table):`);
    const dst = `${vs.address}/${vs.family === 'IPv6' ? 128 : 32}`;
    out.push(`    -A KUBE-SERVICES -d ${dst} -p ${proto} -m ${proto} --dport ${vs.port} -j ${svc}`);
    const live = dests.filter((r) => r.weight > 0);
    live.forEach((rs, i) => {
      const sep = kubeProxyChain('KUBE-SEP-', spn, vs.protocol, formatHostPort(rs.address, rs.port));
      const left = live.length - i;
      const stat = left > 1 ? ` -m statistic --mode random --probability ${(1 / left).toFixed(10)}` : '';
      out.push(`    -A ${svc}${stat} -j ${sep}`);
    });
    live.forEach((rs) => {
      const sep = kubeProxyChain('KUBE-SEP-', spn, vs.protocol, formatHostPort(rs.address, rs.port));
      out.push(`    -A ${sep} -s ${rs.address}/${rs.family === 'IPv6' ? 128 : 32} -j KUBE-MARK-MASQ`);
      out.push(`    -A ${sep} -p ${proto} -m ${proto} -j DNAT --to-destination ${formatHostPort(rs.address, rs.port)}`);
    });
    out.push(`  The iptables chain picks uniformly at random per connection (1/${live.length || 1} each); IPVS`,
      `  asks the "${vs.scheduler}" scheduler, which ${schedulerNote(vs.scheduler)}.`, '');
  }
  return out.join('\n');
}

function schedulerNote(s: string): string {
  const notes: Record<string, string> = {
    rr: 'takes the real servers in turn (exactly even, not random)',
    wrr: 'takes them in turn in proportion to their weights',
    lc: 'picks the one with the fewest connections (active x 256 + inactive)',
    wlc: 'picks the fewest connections relative to weight',
    sed: 'picks the shortest expected delay, (active + 1) / weight, counting only active connections',
    nq: 'sends to an idle server first, else as sed',
    sh: 'hashes the client address (the same client lands on the same server)',
    dh: 'hashes the destination address',
    mh: 'uses Maglev hashing of the client address (minimal disruption on changes)',
    lblc: 'keeps a destination on one server until it is overloaded',
    lblcr: 'keeps a destination on a set of servers',
    fo: 'sends everything to the highest-weight available server',
    ovf: 'fills the highest-weight server up to its weight in connections, then the next',
    twos: 'picks the less loaded of two random servers',
  };
  return notes[s] ?? 'decides per connection';
}
