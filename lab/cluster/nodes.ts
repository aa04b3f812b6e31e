// The lab cluster's network plan, pure: node and pod names and addresses, and the `ip -batch`
// lines that build them inside the lab VM (cluster.ts runs them). Shaped like the study notes'
// kind lab (`kind create cluster --name myk8s`, podSubnet 10.10.0.0/16, serviceSubnet
// 10.200.1.0/24):
//   "docker network"  bridge `kind` in the VM's root netns: 172.18.0.1/16 and
//                     fc00:f853:ccd:e793::1/64 (kind's own IPv6 network), like docker's gateway;
//   nodes             netns myk8s-control-plane, myk8s-worker, myk8s-worker2, ... each with `eth0`
//                     on the bridge (veth `veth-n<i>` in the root ns): 172.18.0.<i+2>/16 and
//                     fc00:f853:ccd:e793::<i+2>/64, default route via the bridge, a pod CIDR
//                     10.10.<i>.0/24 + fd00:10:10:<i>::/64 and a route to every other node's pod
//                     CIDR via that node's bridge address (kindnet's routes);
//   pods              netns `<pod name>` behind their node, ptp-style as kindnet wires them: veth
//                     `veth<8 hex>` in the node with the gateway 10.10.<i>.1/32 and fe80::1, route
//                     <pod ip>/32 (and /128) to it; the pod's `eth0` has <pod ip>/32 and
//                     fd00:10:10:<i>::<k>/128, default routes via 10.10.<i>.1 and fe80::1;
//   external client   netns `external` on the bridge, 172.18.0.100/16 and ::100 (the notes' host),
//                     no route to pods or Services: it reaches NodePorts on node addresses, and
//                     LoadBalancer ingress IPs (LB_POOL, 172.18.255.200/29, as MetalLB's kind guide
//                     takes them from the docker network) through the control plane node, the
//                     "cloud's" route to the pool.
// pure: no I/O.
import { createHash } from 'node:crypto';

export const CLUSTER_NAME = 'myk8s';
export const BRIDGE = 'kind';
export const BRIDGE_V4 = '172.18.0.1';
export const BRIDGE_V6 = 'fc00:f853:ccd:e793::1';
export const NODE_PREFIX_V4 = 16;
export const NODE_PREFIX_V6 = 64;
export const POD_CIDR = '10.10.0.0/16';
export const POD_CIDR_V6 = 'fd00:10:10::/48';
export const SERVICE_CIDR = '10.200.1.0/24';
export const EXTERNAL = { name: 'external', ipv4: '172.18.0.100', ipv6: 'fc00:f853:ccd:e793::100' } as const;
/** Most nodes the addressing allows (pod CIDR index and bridge address must stay below 100). */
export const MAX_NODES = 90;

/** A node of the plan. */
export interface NodePlan {
  /** Index: 0 is the control plane. */
  index: number;
  /** Kubernetes node name, also its netns name. */
  name: string;
  role: 'control-plane' | 'worker';
  ipv4: string;
  ipv6: string;
  podCIDR: string;
  podCIDRv6: string;
  /** The pods' gateway on this node. */
  podGateway: string;
  /** Root-ns end of the node's veth on the bridge. */
  bridgePort: string;
}

/** A pod's wiring on its node. */
export interface PodPlan {
  name: string;
  node: string;
  ipv4: string;
  ipv6: string;
  /** Node-side veth. */
  hostVeth: string;
}

/** Node names as kind names them: <cluster>-control-plane, <cluster>-worker, <cluster>-worker2, ... */
export function nodeName(index: number, cluster = CLUSTER_NAME): string {
  if (index === 0) return `${cluster}-control-plane`;
  return `${cluster}-worker${index === 1 ? '' : index}`;
}

/** The plan of `count` nodes (1 control plane + count-1 workers). */
export function planNodes(count: number): NodePlan[] {
  if (!Number.isInteger(count) || count < 1 || count > MAX_NODES) {
    throw new RangeError(`lab cluster: --nodes must be an integer from 1 to ${MAX_NODES}, got ${count}`);
  }
  return Array.from({ length: count }, (_, i) => ({
    index: i,
    name: nodeName(i),
    role: i === 0 ? 'control-plane' as const : 'worker' as const,
    ipv4: `172.18.0.${i + 2}`,
    ipv6: `fc00:f853:ccd:e793::${i + 2}`,
    podCIDR: `10.10.${i}.0/24`,
    podCIDRv6: `fd00:10:10:${i}::/64`,
    podGateway: `10.10.${i}.1`,
    bridgePort: `veth-n${i}`,
  }));
}

/** `ip -batch` lines for the root ns: the bridge and the external client's netns. */
export function bridgeLines(): string[] {
  return [
    `link add ${BRIDGE} type bridge`,
    `link set ${BRIDGE} up`,
    `addr add ${BRIDGE_V4}/${NODE_PREFIX_V4} dev ${BRIDGE}`,
    `addr add ${BRIDGE_V6}/${NODE_PREFIX_V6} dev ${BRIDGE} nodad`,
    `netns add ${EXTERNAL.name}`,
    `link add veth-ext type veth peer name eth0 netns ${EXTERNAL.name}`,
    `link set veth-ext master ${BRIDGE} up`,
  ];
}

/** `ip -batch` lines inside the external client's netns. */
export function externalLines(): string[] {
  return [
    'link set lo up',
    'link set eth0 up',
    `addr add ${EXTERNAL.ipv4}/${NODE_PREFIX_V4} dev eth0`,
    `addr add ${EXTERNAL.ipv6}/${NODE_PREFIX_V6} dev eth0 nodad`,
    `route add ${LB_POOL} via 172.18.0.2`,
  ];
}

/** LoadBalancer ingress IPs the lab's controller hands out (loadbalancer.ts), routed via the control plane (172.18.0.2). */
export const LB_POOL = '172.18.255.200/29';

/** `ip -batch` lines for the root ns that create a node's netns and plug it into the bridge. */
export function nodeRootLines(n: NodePlan): string[] {
  return [
    `netns add ${n.name}`,
    `link add ${n.bridgePort} type veth peer name eth0 netns ${n.name}`,
    `link set ${n.bridgePort} master ${BRIDGE} up`,
  ];
}

/** `ip -batch` lines inside node `n`: its bridge address, default routes, routes to the other nodes' pods. */
export function nodeLines(n: NodePlan, all: readonly NodePlan[]): string[] {
  const lines = [
    'link set lo up',
    'link set eth0 up',
    `addr add ${n.ipv4}/${NODE_PREFIX_V4} dev eth0`,
    `addr add ${n.ipv6}/${NODE_PREFIX_V6} dev eth0 nodad`,
    `route add default via ${BRIDGE_V4} dev eth0`,
    `route add ::/0 via ${BRIDGE_V6} dev eth0`,
  ];
  for (const o of all) {
    if (o.name === n.name) continue;
    lines.push(`route add ${o.podCIDR} via ${o.ipv4} dev eth0`, `route add ${o.podCIDRv6} via ${o.ipv6} dev eth0`);
  }
  return lines;
}

/**
 * The sysctls of a kube node (`sysctl -w` arguments, run in the node's netns): forwarding, loose
 * reverse-path filtering off as on kindnet nodes, kube-proxy's conntrack timeouts, and the IPVS
 * settings manifests/daemonset.yaml says the node must have (the operator cannot write /proc/sys).
 */
export const NODE_SYSCTLS: readonly string[] = [
  'net.ipv4.ip_forward=1',
  'net.ipv6.conf.all.forwarding=1',
  'net.ipv4.conf.all.rp_filter=0',
  'net.ipv4.conf.default.rp_filter=0',
  'net.ipv4.conf.eth0.rp_filter=0',
  'net.netfilter.nf_conntrack_tcp_timeout_established=86400',
  'net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600',
  'net.ipv4.vs.conntrack=1',
  'net.ipv4.vs.expire_nodest_conn=1',
  'net.ipv4.vs.expire_quiescent_template=1',
];

/** The node-side veth name of a pod (Calico/kindnet style: a hash, so any pod name fits in 15 characters). */
export function podVeth(pod: string): string {
  return `veth${createHash('sha256').update(pod).digest('hex').slice(0, 8)}`;
}

const POD_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** The k-th pod (k >= 2) on node `n`. */
export function planPod(name: string, n: NodePlan, k: number): PodPlan {
  if (!POD_NAME.test(name)) throw new Error(`lab cluster: bad pod name ${JSON.stringify(name)} (a DNS label: [a-z0-9-], at most 63)`);
  if (!Number.isInteger(k) || k < 2 || k > 254) throw new RangeError(`lab cluster: node ${n.name} has no pod address left (index ${k})`);
  return {
    name, node: n.name,
    ipv4: `10.10.${n.index}.${k}`,
    ipv6: `fd00:10:10:${n.index}::${k.toString(16)}`,
    hostVeth: podVeth(name),
  };
}

/** The lowest free pod index on a node, given the indexes in use. */
export function freePodIndex(used: ReadonlySet<number>): number {
  for (let k = 2; k <= 254; k++) if (!used.has(k)) return k;
  return 255;
}

/** `ip -batch` lines inside the node: the pod's veth (its other end goes into the pod's netns), gateway and routes. */
export function podNodeLines(p: PodPlan, n: NodePlan): string[] {
  return [
    `link add ${p.hostVeth} type veth peer name eth0 netns ${p.name}`,
    `link set ${p.hostVeth} up`,
    `addr add ${n.podGateway}/32 dev ${p.hostVeth}`,
    `addr add fe80::1/64 dev ${p.hostVeth} nodad`,
    `route add ${p.ipv4}/32 dev ${p.hostVeth}`,
    `route add ${p.ipv6}/128 dev ${p.hostVeth}`,
  ];
}

/** `ip -batch` lines inside the pod's netns. */
export function podLines(p: PodPlan, n: NodePlan): string[] {
  return [
    'link set lo up',
    'link set eth0 up',
    `addr add ${p.ipv4}/32 dev eth0`,
    `addr add ${p.ipv6}/128 dev eth0 nodad`,
    `route add ${n.podGateway}/32 dev eth0 scope link`,
    `route add default via ${n.podGateway} dev eth0`,
    'route add ::/0 via fe80::1 dev eth0',
  ];
}
