// The lab cluster (src/lab/cluster/) with real traffic: 1 control plane + 3 workers as network
// namespaces on one bridge, the operator on every node started from manifests/daemonset.yaml
// (NET_ADMIN + NET_RAW only, /proc/sys read-only, --source=kube against the API server), pods
// behind the nodes, the external client on the bridge. Modeled on the Kubernetes e2e "Services"
// tests and the study notes' kind lab.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { connect, createServer, type Server } from 'node:net';
import { LabCluster, apiRequest, type ApiAccess } from '../../src/lab/cluster/cluster.js';
import { BRIDGE_V4, EXTERNAL } from '../../src/lab/cluster/nodes.js';
import { runLoad } from '../../src/lab/topology.js';
import { FakeApiServer } from '../support/fake-apiserver.js';
import { waitFor } from '../support/operator-process.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const UDP_QUERY = new URL('../../src/lab/cluster/udp-query.js', import.meta.url).pathname;
let api: FakeApiServer;
let forwarder: Server;
let cluster: LabCluster;
const access: ApiAccess = { url: `http://${BRIDGE_V4}:6443` };
const WORKERS = ['myk8s-worker', 'myk8s-worker2', 'myk8s-worker3'];
const WEBPODS = ['webpod-1', 'webpod-2', 'webpod-3'];

/** A ClusterIP/NodePort Service of `app`'s pods. */
function service(name: string, clusterIP: string, o: { app?: string; nodePort?: number; protocol?: 'TCP' | 'UDP'; port?: number; targetPort?: number } = {}): object {
  const protocol = o.protocol ?? 'TCP';
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: {
      type: o.nodePort ? 'NodePort' : 'ClusterIP', clusterIP, clusterIPs: [clusterIP], ipFamilies: ['IPv4'],
      selector: { app: o.app ?? 'webpod' }, externalTrafficPolicy: o.nodePort ? 'Cluster' : undefined,
      ports: [{ name: protocol === 'UDP' ? 'dns' : 'http', port: o.port ?? 80, protocol, targetPort: o.targetPort ?? 80, ...(o.nodePort ? { nodePort: o.nodePort } : {}) }],
    },
  };
}

/** The EndpointSlice of a Service over pods (what an EndpointSlice controller writes for ready pods). */
function endpointSlice(svc: string, pods: string[], o: { protocol?: 'TCP' | 'UDP'; port?: number } = {}): object {
  const protocol = o.protocol ?? 'TCP';
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: `${svc}-lab`, namespace: 'default', labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports: [{ name: protocol === 'UDP' ? 'dns' : 'http', port: o.port ?? 80, protocol }],
    endpoints: pods.map((p) => {
      const pod = cluster.pods.get(p)!;
      return { addresses: [pod.ipv4], nodeName: pod.node, targetRef: { kind: 'Pod', namespace: 'default', name: p }, conditions: { ready: true, serving: true, terminating: false } };
    }),
  };
}

/** `ipvsadm -Ln` in a node's netns. */
async function ipvsOn(node: string): Promise<string> {
  const r = await cluster.exec(node, ['ipvsadm', '-Ln']);
  return r.stdout;
}

/** Waits until every node's IPVS table has `vip` with `n` real servers. */
async function programmedEverywhere(vip: string, n: number): Promise<void> {
  await Promise.all(cluster.nodes.map((node) => waitFor(`${vip} with ${n} real servers on ${node.name}`, async () => {
    const table = await ipvsOn(node.name);
    const block = table.split(/\n(?=TCP|UDP|SCTP)/).find((b) => b.includes(` ${vip} `));
    return block !== undefined && (block.match(/->\s+\d/g) ?? []).length === n;
  }, 60_000, 300)));
}

/** Waits until no node has `vip`. */
async function goneEverywhere(vip: string): Promise<void> {
  await Promise.all(cluster.nodes.map((node) => waitFor(`${vip} gone on ${node.name}`, async () => !(await ipvsOn(node.name)).includes(` ${vip} `), 60_000, 300)));
}

function udpQuery(from: string, host: string, port: number, count: number): Promise<{ ok: number; errors: number; byPod: Record<string, number>; byPeer: Record<string, number> }> {
  return cluster.exec(from, [process.execPath, UDP_QUERY, '--host', host, '--port', String(port), '--count', String(count)])
    .then((r) => {
      if (r.code !== 0) throw new Error(`udp-query exited ${r.code}: ${r.stderr}`);
      return JSON.parse(r.stdout) as { ok: number; errors: number; byPod: Record<string, number>; byPeer: Record<string, number> };
    });
}

const timings: Record<string, number> = {};

beforeAll(async () => {
  const t0 = Date.now();
  api = await FakeApiServer.start();
  cluster = await LabCluster.up({ nodes: 4, api: access });
  timings.network = Date.now() - t0;
  // The API server as the nodes see it: on the bridge (the fake listens on 127.0.0.1 of this netns).
  const target = new URL(api.url);
  forwarder = createServer((c) => {
    const u = connect(Number(target.port), target.hostname);
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
  await new Promise<void>((r) => forwarder.listen(6443, BRIDGE_V4, r));
  await cluster.registerNodes();
  await apiRequest(access, 'POST', '/apis/ipvs-operator.io/v1alpha1/ipvsproxyconfigs', {
    apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
    spec: { defaultScheduler: 'rr', clusterCIDRs: ['10.10.0.0/16'], minSyncPeriod: 0.2, syncPeriod: 30 },
  });
  await Promise.all([
    ...WEBPODS.map((p, i) => cluster.addPod({ name: p, node: WORKERS[i]!, labels: { app: 'webpod' } })),
    ...cluster.nodes.map((n, i) => cluster.addPod({ name: `net-pod-${i}`, node: n.name, serve: false })),
  ]);
  timings.pods = Date.now() - t0;
  api.put('services', service('webpod', '10.200.1.10'));
  api.put('endpointslices', endpointSlice('webpod', WEBPODS));
  await cluster.startOperators();
  timings.operators = Date.now() - t0;
  await programmedEverywhere('10.200.1.10:80', 3);
  timings.ready = Date.now() - t0;
  process.stderr.write(`lab cluster: network ${timings.network} ms, pods ${timings.pods} ms, operators ready ${timings.operators} ms, first Service on every node ${timings.ready} ms\n`);
}, 1_500_000);

afterAll(async () => {
  await cluster?.down();
  await new Promise((r) => (forwarder ? forwarder.close(r) : r(undefined)));
  await api?.close();
}, 300_000);

describe('lab cluster: 1 control plane + 3 workers, the operator on each from its DaemonSet', () => {
  it('runs the DaemonSet\'s container: args with $(NODE_NAME), NET_ADMIN+NET_RAW only, the node\'s own state dir', async () => {
    for (const n of cluster.nodes) {
      const l = cluster.launch(n.name);
      expect(l.argv).toEqual(['ipvs-operator', 'run', '--source=kube', `--node-name=${n.name}`, '--metrics-addr=0.0.0.0:10262', '--log-format=json', '--log-level=info']);
      // The operator's process in the node: capabilities as the securityContext says.
      const pid = (await cluster.exec(n.name, ['sh', '-c', 'ss -Hltnp "sport = :10262" | sed -n "s/.*pid=\\([0-9]*\\).*/\\1/p"'])).stdout.trim();
      expect(pid).toMatch(/^\d+$/);
      const status = (await cluster.exec(n.name, ['cat', `/proc/${pid}/status`])).stdout;
      // CAP_NET_ADMIN (12) and CAP_NET_RAW (13): 0x3000.
      expect(/CapEff:\s*(\w+)/.exec(status)?.[1]).toBe('0000000000003000');
    }
    // Each node's own IPVS table (per netns), and its own ownership record (hostPath /run/ipvs-operator).
    const tables = await Promise.all(cluster.nodes.map((n) => ipvsOn(n.name)));
    for (const t of tables) expect(t).toContain('TCP  10.200.1.10:80 rr');
  }, 300_000);

  it('ClusterIP from a pod on every node reaches every webpod, the client pod\'s IP preserved at the backend', async () => {
    for (const [i, n] of cluster.nodes.entries()) {
      const client = cluster.pods.get(`net-pod-${i}`)!;
      const r = await runLoad({ client: client.name, url: 'http://10.200.1.10/json', count: 9 });
      expect({ node: n.name, errors: r.errors, byPod: r.byPod, byPeer: r.byPeer })
        .toEqual({ node: n.name, errors: 0, byPod: { 'webpod-1': 3, 'webpod-2': 3, 'webpod-3': 3 }, byPeer: { [client.ipv4]: 9 } });
    }
  }, 300_000);

  it('NodePort on every node from the external client, source NAT to the node as kube-proxy does it', async () => {
    api.put('services', service('webpod-np', '10.200.1.20', { nodePort: 30000 }));
    api.put('endpointslices', endpointSlice('webpod-np', WEBPODS));
    await programmedEverywhere('10.200.1.20:80', 3);
    for (const n of cluster.nodes) {
      await waitFor(`NodePort on ${n.name}`, async () => (await ipvsOn(n.name)).includes(`TCP  ${n.ipv4}:30000 rr`), 30_000, 300);
      const r = await runLoad({ client: EXTERNAL.name, url: `http://${n.ipv4}:30000/json`, count: 6 });
      expect({ node: n.name, errors: r.errors, pods: Object.keys(r.byPod).sort() }).toEqual({ node: n.name, errors: 0, pods: WEBPODS });
      // Never the client's own address: masqueraded to the node (its bridge address, or its pod
      // gateway 10.10.<i>.1 for a pod on the same node).
      expect(Object.keys(r.byPeer).every((peer) => peer === n.ipv4 || peer === n.podGateway)).toBe(true);
      expect(r.byPeer[EXTERNAL.ipv4]).toBeUndefined();
    }
  }, 300_000);

  it('a Service created and deleted while another keeps serving without one failed request', async () => {
    const steady = runLoad({ client: 'net-pod-1', url: 'http://10.200.1.10/json', count: 400, concurrency: 2 });
    api.put('services', service('webpod-2', '10.200.1.11'));
    api.put('endpointslices', endpointSlice('webpod-2', WEBPODS.slice(0, 2)));
    await programmedEverywhere('10.200.1.11:80', 2);
    const during = await runLoad({ client: 'net-pod-2', url: 'http://10.200.1.11/json', count: 4 });
    expect(during).toMatchObject({ errors: 0, byPod: { 'webpod-1': 2, 'webpod-2': 2 } });
    api.remove('services', 'webpod-2', 'default');
    api.remove('endpointslices', 'webpod-2-lab', 'default');
    await goneEverywhere('10.200.1.11:80');
    const after = await runLoad({ client: 'net-pod-2', url: 'http://10.200.1.11/json', count: 2, timeoutMs: 1000 });
    expect(after.ok).toBe(0);
    const s = await steady;
    expect({ errors: s.errors, ok: s.ok, errorKinds: s.errorKinds }).toEqual({ errors: 0, ok: 400, errorKinds: {} });
  }, 300_000);

  it('UDP: a DNS-style query through a ClusterIP from a pod on every node, one answer per query', async () => {
    api.put('services', service('dns', '10.200.1.53', { protocol: 'UDP', port: 53, targetPort: 53 }));
    api.put('endpointslices', endpointSlice('dns', WEBPODS, { protocol: 'UDP', port: 53 }));
    await Promise.all(cluster.nodes.map((node) => waitFor(`UDP 10.200.1.53:53 on ${node.name}`, async () => (await ipvsOn(node.name)).includes('UDP  10.200.1.53:53 rr'), 60_000, 300)));
    for (const [i] of cluster.nodes.entries()) {
      const client = cluster.pods.get(`net-pod-${i}`)!;
      const r = await udpQuery(client.name, '10.200.1.53', 53, 6);
      expect({ client: client.name, ok: r.ok, errors: r.errors, pods: Object.keys(r.byPod).sort(), byPeer: r.byPeer })
        .toEqual({ client: client.name, ok: 6, errors: 0, pods: WEBPODS, byPeer: { [client.ipv4]: 6 } });
    }
  }, 300_000);
});
