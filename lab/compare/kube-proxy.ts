// kube-proxy's iptables mode for one ClusterIP Service, as an iptables-restore payload: the
// chains the study notes read on a real cluster (KUBE-SERVICES -> KUBE-SVC-… with `-m statistic
// --mode random --probability` 1/n, 1/(n-1), … -> KUBE-SEP-… DNAT; KUBE-MARK-MASQ and
// KUBE-POSTROUTING; sessionAffinity: ClientIP via `-m recent`). Rules are written argument for
// argument as kube-proxy's proxier (pkg/proxy/iptables, 1.31) writes them, so that
// `iptables-save` shows what the notes show. pure: no I/O.
import { kubeProxyChain } from '../../src/iptables/kube-proxy-names.js';

/** One ClusterIP Service port with its ready endpoints, and the cluster's pod CIDR. */
export interface KubeProxyService {
  namespace: string;
  name: string;
  portName: string;
  clusterIP: string;
  port: number;
  endpoints: ReadonlyArray<{ ip: string; port: number }>;
  /** Traffic from outside it is masqueraded (kube-proxy's `--cluster-cidr` local detector). */
  clusterCIDR: string;
  /** sessionAffinity: ClientIP with this timeout (kube-proxy's default is 10800 s); undefined: None. */
  affinitySeconds?: number;
}

const MARK = '0x4000';

/** kube-proxy's probability string for the i-th of n remaining endpoints: `%0.10f` of 1/n. */
export function probability(n: number): string {
  return (1 / n).toFixed(10);
}

/** kube-proxy's ServicePortName string: `ns/name:port`, or `ns/name` for an unnamed port. */
function spnOf(svc: KubeProxyService): string {
  return svc.portName ? `${svc.namespace}/${svc.name}:${svc.portName}` : `${svc.namespace}/${svc.name}`;
}

/** The chain names of a Service: its KUBE-SVC chain and one KUBE-SEP chain per endpoint. */
export function serviceChains(svc: KubeProxyService): { svc: string; seps: string[] } {
  const spn = spnOf(svc);
  return {
    svc: kubeProxyChain('KUBE-SVC-', spn, 'TCP'),
    seps: svc.endpoints.map((e) => kubeProxyChain('KUBE-SEP-', spn, 'TCP', `${e.ip}:${e.port}`)),
  };
}

/** The jumps kube-proxy ensures in built-in chains (inserted first, as its EnsureRule does). */
export const KUBE_PROXY_JUMPS: ReadonlyArray<{ chain: string; args: readonly string[] }> = [
  { chain: 'PREROUTING', args: ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'] },
  { chain: 'OUTPUT', args: ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'] },
  { chain: 'POSTROUTING', args: ['-m', 'comment', '--comment', 'kubernetes postrouting rules', '-j', 'KUBE-POSTROUTING'] },
];
const JUMPS = KUBE_PROXY_JUMPS.map((j) => ({ chain: j.chain, rule: j.args.map((a) => (a.includes(' ') ? `"${a}"` : a)).join(' ') }));
const BASE_CHAINS = ['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'];

function ownChains(svc: KubeProxyService): string[] {
  const { svc: svcChain, seps } = serviceChains(svc);
  return [...BASE_CHAINS, svcChain, ...seps];
}

/** KUBE-POSTROUTING and KUBE-MARK-MASQ, as kube-proxy writes them for every sync. */
function baseRules(): string[] {
  return [
    `-A KUBE-POSTROUTING -m mark ! --mark ${MARK}/${MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MARK}`,
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MARK}`,
  ];
}

/** One Service port's rules: its KUBE-SERVICES match, its KUBE-SVC chain and its KUBE-SEP chains. */
function serviceRules(svc: KubeProxyService): string[] {
  const { svc: svcChain, seps } = serviceChains(svc);
  const spn = spnOf(svc);
  const match = `-m tcp -p tcp -d ${svc.clusterIP} --dport ${svc.port}`;
  const lines = [
    `-A KUBE-SERVICES -m comment --comment "${spn} cluster IP" ${match} -j ${svcChain}`,
    `-A ${svcChain} -m comment --comment "${spn} cluster IP" ${match} ! -s ${svc.clusterCIDR} -j KUBE-MARK-MASQ`,
  ];
  const eps = svc.endpoints.map((e, i) => ({ ...e, sep: seps[i]! }));
  if (svc.affinitySeconds !== undefined) {
    for (const e of eps) {
      lines.push(`-A ${svcChain} -m comment --comment "${spn} -> ${e.ip}:${e.port}" -m recent --name ${e.sep} --rcheck --seconds ${svc.affinitySeconds} --reap -j ${e.sep}`);
    }
  }
  eps.forEach((e, i) => {
    const left = eps.length - i;
    const stat = left > 1 ? ` -m statistic --mode random --probability ${probability(left)}` : '';
    lines.push(`-A ${svcChain} -m comment --comment "${spn} -> ${e.ip}:${e.port}"${stat} -j ${e.sep}`);
  });
  for (const e of eps) {
    const recent = svc.affinitySeconds !== undefined ? ` -m recent --name ${e.sep} --set` : '';
    lines.push(`-A ${e.sep} -m comment --comment ${spn} -s ${e.ip} -j KUBE-MARK-MASQ`);
    lines.push(`-A ${e.sep} -m comment --comment ${spn}${recent} -m tcp -p tcp -j DNAT --to-destination ${e.ip}:${e.port}`);
  }
  return lines;
}

/** The nat-table payload for `iptables-restore --noflush` that installs the Service's rules. */
export function renderKubeProxyRestore(svc: KubeProxyService): string {
  const lines = ['*nat', ...ownChains(svc).map((c) => `:${c} - [0:0]`)];
  for (const j of JUMPS) lines.push(`-I ${j.chain} ${j.rule}`);
  lines.push(...baseRules(), ...serviceRules(svc), 'COMMIT', '');
  return lines.join('\n');
}

/**
 * One whole sync of kube-proxy's nat table for these Service ports, as its syncProxyRules writes
 * it for `iptables-restore --noflush`: every chain of ours declared (so flushed) and rewritten,
 * and the chains of an earlier sync that are no longer wanted (`previous`) flushed and deleted in
 * the same transaction. The jumps from the built-in chains are not in it (kube-proxy ensures them
 * one by one, outside the restore): see KUBE_PROXY_JUMPS. Returns the payload and this sync's
 * chains, the `previous` of the next.
 */
export function renderKubeProxyTable(svcs: readonly KubeProxyService[], previous: readonly string[] = []): { payload: string; chains: string[] } {
  const chains = [...new Set([...BASE_CHAINS, ...svcs.flatMap((s) => { const c = serviceChains(s); return [c.svc, ...c.seps]; })])];
  const wanted = new Set(chains);
  const stale = previous.filter((c) => !wanted.has(c));
  const lines = ['*nat', ...[...chains, ...stale].map((c) => `:${c} - [0:0]`), ...baseRules()];
  for (const s of svcs) lines.push(...serviceRules(s));
  for (const c of stale) lines.push(`-X ${c}`);
  lines.push('COMMIT', '');
  return { payload: lines.join('\n'), chains };
}

/** The payload for `iptables-restore --noflush` that removes kube-proxy's jumps and these chains (kube-proxy --cleanup). */
export function renderKubeProxyTableTeardown(chains: readonly string[]): string {
  return ['*nat',
    ...JUMPS.map((j) => `-D ${j.chain} ${j.rule}`),
    ...chains.map((c) => `-F ${c}`),
    ...chains.map((c) => `-X ${c}`),
    'COMMIT', ''].join('\n');
}

/** The payload for `iptables-restore --noflush` that removes exactly what renderKubeProxyRestore added. */
export function renderKubeProxyTeardown(svc: KubeProxyService): string {
  return renderKubeProxyTableTeardown(ownChains(svc));
}
