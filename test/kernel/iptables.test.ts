// The iptables + ipset path against the real kernel in the lab VM, judged by real traffic: the
// backend "pods" answer {"pod","peer"}, so the peer tells whether a packet was masqueraded.
// Addressing (lab/topology.ts): node = the guest's root netns, its Node address 192.168.100.1
// (the clients' gateway on lab-node0), masqueraded traffic reaches pods from 10.10.1.1; pods
// 10.10.1.2-3 listen on 8080; clients 192.168.100.2 (listed in the LB's source ranges) and
// 192.168.100.3 (not); ClusterIPs 10.200.5.10-12, LB IP 10.200.5.100; cluster CIDR 10.10.0.0/16.
// Each check is made once before our rules exist where that shows the rules are what made it pass.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { type Server, createServer, request } from 'node:http';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { PluginRegistry } from '../../plugins/index.js';
import { buildDesired } from '../../src/desired/state.js';
import { type Desired } from '../../src/desired/types.js';
import { type ProxyConfig, defaultProxyConfig } from '../../src/config/types.js';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { IptablesRestore } from '../../src/iptables/restore.js';
import type { IpvsOp } from '../../src/model/ipvs.js';
import { addVip, cleanupTopology, createClient, createPod, ensureNode, netnsExec, runLoad } from '../../lab/topology.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');
jest.setTimeout(240_000);

const NODE_IP = '192.168.100.1';
const config: ProxyConfig = { ...defaultProxyConfig, clusterCIDRs: ['10.10.0.0/16'] };
const registry = new PluginRegistry();
const node: V1Node = { metadata: { name: 'node-a' }, status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] } };

function service(name: string, clusterIP: string, mutate: (s: V1Service) => void = () => {}): V1Service {
  const s: V1Service = {
    metadata: { namespace: 'lab', name, resourceVersion: '1' },
    spec: { type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], selector: { app: name }, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  };
  mutate(s);
  return s;
}
function slice(svc: string, ip: string): V1EndpointSlice {
  return {
    metadata: { namespace: 'lab', name: `${svc}-a`, labels: { 'kubernetes.io/service-name': svc }, resourceVersion: '1' },
    addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: [{ addresses: [ip], nodeName: 'node-a', conditions: { ready: true } }],
  };
}
const nodePort = (port: number, local = false) => (s: V1Service) => {
  s.spec!.type = 'NodePort'; s.spec!.ports![0]!.nodePort = port;
  if (local) s.spec!.externalTrafficPolicy = 'Local';
};

const services = [
  service('np', '10.200.5.10', nodePort(30080)),
  service('np-local', '10.200.5.11', nodePort(30081, true)),
  service('lb', '10.200.5.12', (s) => {
    nodePort(30082)(s); s.spec!.type = 'LoadBalancer'; s.spec!.loadBalancerSourceRanges = ['192.168.100.2/32'];
    s.status = { loadBalancer: { ingress: [{ ip: '10.200.5.100' }] } };
  }),
];
const slices = [slice('np', '10.10.1.2'), slice('np-local', '10.10.1.3'), slice('lb', '10.10.1.2')];

const build = (svcs: V1Service[], eps: V1EndpointSlice[] = []): Desired =>
  buildDesired({ services: svcs, endpointSlices: eps, node, nodeName: 'node-a' }, config, registry);

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/**
 * One GET from netns `ns` with curl, bounded at 2 s in total (connect included: a dropped SYN would
 * otherwise retry for ~2 minutes); curl's exit code: 0 answered, 28 timed out, 7 refused.
 */
async function curlFrom(ns: string, url: string): Promise<number> {
  return (await netnsExec(ns, ['curl', '-s', '-o', '/dev/null', '--max-time', '2', url])).code;
}
const ours = (text: string) => text.split('\n').filter((l) => l.includes('IPVSOP')).join('\n');
/** Rule lines (ours: in our chains or jumping to them) in an iptables-save dump. */
const ruleCount = (text: string) => text.split('\n').filter((l) => l.startsWith('-A ') && l.includes('IPVSOP-')).length;

/** One HTTP GET from the root netns (the host itself); resolves with the body or the error code. */
function hostGet(url: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request(url, { timeout: 3000 }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
    req.end();
  });
}

let ipvs: NetlinkIpvs;
let hostServer: Server;
const ipt = new IptablesRestore();
const desired = build(services, slices);

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  // kube-proxy sets this (the operator does too): without it IPVS connections are untracked and
  // nat POSTROUTING cannot masquerade them.
  writeFileSync('/proc/sys/net/ipv4/vs/conntrack', '1');
  ipvs = await NetlinkIpvs.open();
  await ipvs.flush();
  await ensureNode();
  await addVip(...[...desired.vips]);
  await Promise.all([createPod({ name: 'pod1', ip: '10.10.1.2', port: 8080 }), createPod({ name: 'pod2', ip: '10.10.1.3', port: 8080 })]);
  await createClient({ name: 'c-allowed', ip: '192.168.100.2' });
  await createClient({ name: 'c-other', ip: '192.168.100.3' });
  await ipvs.apply([...desired.table.values()].flatMap((d) => [
    { kind: 'add-service', vs: d.vs } as IpvsOp, ...d.dests.map((rs) => ({ kind: 'add-dest', vs: d.vs, rs }) as IpvsOp)]));
  // A host service on every address, port 9999: VIPs must not expose it.
  hostServer = createServer((req, res) => res.end(JSON.stringify({ pod: 'host', peer: req.socket.remoteAddress })));
  await new Promise<void>((r) => hostServer.listen(9999, '0.0.0.0', r));
  // Someone else's chain, rule and set, made with the plain tools.
  sh('iptables', '-N', 'FOREIGN-CHAIN');
  sh('iptables', '-A', 'FOREIGN-CHAIN', '-s', '10.99.0.0/16', '-j', 'RETURN');
  sh('iptables', '-A', 'INPUT', '-j', 'FOREIGN-CHAIN');
  sh('iptables', '-t', 'nat', '-A', 'POSTROUTING', '-s', '10.98.0.0/16', '-j', 'MASQUERADE');
  sh('ipset', 'create', 'FOREIGN-SET', 'hash:ip');
  sh('ipset', 'add', 'FOREIGN-SET', '10.99.0.1');
});

afterAll(async () => {
  await ipt.cleanup().catch(() => undefined);
  hostServer?.close();
  await ipvs?.flush();
  ipvs?.close();
  await cleanupTopology();
  for (const cmd of [['iptables', '-D', 'INPUT', '-j', 'FOREIGN-CHAIN'], ['iptables', '-F', 'FOREIGN-CHAIN'], ['iptables', '-X', 'FOREIGN-CHAIN'],
    ['iptables', '-t', 'nat', '-D', 'POSTROUTING', '-s', '10.98.0.0/16', '-j', 'MASQUERADE'], ['ipset', 'destroy', 'FOREIGN-SET']]) {
    try { sh(cmd[0]!, ...cmd.slice(1)); } catch { /* already gone */ }
  }
});

function expectForeignIntact(): void {
  const save = sh('iptables-save');
  expect(save).toContain(':FOREIGN-CHAIN - [');
  expect(save).toContain('-A FOREIGN-CHAIN -s 10.99.0.0/16 -j RETURN\n');
  expect(save).toContain('-A INPUT -j FOREIGN-CHAIN\n');
  expect(save).toContain('-A POSTROUTING -s 10.98.0.0/16 -j MASQUERADE\n');
  expect(sh('ipset', 'list', 'FOREIGN-SET')).toMatch(/^10\.99\.0\.1$/m);
}

describe('iptables path in the lab VM', () => {
  it('before our rules: NodePort unmasqueraded, hairpin broken, other ports on a VIP open', async () => {
    const np = await runLoad({ client: 'c-allowed', url: `http://${NODE_IP}:30080/`, count: 2 });
    expect(np.byPeer).toEqual({ '192.168.100.2': 2 });
    expect(await curlFrom('pod1', 'http://10.200.5.10/')).not.toBe(0);
    expect(JSON.parse(await hostGet('http://10.200.5.10:9999/')).pod).toBe('host');
  });

  it('syncs (backend detected), and the hook jumps appear once', async () => {
    const t0 = performance.now();
    await ipt.sync(desired, config);
    console.log(`BENCH iptables sync 3 Services ${(performance.now() - t0).toFixed(0)} ms (backend ${(await ipt.backend()).mode})`);
    await ipt.sync(desired, config);
    const save = sh('iptables-save');
    expect(save.split('\n').filter((l) => l.startsWith('-A PREROUTING') && l.includes('IPVSOP-SERVICES'))).toHaveLength(1);
    expect(save.split('\n').filter((l) => l.startsWith('-A INPUT') && l.includes('IPVSOP-INPUT'))).toHaveLength(1);
    expect(sh('ip6tables-save')).toContain(':IPVSOP-SERVICES - [');
    expect(sh('ipset', 'list', 'IPVSOP-NP-TCP')).toMatch(/^30080$/m);
    expectForeignIntact();
  });

  it('an external client to a NodePort on the node IP: masqueraded (the backend sees the node) and answered', async () => {
    const r = await runLoad({ client: 'c-allowed', url: `http://${NODE_IP}:30080/`, count: 10 });
    expect(r).toMatchObject({ ok: 10, byPod: { pod1: 10 }, byPeer: { '10.10.1.1': 10 } });
  });

  it('externalTrafficPolicy Local: the backend sees the real client address', async () => {
    const r = await runLoad({ client: 'c-allowed', url: `http://${NODE_IP}:30081/`, count: 10 });
    expect(r).toMatchObject({ ok: 10, byPod: { pod2: 10 }, byPeer: { '192.168.100.2': 10 } });
  });

  it('hairpin: a pod reaching its own Service lands on itself, masqueraded', async () => {
    const r = await runLoad({ client: 'pod1', url: 'http://10.200.5.10/', count: 5 });
    expect(r).toMatchObject({ ok: 5, byPod: { pod1: 5 }, byPeer: { '10.10.1.1': 5 } });
  });

  it('loadBalancerSourceRanges: the listed client reaches the LB IP, another is dropped', async () => {
    const allowed = await runLoad({ client: 'c-allowed', url: 'http://10.200.5.100/', count: 5 });
    expect(allowed).toMatchObject({ ok: 5, byPod: { pod1: 5 }, byPeer: { '10.10.1.1': 5 } });
    expect(await curlFrom('c-other', 'http://10.200.5.100/')).toBe(28); // dropped: no answer at all
    // ...while that client still reaches the same Service through its NodePort.
    expect((await runLoad({ client: 'c-other', url: `http://${NODE_IP}:30082/`, count: 2 })).ok).toBe(2);
  });

  it('ClusterIP from the host works; a non-service port on a ClusterIP is refused, on the node IP it is not', async () => {
    const body = JSON.parse(await hostGet('http://10.200.5.10/')) as { pod: string; peer: string };
    expect(body.pod).toBe('pod1');
    console.log(`host -> ClusterIP: pod1 saw peer ${body.peer}`);
    expect(await hostGet('http://10.200.5.10:9999/')).toBe('error ECONNREFUSED');
    expect(await curlFrom('c-allowed', 'http://10.200.5.10:9999/')).toBe(7); // rejected: refused at once
    expect((await runLoad({ client: 'c-allowed', url: `http://${NODE_IP}:9999/`, count: 1 })).byPod).toEqual({ host: 1 });
  });

  it('5000 NodePort Services: the same rule count as 1, only the sets grow', async () => {
    const one = build([service('s0', '10.200.9.0', nodePort(31000))]);
    await ipt.sync(one, config);
    const rules1 = ruleCount(sh('iptables-save'));
    const many = build(Array.from({ length: 5000 }, (_, i) => service(`s${i}`, `10.200.${9 + (i >> 8)}.${i & 0xff}`, nodePort(31000 + i))));
    let t0 = performance.now();
    await ipt.sync(many, config);
    const first = performance.now() - t0;
    t0 = performance.now();
    await ipt.sync(many, config);
    const again = performance.now() - t0;
    const rules5000 = ruleCount(sh('iptables-save'));
    const entries = (set: string) => Number(/Number of entries: (\d+)/.exec(sh('ipset', 'list', '-t', set))?.[1]);
    console.log(`BENCH iptables 5000 NodePort Services: sync ${first.toFixed(0)} ms (from 1), re-sync ${again.toFixed(0)} ms; `
      + `rules ${rules1} (1 Service) vs ${rules5000} (5000); IPVSOP-NP-TCP ${entries('IPVSOP-NP-TCP')} entries, IPVSOP-CLUSTER-IP ${entries('IPVSOP-CLUSTER-IP')}`);
    expect(rules5000).toBe(rules1);
    expect(entries('IPVSOP-NP-TCP')).toBe(5000);
    expect(entries('IPVSOP-CLUSTER-IP')).toBe(5000);
    expect(entries('IPVSOP-VIPS')).toBe(5000);
    expectForeignIntact();
    await ipt.sync(desired, config);
  });

  it('cleanup removes every chain, jump and set of ours and nothing else', async () => {
    await ipt.cleanup();
    expect(ours(sh('iptables-save'))).toBe('');
    expect(ours(sh('ip6tables-save'))).toBe('');
    expect(ours(sh('ipset', 'list', '-n'))).toBe('');
    expectForeignIntact();
    await ipt.cleanup();
  });

  it('the legacy backend, forced, carries the same NodePort masquerade', async () => {
    if (!existsSync('/usr/sbin/iptables-legacy')) return;
    const legacy = new IptablesRestore({ backend: 'legacy' });
    await legacy.sync(desired, config);
    try {
      expect(sh('iptables-legacy-save')).toContain(':IPVSOP-SERVICES - [');
      const r = await runLoad({ client: 'c-allowed', url: `http://${NODE_IP}:30080/`, count: 4 });
      expect(r).toMatchObject({ ok: 4, byPeer: { '10.10.1.1': 4 } });
    } finally {
      await legacy.cleanup();
    }
    expect(ours(sh('iptables-legacy-save'))).toBe('');
    expectForeignIntact();
  });
});
