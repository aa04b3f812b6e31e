// UDP flows through the real operator process on a real kernel (issue 14, "UDP conntrack
// cleanup"): a DNS-like client that keeps one socket (one source port, so one conntrack and one
// IPVS connection entry) must not be blackholed to a pod that went away, nor stay stuck on the
// "no Service here" entry made before the Service had endpoints. kube-proxy's iptables mode needs
// conntrack deletions for both (its DNAT lives in the conntrack entry). With IPVS, the operator
// deletes a UDP real server at once and sets net.ipv4.vs.expire_nodest_conn=1, so the kernel
// would move the flow by itself, but only by DROPPING its next datagram (the flow's conntrack
// entry is confirmed: ip_vs_conn_uses_old_conntrack) on kernels before 5.9; since 5.9 IPVS itself
// expires a removed real server's connections a jiffy later and drops their conntrack entries.
// The operator also deletes, over ctnetlink, the UDP entries that still lead to removed real
// servers, as kube-proxy does (src/plan/conntrack.ts), so no kernel loses that datagram. Here,
// with conntrack(8) as the independent oracle: flows move with no datagram lost (the operator's,
// and a foreign one changed with ipvsadm, which shows the kernel's own flush), and the operator's
// ctnetlink client lists and deletes real entries exactly.
// Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, clients 192.168.100.0/24.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cleanupTopology, createClient, createPod, deleteNetns, ensureNode } from '../../lab/topology.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { NetlinkConntrack } from '../../src/conntrack/client.js';
import { isNotFound } from '../../src/netlink/errors.js';
import { ManifestDir, OperatorProcess, service, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const ADDR = '127.0.0.1:10252';
const VIP = '10.200.1.61';
/** A foreign virtual server's address, on a dummy link of the test's own (not the operator's VIP link). */
const FOREIGN_VIP = '10.200.1.161';
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

/** conntrack(8)'s lines for UDP flows to `dst`. */
const conntrackOf = (dst: string): string[] => execFileSync('conntrack', ['-L', '-p', 'udp', '--orig-dst', dst], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter(Boolean);
const esc = (ip: string) => ip.replace(/\./g, '\\.');

/**
 * A client that sends one query at a time on ONE socket (source port `sport`): `ask` sends
 * `<seq>` to ip:port and resolves with the pod that answered it, or undefined after 3 s.
 */
function steppingClient(sport: number): { ask(ip: string, port: number, seq: number): Promise<string | undefined>; stop(): Promise<void> } {
  const c = spawn('ip', ['netns', 'exec', 'udpclient', process.execPath, '-e', `
const s=require('dgram').createSocket('udp4');
s.on('message',(m)=>process.stdout.write(String(m)+'\\n'));
s.bind(${sport},()=>process.stdout.write('ready\\n'));
require('readline').createInterface({input:process.stdin}).on('line',(l)=>{const [ip,port,seq]=l.split(' ');s.send(seq,Number(port),ip)});`], { stdio: ['pipe', 'pipe', 'ignore'] });
  children.push(c);
  let out = '';
  c.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  const ready = waitFor('the client socket', () => out.includes('ready\n'), 30_000);
  const answered = (seq: number) => out.split('\n').map((l) => l.split(' ')).find((w) => w.length === 2 && w[1] === String(seq))?.[0];
  return {
    async ask(ip, port, seq) {
      await ready;
      c.stdin!.write(`${ip} ${port} ${seq}\n`);
      const t0 = Date.now();
      while (Date.now() - t0 < 3000) {
        const pod = answered(seq);
        if (pod) return pod;
        await new Promise((r) => setTimeout(r, 20));
      }
      return answered(seq);
    },
    stop: () => new Promise<void>((r) => { c.once('exit', () => r()); c.kill('SIGTERM'); }),
  };
}

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  await ensureNode();
  for (const [name, ip] of Object.entries(PODS)) {
    await createPod({ name, ip });
    udpEcho(name);
  }
  await createClient({ name: 'udpclient', ip: '192.168.100.61' });
  execFileSync('ip', ['link', 'add', 'ctforeign0', 'type', 'dummy']);
  execFileSync('ip', ['link', 'set', 'ctforeign0', 'up']);
  execFileSync('ip', ['addr', 'add', `${FOREIGN_VIP}/32`, 'dev', 'ctforeign0']);
  dir = new ManifestDir();
  dir.write('config', config, node);
  op = new OperatorProcess(dir.args, ADDR);
  await op.start();
  expect(execFileSync('sysctl', ['-n', 'net.ipv4.vs.expire_nodest_conn'], { encoding: 'utf8' }).trim()).toBe('1');
}, 180_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await op?.stop();
  await cleanupNode();
  dir?.dispose();
  execFileSync('ipvsadm', ['-C']);
  execFileSync('ip', ['link', 'del', 'ctforeign0']);
  await cleanupTopology();
}, 180_000);

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
    expect(conntrackOf(VIP).join('\n')).not.toMatch(/sport=40001 /);
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

  it('moves to the remaining pod with no datagram lost; on this kernel IPVS itself drops the stale entries of a removed real server (a foreign virtual server too)', async () => {
    const client = steppingClient(40002);
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpa]));
    await waitFor('the virtual server', () => ipvsadmLines().includes(`UDP ${VIP}:53 rr -> ${PODS.udpa}:53 w=1`), 30_000);
    // The control: a foreign virtual server on its own VIP, made with ipvsadm, the same pods.
    execFileSync('ipvsadm', ['-A', '-u', `${FOREIGN_VIP}:53`, '-s', 'rr']);
    execFileSync('ipvsadm', ['-a', '-u', `${FOREIGN_VIP}:53`, '-r', `${PODS.udpa}:53`, '-m']);
    for (let seq = 0; seq < 3; seq++) {
      expect(await client.ask(VIP, 53, seq)).toBe('udpa');
      expect(await client.ask(FOREIGN_VIP, 53, 100 + seq)).toBe('udpa');
    }
    const entry = (dst: string) => conntrackOf(dst).filter((l) => / sport=40002 /.test(l));
    expect(entry(VIP).join('\n')).toMatch(new RegExp(`src=${esc(PODS.udpa)} `));
    expect(entry(FOREIGN_VIP).join('\n')).toMatch(new RegExp(`src=${esc(PODS.udpa)} `));
    // udpa leaves the slice, and ipvsadm moves the foreign one the same way. No datagram is sent
    // meanwhile. Since Linux 5.9, deleting a real server with expire_nodest_conn=1 queues work
    // that expires its connections a jiffy later and drops their conntrack entries
    // (ip_vs_expire_nodest_conn_flush): the foreign flow's entry goes without any cleanup of
    // ours. On older kernels only the operator's ctnetlink cleanup deletes it before the next
    // datagram, which IPVS would otherwise drop (unit: test/unit/conntrack/conntrack.test.ts).
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpb]));
    execFileSync('ipvsadm', ['-a', '-u', `${FOREIGN_VIP}:53`, '-r', `${PODS.udpb}:53`, '-m']);
    execFileSync('ipvsadm', ['-d', '-u', `${FOREIGN_VIP}:53`, '-r', `${PODS.udpa}:53`]);
    await waitFor('the real server replaced', () => ipvsadmLines().includes(`UDP ${VIP}:53 rr -> ${PODS.udpb}:53 w=1`), 30_000);
    await waitFor('the stale conntrack entries gone', () => entry(VIP).length === 0 && entry(FOREIGN_VIP).length === 0, 30_000);
    await deleteNetns('udpa');
    // The next query of each flow is answered by udpb: nothing lost, on a fresh entry.
    expect(await client.ask(VIP, 53, 3)).toBe('udpb');
    expect(await client.ask(FOREIGN_VIP, 53, 103)).toBe('udpb');
    expect(entry(VIP).join('\n')).toMatch(new RegExp(`src=${esc(PODS.udpb)} `));
    for (let seq = 4; seq < 7; seq++) expect(await client.ask(VIP, 53, seq)).toBe('udpb');
    console.log(`the operator's conntrack step: ${JSON.stringify(op!.logs.filter((l) => String(l.message).includes('conntrack')))}`);
    execFileSync('ipvsadm', ['-D', '-u', `${FOREIGN_VIP}:53`]);
    await client.stop();
  }, 180_000);

  it('the operator\'s ctnetlink client lists what conntrack(8) lists and deletes exactly the entry it names; the flow goes on', async () => {
    const client = steppingClient(40004);
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpb]));
    await waitFor('the virtual server', () => ipvsadmLines().includes(`UDP ${VIP}:53 rr -> ${PODS.udpb}:53 w=1`), 30_000);
    expect(await client.ask(VIP, 53, 0)).toBe('udpb');
    const ct = new NetlinkConntrack();
    try {
      // Every UDP entry conntrack(8) shows, ours shows with the same tuples.
      const tuple = (src: string, dst: string, sport: number | string, dport: number | string) => `${src}:${sport}>${dst}:${dport}`;
      const theirs = execFileSync('conntrack', ['-L', '-p', 'udp'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter(Boolean).map((l) => {
        const kv = [...l.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!] as const);
        const at = (k: string, n: number) => kv.filter(([key]) => key === k)[n]?.[1] ?? '';
        return `${tuple(at('src', 0), at('dst', 0), at('sport', 0), at('dport', 0))} reply ${tuple(at('src', 1), at('dst', 1), at('sport', 1), at('dport', 1))}`;
      }).sort();
      const listed = (await ct.list('IPv4')).filter((f) => f.proto === 17);
      const ours = listed.map((f) => `${tuple(f.orig.src, f.orig.dst, f.orig.sport, f.orig.dport)} reply ${tuple(f.reply.src, f.reply.dst, f.reply.sport, f.reply.dport)}`).sort();
      expect(ours).toEqual(theirs);
      const mine = listed.find((f) => f.orig.sport === 40004 && f.orig.dst === VIP);
      expect(mine).toMatchObject({ family: 'IPv4', reply: { src: PODS.udpb, sport: 53 }, zone: 0 });
      expect(mine!.id).toBeGreaterThan(0);
      // Another entry's id: ENOENT, nothing deleted.
      const [wrongId] = await ct.delete([{ ...mine!, id: (mine!.id + 1) >>> 0 }]);
      expect(isNotFound(wrongId)).toBe(true);
      expect(conntrackOf(VIP).some((l) => / sport=40004 /.test(l))).toBe(true);
      // Its own id: deleted, and only it.
      const before = conntrackOf(VIP).length + conntrackOf(FOREIGN_VIP).length;
      expect(await ct.delete([mine!])).toEqual([undefined]);
      expect(conntrackOf(VIP).some((l) => / sport=40004 /.test(l))).toBe(false);
      expect(conntrackOf(VIP).length + conntrackOf(FOREIGN_VIP).length).toBe(before - 1);
      const [again] = await ct.delete([mine!]);
      expect(isNotFound(again)).toBe(true);
    } finally {
      ct.close();
    }
    // The flow's next datagram makes a fresh entry to the same pod.
    expect(await client.ask(VIP, 53, 1)).toBe('udpb');
    expect(conntrackOf(VIP).some((l) => / sport=40004 /.test(l))).toBe(true);
    await client.stop();
  }, 120_000);

  it('a Service port changed: the flows to the old port are deleted, the new port answers', async () => {
    const client = steppingClient(40003);
    dir!.write('dns', dns('dns'), udpSlice('dns', [PODS.udpb]));
    expect(await client.ask(VIP, 53, 0)).toBe('udpb');
    expect(conntrackOf(VIP).some((l) => / sport=40003 dport=53 /.test(l))).toBe(true);
    const moved = dns('dns') as { spec: { ports: Array<Record<string, unknown>> } };
    moved.spec.ports = [{ name: 'dns', port: 5353, protocol: 'UDP', targetPort: 53 }];
    dir!.write('dns', moved, udpSlice('dns', [PODS.udpb]));
    await waitFor('the new port', () => ipvsadmLines().includes(`UDP ${VIP}:5353 rr -> ${PODS.udpb}:53 w=1`), 30_000);
    await waitFor('the old port\'s flow deleted', () => !conntrackOf(VIP).some((l) => / sport=40003 dport=53 /.test(l)), 30_000);
    expect(ipvsadmLines().some((l) => l.startsWith(`UDP ${VIP}:53 `))).toBe(false);
    expect(await client.ask(VIP, 5353, 1)).toBe('udpb');
    await client.stop();
  }, 120_000);
});
