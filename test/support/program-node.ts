// Programs Services into the IPVS table of the netns it runs in, with the operator's own code
// (buildDesired -> planIpvs -> NetlinkIpvs.apply) as node NODE would: the kernel test of
// node-seeded order runs it once per "node" netns (`ip netns exec`). Prints the applied ops.
// Usage: node program-node.js NODE PODS SERVICE... where PODS is a,b,c and each SERVICE is
// NAME:VIP:ORDER:SCHEDULER (ORDER: node-seeded | sorted), port 80 -> the pods' 8080.
import { PluginRegistry } from '../../plugins/index.js';
import { buildDesired } from '../../src/desired/state.js';
import { defaultProxyConfig } from '../../src/config/types.js';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { type VirtualServerEntry, formatOp, realServerKey, virtualServerKey } from '../../src/model/ipvs.js';
import { planIpvs } from '../../src/plan/index.js';

const [nodeName, pods, ...specs] = process.argv.slice(2);
if (!nodeName || !pods || !specs.length) throw new Error('usage: program-node.js NODE PODS NAME:VIP:ORDER:SCHEDULER...');

const services: object[] = [];
const slices: object[] = [];
for (const spec of specs) {
  const [name, vip, order, scheduler] = spec.split(':');
  if (!name || !vip || !order || !scheduler) throw new Error(`bad service ${spec}`);
  services.push({
    apiVersion: 'v1', kind: 'Service',
    metadata: { name, namespace: 'default', annotations: { 'ipvs-operator.io/endpoint-order': order, 'ipvs-operator.io/scheduler': scheduler } },
    spec: { type: 'ClusterIP', clusterIP: vip, clusterIPs: [vip], ipFamilies: ['IPv4'], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  });
  slices.push({
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: pods.split(',').map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });
}
const desired = buildDesired({ services: services as never[], endpointSlices: slices as never[], node: undefined, nodeName },
  defaultProxyConfig, new PluginRegistry());
if (desired.problems.length) throw new Error(JSON.stringify(desired.problems));

const ipvs = await NetlinkIpvs.open();
try {
  const actual = new Map<string, VirtualServerEntry>();
  for (const vs of await ipvs.listVirtualServers()) {
    actual.set(virtualServerKey(vs), { vs, dests: new Map((await ipvs.listRealServers(vs)).map((rs) => [realServerKey(rs), rs])) });
  }
  const plan = planIpvs({ desired: desired.table, actual, owns: () => true, now: Date.now(), draining: new Map(), gracePeriodMs: 0 });
  const results = await ipvs.apply(plan.ops);
  const failed = results.filter((r) => r !== undefined && r !== null);
  if (failed.length) throw new Error(`ops refused: ${JSON.stringify(failed)}`);
  for (const op of plan.ops) process.stdout.write(`${formatOp(op)}\n`);
} finally {
  ipvs.close();
}
