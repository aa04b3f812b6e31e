// Balance across nodes, against the real kernel (issue 27). ipvsadm is the oracle.
// Node-seeded order: four network namespaces play four nodes, each with its own IPVS table that the
// operator's code (test/support/program-node.ts) programs under that node's name; backends are
// local addresses 10.10.1.21-23 on a dummy in each, VIPs 10.200.1.41-44 (rr and sed, sorted and
// node-seeded). Connections from each node show which backend each node picks first: with
// `endpoint-order: sorted` all the same (the herd), node-seeded spread. Slow start: the operator process in the root netns (pods
// 10.10.1.31-33, VIP 10.200.1.50, client 192.168.100.30), weights read back over time.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { Agent } from 'node:http';
import type { Socket } from 'node:net';
import { cleanupTopology, createClient, createPod, deleteNetns, ensureNode, freshNetns, ipBatch, netnsExec } from '../../lab/topology.js';
import { preferenceOrder } from '../../src/balance/order.js';
import { getPod } from '../support/http.js';
import { ipvsadm } from '../support/ipvsadm.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const NODES = ['node-a', 'node-b', 'node-c', 'node-d'];
const BACKENDS = ['10.10.1.21', '10.10.1.22', '10.10.1.23'];
/** One Service per scheduler and order, each on its own VIP. */
const CASES = [
  { name: 'rr-sorted', vip: '10.200.1.41', scheduler: 'rr', order: 'sorted' },
  { name: 'rr-seeded', vip: '10.200.1.42', scheduler: 'rr', order: 'node-seeded' },
  { name: 'sed-sorted', vip: '10.200.1.43', scheduler: 'sed', order: 'sorted' },
  { name: 'sed-seeded', vip: '10.200.1.44', scheduler: 'sed', order: 'node-seeded' },
] as const;
const nsOf = (node: string) => `bal-${node.slice(-1)}`;
const servers: ChildProcess[] = [];

const SERVER_JS = "const s=require('net').createServer((c)=>c.end(c.localAddress+'\\n'));s.listen(8080,'0.0.0.0',()=>console.log('listening'))";
/**
 * Two connections to each VIP given as arguments, one after the other; prints a line per
 * connection: the VIP, the backend that answered and the client's port.
 */
const CLIENT_JS = "const net=require('net');const one=(vip)=>new Promise((ok,no)=>{const c=net.connect(80,vip);let d='';"
  + "c.on('data',(x)=>{d+=x});c.on('end',()=>ok(vip+' '+d.trim()+' '+c.localPort));c.on('error',no)});"
  + "setTimeout(()=>{console.error('timeout');process.exit(2)},60000);"
  + "(async()=>{for(const vip of process.argv.slice(1)){console.log(await one(vip));console.log(await one(vip))}process.exit(0)})()"
  + ".catch((e)=>{console.error(e.message);process.exit(1)})";

/** Starts the answering server in `ns` (every backend address, port 8080); resolves once it listens. */
function startServer(ns: string): Promise<void> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', SERVER_JS], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { if (d.includes('listening')) resolve(); });
    child.once('exit', (code) => reject(new Error(`server in ${ns} exited with ${code}`)));
  });
}

async function inNs(ns: string, cmd: string[]): Promise<string> {
  const r = await netnsExec(ns, cmd);
  if (r.code !== 0) throw new Error(`${cmd.join(' ')} in ${ns}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** What one node did for one Service: the order it added the backends, and its first two picks. */
interface Picks { added: string[]; first: string; second: string }

/**
 * Programs `node`'s fresh table with every case, then opens two connections one after the other
 * to each VIP: the first and second picks (rr walks the kernel's list from its head). ipvsadm -L
 * -n cannot show that list (Debian's ipvsadm prints real servers sorted by address), so the
 * oracle is the traffic, checked against the kernel's connection table (`ipvsadm -L -n -c`).
 */
async function picks(node: string): Promise<Record<string, Picks>> {
  const ns = nsOf(node);
  const ops = await inNs(ns, [process.execPath, 'dist/test/support/program-node.js', node, BACKENDS.join(','),
    ...CASES.map((c) => `${c.name}:${c.vip}:${c.order}:${c.scheduler}`)]);
  const answers = (await inNs(ns, [process.execPath, '-e', CLIENT_JS, ...CASES.map((c) => c.vip)])).trim().split('\n').map((l) => l.split(' '));
  const conns = await inNs(ns, ['ipvsadm', '-L', '-n', '-c']);
  const out: Record<string, Picks> = {};
  for (const c of CASES) {
    const added = [...ops.matchAll(new RegExp(`add-dest TCP ${c.vip}:80 -> (\\S+):8080`, 'g'))].map((m) => m[1]!);
    expect([...added].sort()).toEqual(BACKENDS);
    const mine = answers.filter(([vip]) => vip === c.vip);
    expect(mine).toHaveLength(2);
    for (const [vip, backend, port] of mine) {
      // The kernel's connection table (closed connections stay in TIME_WAIT) sent that client port there.
      expect(new RegExp(`:${port}\\s+${vip!.replace(/\./g, '\\.')}:80\\s+(\\S+):8080`).exec(conns)?.[1]).toBe(backend);
    }
    out[c.name] = { added, first: mine[0]![1]!, second: mine[1]![1]! };
    process.stdout.write(`${node} ${c.name}: added ${added.join(' ')}; first connection -> ${out[c.name]!.first}, second -> ${out[c.name]!.second}\n`);
  }
  return out;
}

describe('node-seeded order, one IPVS table per node', () => {
  beforeAll(async () => {
    execFileSync('modprobe', ['ip_vs']);
    for (const node of NODES) {
      const ns = nsOf(node);
      await freshNetns(ns);
      await ipBatch(['link add bk0 type dummy', ...[...BACKENDS, ...CASES.map((c) => c.vip)].map((a) => `addr add ${a}/32 dev bk0`), 'link set bk0 up'], ns);
      await startServer(ns);
    }
  }, 300_000);

  afterAll(async () => {
    for (const s of servers) s.kill();
    for (const node of NODES) await deleteNetns(nsOf(node));
  }, 120_000);

  it('sorted: every node sends its first connection to the same backend; node-seeded: they spread', async () => {
    const herd: Record<string, string> = {};
    const seeded: Record<string, string> = {};
    for (const node of NODES) {
      const p = await picks(node);
      const pref = (name: string) => preferenceOrder(BACKENDS, node, `default/${name}/http/IPv4`);
      // Sorted: the kernel puts each added real server at the head of its list; rr starts there.
      expect(p['rr-sorted']!.added).toEqual(BACKENDS);
      expect([p['rr-sorted']!.first, p['rr-sorted']!.second]).toEqual([BACKENDS[2], BACKENDS[1]]);
      herd[node] = p['rr-sorted']!.first;
      // Node-seeded: added in the reverse of the node's preference order, picked in that order.
      expect(p['rr-seeded']!.added).toEqual([...pref('rr-seeded')].reverse());
      expect([p['rr-seeded']!.first, p['rr-seeded']!.second]).toEqual(pref('rr-seeded').slice(0, 2));
      seeded[node] = p['rr-seeded']!.first;
      // sed counts active connections only: a closed one leaves every server tied at zero, and the
      // tie goes to the head of the list again (the 240/240 with one client per node).
      expect([p['sed-sorted']!.first, p['sed-sorted']!.second]).toEqual([BACKENDS[2], BACKENDS[2]]);
      const sedFirst = pref('sed-seeded')[0];
      expect([p['sed-seeded']!.first, p['sed-seeded']!.second]).toEqual([sedFirst, sedFirst]);
    }
    process.stdout.write(`rr first choice per node, sorted: ${JSON.stringify(herd)}\nrr first choice per node, node-seeded: ${JSON.stringify(seeded)}\n`);
    expect(new Set(Object.values(herd)).size).toBe(1);
    expect(new Set(Object.values(seeded)).size).toBeGreaterThan(1);
  }, 600_000);
});

const PODS = ['10.10.1.31', '10.10.1.32', '10.10.1.33'];
const SS_VIP = '10.200.1.50';


/** The weight ipvsadm shows for `pod` under the slow-start VIP, undefined when not listed. */
function weightOf(pod: string): number | undefined {
  const m = new RegExp(`${pod.replace(/\./g, '\\.')}:80\\s+\\S+\\s+(\\d+)`).exec(ipvsadm('-L', '-n', '-t', `${SS_VIP}:80`));
  return m ? Number(m[1]) : undefined;
}

describe('slow start through the operator', () => {
  let dir: ManifestDir;
  let op: OperatorProcess | undefined;

  beforeAll(async () => {
    execFileSync('modprobe', ['ip_vs']);
    execFileSync('ipvsadm', ['-C']);
    await ensureNode();
    await Promise.all(PODS.map((ip, i) => createPod({ name: `ss${i + 1}`, ip })));
    await createClient({ name: 'ssclient', ip: '192.168.100.30' });
  }, 180_000);

  afterAll(async () => {
    await op?.stop();
    await cleanupNode();
    dir?.dispose();
    execFileSync('ipvsadm', ['-C']);
    await cleanupTopology();
  }, 120_000);

  it('a new endpoint ramps 1 -> 100 through SET_DEST and keeps its established connection', async () => {
    dir = new ManifestDir();
    dir.write('config', { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
      spec: { minSyncPeriod: 0.2, syncPeriod: 5 } }, { apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] } });
    const annotations = { 'ipvs-operator.io/scheduler': 'wlc', 'ipvs-operator.io/slow-start': '10s' };
    dir.write('ss', service('ss', SS_VIP, annotations), slice('ss', PODS.slice(0, 2)));
    op = new OperatorProcess(dir.args);
    await op.start();
    // Established at first sight: full weight at once (RAMP_RESOLUTION x the plugin's 1).
    await waitFor('two real servers at weight 100', () => weightOf(PODS[0]!) === 100 && weightOf(PODS[1]!) === 100, 60_000);

    dir.write('ss', service('ss', SS_VIP, annotations), slice('ss', PODS));
    const firstWeight = await waitFor('the new real server', () => weightOf(PODS[2]!), 60_000);
    // wlc at zero connections keeps the head of the list, the real server added last: the new one.
    const agents: Agent[] = [];
    let held: { agent: Agent; socket: Socket } | undefined;
    for (let i = 0; i < 6 && !held; i++) {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      agents.push(agent);
      const r = await getPod(`http://${SS_VIP}/`, agent, 10_000);
      if (r.pod === 'ss3') held = { agent, socket: r.socket };
    }
    expect(held).toBeDefined();
    const seen = [firstWeight];
    await waitFor('the ramp to end at 100', () => {
      const w = weightOf(PODS[2]!)!;
      if (w !== seen[seen.length - 1]) seen.push(w);
      return w === 100;
    }, 120_000, 250);
    process.stdout.write(`slow start 10s: weights of the new real server as read back: ${seen.join(' ')}\n`);
    expect(firstWeight).toBeLessThan(20);
    expect(seen.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
    // The connection opened while the weight was low is the same socket, still on ss3, after every SET_DEST.
    const again = await getPod(`http://${SS_VIP}/`, held!.agent, 10_000);
    expect(again.socket).toBe(held!.socket);
    expect(again.pod).toBe('ss3');
    expect([weightOf(PODS[0]!), weightOf(PODS[1]!)]).toEqual([100, 100]);
    expect(op.logs.some((l) => l.reason === 'SlowStartInapplicable' || l.reason === 'InvalidSlowStart')).toBe(false);
    for (const a of agents) a.destroy();
  }, 600_000);
});
