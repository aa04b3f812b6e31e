// UDP flows through the real operator process on a real kernel (issue 14, "UDP conntrack
// cleanup"): a DNS-like client that keeps one socket (one source port, so one conntrack and one
// IPVS connection entry) must not be blackholed to a pod that went away, nor stay stuck on the
// "no Service here" entry made before the Service had endpoints. kube-proxy's iptables mode needs
// conntrack deletions for both (its DNAT lives in the conntrack entry); with IPVS, the operator
// deletes a UDP real server at once and sets net.ipv4.vs.expire_nodest_conn=1, so the kernel
// drops the IPVS connection on the next datagram, schedules it again and rewrites the conntrack
// entry's reply tuple to the new pod (ip_vs_nfct). This test is the proof, with conntrack(8) as
// the independent oracle; the operator itself deletes no conntrack entries (README "Semantics").
// Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, clients 192.168.100.0/24.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cleanupTopology, createClient, createPod, deleteNetns, ensureNode } from '../../src/lab/topology.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { ManifestDir, OperatorProcess, service, waitFor } from '../support/operator-process.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const ADDR = '127.0.0.1:10252';
const VIP = '10.200.1.61';
const PODS = { udpa: '10.10.1.61', udpb: '10.10.1.62' } as const;
const node = {
  apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
};
const config = { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' }, spec: { minSyncPeriod: 0.2, syncPeriod: 5 } };
const dns = (name: string): object => {
  const s = service(name, VIP) as { spec: { ports: Array<Record<string, unknown>> } };
  s.spec.ports = [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 }];
  return s;
};
const udpSlice = (name: string, ips: string[]): object => ({
  apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
  metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
  addressType: 'IPv4',
  ports: [{ name: 'dns', port: 53, protocol: 'UDP' }],
  endpoints: ips.map((ip) => ({ addresses: [ip], nodeName: 'lab-node', conditions: { ready: true, serving: true, terminating: false } })),
});

const children: ChildProcess[] = [];
let dir: ManifestDir | undefined;
let op: OperatorProcess | undefined;

/** A UDP echo in a pod's netns answering each query `<seq>` with `<pod> <seq>`. */
function udpEcho(pod: string): ChildProcess {
  const c = spawn('ip', ['netns', 'exec', pod, process.execPath, '-e',
    `const s=require('dgram').createSocket('udp4');s.on('message',(m,r)=>s.send(${JSON.stringify(pod)}+' '+m,r.port,r.address));s.bind(53)`], { stdio: 'ignore' });
  children.push(c);
  return c;
}

interface Answer { pod: string; seq: number }

/**
 * A DNS-like client in the client netns: ONE socket on a fixed source port, query `<seq>` every
 * 100 ms. `answers()` is what came back so far, in order; `sent()` how many queries went out.
 */
function udpClient(sport: number): { answers(): Answer[]; pods(): string[]; sent(): number; stop(): Promise<void> } {
  const c = spawn('ip', ['netns', 'exec', 'udpclient', process.execPath, '-e', `
const s=require('dgram').createSocket('udp4');let n=0;
s.on('message',(m)=>process.stdout.write(String(m)+'\\n'));
s.bind(${sport},()=>setInterval(()=>{s.send(String(n++),53,${JSON.stringify(VIP)});process.stderr.write('.')},100));`], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(c);
  let out = '';
  let sent = 0;
  c.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  c.stderr!.setEncoding('utf8').on('data', (d: string) => { sent += d.length; });
  const answers = (): Answer[] => out.split('\n').filter(Boolean).map((l) => ({ pod: l.split(' ')[0]!, seq: Number(l.split(' ')[1]) }));
  return {
    answers,
    pods: () => answers().map((a) => a.pod),
    sent: () => sent,
    stop: () => new Promise<void>((r) => { c.once('exit', () => r()); c.kill('SIGTERM'); }),
  };
}

const conntrack = (): string => execFileSync('conntrack', ['-L', '-p', 'udp', '--orig-dst', VIP], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  await ensureNode();
  for (const [name, ip] of Object.entries(PODS)) {
    await createPod({ name, ip });
    udpEcho(name);
  }
  await createClient({ name: 'udpclient', ip: '192.168.100.61' });
  dir = new ManifestDir();
  dir.write('config', config, node);
  op = new OperatorProcess(dir.args, ADDR);
  await op.start();
  expect(execFileSync('sysctl', ['-n', 'net.ipv4.vs.expire_nodest_conn'], { encoding: 'utf8' }).trim()).toBe('1');
}, 180_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await op?.stop();
  execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup']);
  dir?.dispose();
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 60_000);

describe('a UDP flow on one source port', () => {
  it('gets every answer from the first endpoint on, its first queries dropped by the empty virtual server without a conntrack entry', async () => {
    // The Service exists with no endpoints: the operator programs its virtual server empty (as
    // kube-proxy does), and IPVS drops the queries before conntrack confirms an entry for them:
    // no entry without the NAT is left to go stale (kube-proxy's iptables mode must delete one).
    dir!.write('dns', dns('dns'), udpSlice('dns', []));
    await op!.nextSync();
    const client = udpClient(40001);
    await waitFor('queries sent', () => client.sent() >= 5, 10_000);
    expect(client.answers()).toEqual([]);
    expect(ipvsadmLines()).toContain(`UDP ${VIP}:53 rr -> `);
    expect(conntrack()).not.toMatch(/sport=40001 /);
    // The first endpoint: the same socket's next queries are answered by it.
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpa]));
    await waitFor('the virtual server', () => ipvsadmLines().includes(`UDP ${VIP}:53 rr -> ${PODS.udpa}:53 w=1`), 30_000);
    await waitFor('answers from udpa', () => client.answers().length >= 5, 15_000);
    expect(new Set(client.pods())).toEqual(new Set(['udpa']));
    // From its first answer on, every query of the flow is answered.
    const first = client.answers()[0]!.seq;
    const last = client.answers().at(-1)!.seq;
    expect(client.answers().map((a) => a.seq)).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i));
    await client.stop();
  }, 120_000);

  it('moves to the remaining pod on the next datagram when its pod goes away (no blackhole, conntrack rewritten)', async () => {
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpa]));
    const client = udpClient(40002);
    await waitFor('answers from udpa', () => client.answers().length >= 5, 15_000);
    expect(conntrack()).toMatch(new RegExp(`sport=40002 dport=53 src=${PODS.udpa.replace(/\./g, '\\.')} `));
    // udpa is replaced by udpb in the slice, and its netns (its IP) goes away, as a deleted pod's does.
    // The change counts from the write: the operator may program it (and the flow move) before
    // this test's next look at ipvsadm, which on a loaded machine comes several queries later.
    const seqAtChange = client.sent();
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpb]));
    await waitFor('the real server replaced', () => ipvsadmLines().includes(`UDP ${VIP}:53 rr -> ${PODS.udpb}:53 w=1`), 30_000);
    await deleteNetns('udpa');
    await waitFor('answers from udpb', () => client.pods().filter((p) => p === 'udpb').length >= 10, 15_000);
    const answers = client.answers();
    const firstB = answers.findIndex((a) => a.pod === 'udpb');
    // After the move, every answer is udpb's: the flow never went back to the dead pod.
    expect(answers.slice(firstB).every((a) => a.pod === 'udpb')).toBe(true);
    // Every query before the change was answered, every query after the move too: a query can
    // be lost only while the change was being programmed (one in flight to udpa as it went).
    const got = new Set(answers.map((a) => a.seq));
    const lost = Array.from({ length: answers.at(-1)!.seq - answers[0]!.seq + 1 }, (_, i) => answers[0]!.seq + i).filter((s) => !got.has(s));
    console.log(`UDP flow moved from udpa to udpb: ${answers.length} answers, lost queries ${JSON.stringify(lost)} (change at query ${seqAtChange}, first answer of udpb: ${answers[firstB]!.seq})`);
    expect(lost.every((s) => s >= seqAtChange - 1 && s < answers[firstB]!.seq)).toBe(true);
    expect(answers.slice(firstB).map((a) => a.seq)).toEqual(Array.from({ length: answers.length - firstB }, (_, i) => answers[firstB]!.seq + i));
    // The kernel rewrote the flow's conntrack entry to the new pod (same source port).
    expect(conntrack()).toMatch(new RegExp(`sport=40002 dport=53 src=${PODS.udpb.replace(/\./g, '\\.')} `));
    await client.stop();
  }, 120_000);
});
