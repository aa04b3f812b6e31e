// kube-proxy's iptables mode for one ClusterIP Service, as an iptables-restore payload: the
// chains the study notes read on a real cluster (KUBE-SERVICES -> KUBE-SVC-… with `-m statistic
// --mode random --probability` 1/n, 1/(n-1), … -> KUBE-SEP-… DNAT; KUBE-MARK-MASQ and
// KUBE-POSTROUTING; sessionAffinity: ClientIP via `-m recent`). Rules are written argument for
// argument as kube-proxy's proxier (pkg/proxy/iptables, 1.31) writes them, so that
// `iptables-save` shows what the notes show. pure: no I/O.
import { kubeProxyChain } from '../iptables/kube-proxy-names.js';

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

/** The chain names of a Service: its KUBE-SVC chain and one KUBE-SEP chain per endpoint. */
export function serviceChains(svc: KubeProxyService): { svc: string; seps: string[] } {
  const spn = `${svc.namespace}/${svc.name}:${svc.portName}`;
  return {
    svc: kubeProxyChain('KUBE-SVC-', spn, 'TCP'),
    seps: svc.endpoints.map((e) => kubeProxyChain('KUBE-SEP-', spn, 'TCP', `${e.ip}:${e.port}`)),
  };
}

/** The jumps kube-proxy ensures in built-in chains (inserted first, as its EnsureRule does). */
const JUMPS = [
  { chain: 'PREROUTING', rule: '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES' },
  { chain: 'OUTPUT', rule: '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES' },
  { chain: 'POSTROUTING', rule: '-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING' },
];

function ownChains(svc: KubeProxyService): string[] {
  const { svc: svcChain, seps } = serviceChains(svc);
  return ['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ', svcChain, ...seps];
}

/** The nat-table payload for `iptables-restore --noflush` that installs the Service's rules. */
export function renderKubeProxyRestore(svc: KubeProxyService): string {
  const { svc: svcChain, seps } = serviceChains(svc);
  const spn = `${svc.namespace}/${svc.name}:${svc.portName}`;
  const match = `-m tcp -p tcp -d ${svc.clusterIP} --dport ${svc.port}`;
  const lines = ['*nat', ...ownChains(svc).map((c) => `:${c} - [0:0]`)];
  for (const j of JUMPS) lines.push(`-I ${j.chain} ${j.rule}`);
  lines.push(
    `-A KUBE-POSTROUTING -m mark ! --mark ${MARK}/${MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MARK}`,
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MARK}`,
    `-A KUBE-SERVICES -m comment --comment "${spn} cluster IP" ${match} -j ${svcChain}`,
    `-A ${svcChain} -m comment --comment "${spn} cluster IP" ${match} ! -s ${svc.clusterCIDR} -j KUBE-MARK-MASQ`,
  );
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
  lines.push('COMMIT', '');
  return lines.join('\n');
}

/** The payload for `iptables-restore --noflush` that removes exactly what renderKubeProxyRestore added. */
export function renderKubeProxyTeardown(svc: KubeProxyService): string {
  const chains = ownChains(svc);
  return ['*nat',
    ...JUMPS.map((j) => `-D ${j.chain} ${j.rule}`),
    ...chains.map((c) => `-F ${c}`),
    ...chains.map((c) => `-X ${c}`),
    'COMMIT', ''].join('\n');
}
