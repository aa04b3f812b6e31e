// The operator process against the real kernel in the lab VM, fed by the files source, checked
// with ipvsadm and real traffic. Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, clients
// 192.168.100.0/24 (lab/topology.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { cleanupTopology, runLoad } from '../../lab/topology.js';
import { getPod } from '../support/http.js';
import { setUpLabNode } from '../support/lab-node.js';
import { ipvsadm, ipvsadmLines, ipvsadmTable } from '../support/ipvsadm.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const PODS = ['10.10.1.21', '10.10.1.22', '10.10.1.23'];
const config = (extra: Record<string, unknown> = {}) => ({
  apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
  spec: { minSyncPeriod: 0.2, syncPeriod: 2, gracefulTerminationSeconds: 120, ...extra },
});
const node = {
  apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
};

let dir: ManifestDir;
let op: OperatorProcess | undefined;


beforeAll(async () => {
  await setUpLabNode({ prefix: 'op', pods: PODS, client: { name: 'opclient', ip: '192.168.100.20' } });
}, 120_000);

afterEach(async () => {
  await op?.stop();
  op = undefined;
  await cleanupNode();
  dir?.dispose();
}, 180_000);

afterAll(async () => {
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 180_000);

describe('the operator on the files source', () => {
  it('creates, updates and deletes virtual servers as Services and endpoints change', async () => {
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('web', service('web', '10.200.1.30'), slice('web', PODS.slice(0, 2)));
    // A bad annotation on another Service: it stays on the default scheduler, and the operator says why.
    dir.write('bad', service('bad', '10.200.1.31', { 'ipvs-operator.io/scheduler': 'fastest' }), slice('bad', PODS.slice(0, 1)));
    op = new OperatorProcess(dir.args);
    await op.start();
    expect(ipvsadmLines()).toEqual(['TCP 10.200.1.30:80 rr -> 10.10.1.21:80 w=1, 10.10.1.22:80 w=1', 'TCP 10.200.1.31:80 rr -> 10.10.1.21:80 w=1']);
    const problem = await waitFor('a problem logged', () => op!.logs.find((l) => l.reason === 'UnknownScheduler'));
    expect(String(problem.message)).toContain('"fastest"');
    dir.remove('bad');
    await waitFor('the bad Service gone', () => ipvsadmLines().length === 1);
    const first = await runLoad({ client: 'opclient', url: 'http://10.200.1.30/', count: 10 });
    expect(first.byPod).toEqual({ op1: 5, op2: 5 });

    dir.write('web', service('web', '10.200.1.30', { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': '{"weights":{"byPod":[{"name":"op3","weight":3}]}}' }),
      { ...slice('web', PODS), endpoints: PODS.map((ip, i) => ({ addresses: [ip], nodeName: 'lab-node', conditions: { ready: true }, targetRef: { kind: 'Pod', namespace: 'default', name: `op${i + 1}` } })) });
    await waitFor('wrr with three endpoints', () => ipvsadmLines()[0] === 'TCP 10.200.1.30:80 wrr -> 10.10.1.21:80 w=1, 10.10.1.22:80 w=1, 10.10.1.23:80 w=3');
    const second = await runLoad({ client: 'opclient', url: 'http://10.200.1.30/', count: 25 });
    expect(second.byPod).toEqual({ op1: 5, op2: 5, op3: 15 });

    dir.remove('web');
    await waitFor('virtual server gone', () => ipvsadmLines().length === 0);
    // Its VIP goes in the same sync, right after the virtual servers on it.
    await waitFor('VIP unbound', () => !execFileSync('ip', ['-j', 'addr', 'show', 'dev', 'ipvs-op0'], { encoding: 'utf8' }).includes('10.200.1.30'), 10_000);
  }, 180_000);

  // The kernel swaps a scheduler with a gap in which a SYN is refused (lab.test.ts shows it with
  // ipvsadm -E alone); the operator holds new SYNs to the virtual server through its swaps
  // (src/iptables/syn-hold.ts): under load, swaps go on until at least 20 were made and our hold
  // rule dropped a SYN, and no connection is refused. The same run with the hold left out refused
  // connections (docs/semantics.md, "A scheduler changed live").
  it('changing the scheduler annotation keeps an open TCP connection alive, and refuses no new one: SYNs are held through the swap', async () => {
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('web', service('web', '10.200.1.32'), slice('web', PODS));
    op = new OperatorProcess(dir.args);
    await op.start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const before = await getPod('http://10.200.1.32/', agent);
    dir.write('web', service('web', '10.200.1.32', { 'ipvs-operator.io/scheduler': 'sed' }), slice('web', PODS));
    await waitFor('sed in the kernel', () => ipvsadmLines()[0]?.startsWith('TCP 10.200.1.32:80 sed'));
    const after = await getPod('http://10.200.1.32/', agent);
    expect(after.socket).toBe(before.socket); // the same connection, still served
    expect(after.pod).toBe(before.pod);
    agent.destroy();

    const swaps = () => op!.logs.filter((l) => l.message === 'scheduler swapped with new SYNs held').length;
    const dropped = () => Number(/^\[(\d+):\d+\] -A IPVSOP-HOLD /m
      .exec(execFileSync('iptables-save', ['-c', '-t', 'mangle'], { encoding: 'utf8' }))?.[1] ?? NaN);
    await waitFor('the swap to sed logged', () => swaps() >= 1);
    const [swapsBefore, droppedBefore] = [swaps(), dropped()];
    let going = true;
    const toggling = (async () => {
      for (let n = 0; going; n++) {
        const s = n % 2 ? 'sed' : 'lc';
        dir.write('web', service('web', '10.200.1.32', { 'ipvs-operator.io/scheduler': s }), slice('web', PODS));
        await waitFor(`swap ${n + 1} made`, () => swaps() > swapsBefore + n, 60_000, 20);
        // Swaps 1.5 s apart, as a user's never come closer: a SYN held by one is sent again after
        // 1 s (then 3 s, 7 s) and must not meet the next one's hold too (loadgen gives up at 5 s).
        await new Promise((r) => setTimeout(r, 1500));
      }
    })();
    const kinds: Record<string, number> = {};
    let [ok, sent, batches, maxMs] = [0, 0, 0, 0];
    try {
      for (; batches < 6 && (swaps() - swapsBefore < 20 || dropped() === droppedBefore); batches++) {
        const r = await runLoad({ client: 'opclient', url: 'http://10.200.1.32/', count: 300, concurrency: 4 });
        for (const [k, n] of Object.entries(r.errorKinds)) kinds[k] = (kinds[k] ?? 0) + n;
        [ok, sent, maxMs] = [ok + r.ok, sent + r.count, Math.max(maxMs, r.latencyMs.max)];
      }
    } finally {
      going = false;
      await toggling;
    }
    const held = { swaps: swaps() - swapsBefore, synsDropped: dropped() - droppedBefore };
    process.stderr.write(`held swaps: ${JSON.stringify(held)} under ${sent} requests in ${batches} batches: ` +
      `${ok} answered, errors ${JSON.stringify(kinds)}, slowest ${maxMs} ms\n`);
    expect({ errors: kinds, answered: ok }).toEqual({ errors: {}, answered: sent });
    expect(held.swaps).toBeGreaterThanOrEqual(20);
    expect(held.synsDropped).toBeGreaterThan(0);
    // The hold is released: the set is empty again, and a new connection is served at once.
    expect(execFileSync('ipset', ['list', 'IPVSOP-HOLD'], { encoding: 'utf8' })).toMatch(/Number of entries: 0/);
    expect((await runLoad({ client: 'opclient', url: 'http://10.200.1.32/', count: 10, concurrency: 1 })).ok).toBe(10);

    // The node's own connections take the local path (mangle OUTPUT, before IPVS's LOCAL_OUT hook):
    // held too. The operator is stopped first (its table and rules stay), so no sync of its own
    // deletes the member put in by hand.
    expect(await op.stop()).toBe(0);
    op = undefined;
    const attempt = (ms: number) => new Promise<string>((resolve) => {
      const sock = connect({ host: '10.200.1.32', port: 80, timeout: ms });
      sock.on('connect', () => { sock.destroy(); resolve('connected'); });
      sock.on('timeout', () => { sock.destroy(); resolve('no answer'); });
      sock.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
    const d0 = dropped();
    execFileSync('ipset', ['add', 'IPVSOP-HOLD', '10.200.1.32,tcp:80']);
    // 0.9 s: less than the SYN retransmission timeout (1 s), so the one SYN tried is the held one.
    const whileHeld = await attempt(900);
    execFileSync('ipset', ['del', 'IPVSOP-HOLD', '10.200.1.32,tcp:80']);
    expect({ whileHeld, dropped: dropped() - d0 > 0, after: await attempt(10_000) })
      .toEqual({ whileHeld: 'no answer', dropped: true, after: 'connected' });
  }, 300_000);

  it('a foreign virtual server made with ipvsadm survives periodic and full resyncs', async () => {
    ipvsadm('-A', '-t', '10.99.0.1:443', '-s', 'wlc');
    ipvsadm('-a', '-t', '10.99.0.1:443', '-r', '10.10.1.21:443', '-m', '-w', '5');
    try {
      dir = new ManifestDir();
      // The shortest periods the CRD allows (syncPeriod >= 1 s): a full resync every second.
      dir.write('config', config({ syncPeriod: 1, minSyncPeriod: 0.1 }), node);
      dir.write('web', service('web', '10.200.1.34'), slice('web', PODS));
      // IPVS ownership is what is tested: without the iptables path each sync is a few netlink
      // round trips, so 40 of them fit the time even on a busy 2-core machine under TCG.
      op = new OperatorProcess(dir.args, undefined, ['--no-iptables']);
      await op.start();
      // Periodic syncs (each verifies part of the table), then a configuration change (a full
      // re-read and resync of the whole table), then periodic syncs again.
      await waitFor('10 periodic syncs', () => op!.syncs().length >= 10, 120_000, 500);
      expect(ipvsadmLines()).toContain('TCP 10.99.0.1:443 wlc -> 10.10.1.21:443 w=5');
      const changes = () => op!.logs.filter((l) => l.message === 'configuration changed; full resync').length;
      const before = changes();
      // Counted from before the write: the full sync can land between the log line and a later look.
      const start = op.syncs().length;
      dir.write('config', config({ syncPeriod: 1, minSyncPeriod: 0.2 }), node);
      await waitFor('the configuration change', () => changes() > before, 60_000, 200);
      const after = op.syncs().length;
      await waitFor('10 more syncs', () => op!.syncs().length >= after + 10, 120_000, 500);
      expect(op.syncs().slice(start).some((s) => s.full === true)).toBe(true);
      expect(ipvsadmLines()).toContain('TCP 10.99.0.1:443 wlc -> 10.10.1.21:443 w=5');
      expect(op.syncs().every((s) => s.failed === 0)).toBe(true);
      // `cleanup` removes exactly what the operator made: its virtual server and interface, not the foreign one.
      expect(await op.stop()).toBe(0);
      const removed = execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup'], { encoding: 'utf8' });
      expect(removed).toContain('delete-service TCP 10.200.1.34:80');
      expect(ipvsadmLines()).toEqual(['TCP 10.99.0.1:443 wlc -> 10.10.1.21:443 w=5']);
      expect(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })).not.toContain('ipvs-op0');
    } finally {
      ipvsadm('-D', '-t', '10.99.0.1:443');
    }
  }, 300_000);

  it('a restart repairs in its first sync what /proc/net/ip_vs shows, and the drift check a threshold it hides', async () => {
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('web', service('web', '10.200.1.37'), slice('web', PODS));
    op = new OperatorProcess(dir.args, undefined, ['--no-iptables']);
    await op.start();
    const inStep = 'TCP 10.200.1.37:80 rr -> 10.10.1.21:80 w=1, 10.10.1.22:80 w=1, 10.10.1.23:80 w=1';
    await waitFor('the Service programmed', () => ipvsadmLines().includes(inStep));
    expect(await op.stop()).toBe(0);
    // While it is down: a weight changed and a real server added (the listing shows both), and
    // thresholds set on another real server (the listing does not show them).
    ipvsadm('-e', '-t', '10.200.1.37:80', '-r', '10.10.1.21:80', '-m', '-w', '5');
    ipvsadm('-a', '-t', '10.200.1.37:80', '-r', '10.10.1.99:80', '-m', '-w', '1');
    ipvsadm('-e', '-t', '10.200.1.37:80', '-r', '10.10.1.22:80', '-m', '-w', '1', '-x', '50', '-y', '5');
    const thresholds = () => ipvsadmTable().find((e) => e.vs.address === '10.200.1.37')!.dests
      .filter((d) => d.upperThreshold || d.lowerThreshold).map((d) => `${d.address} ${d.upperThreshold}/${d.lowerThreshold}`);
    expect(thresholds()).toEqual(['10.10.1.22 50/5']);
    op = new OperatorProcess(dir.args, undefined, ['--no-iptables']);
    await op.start();
    const [first] = op.syncs();
    const read = op.logs.find((l) => l.message === 'read the whole IPVS table');
    expect(read).toMatchObject({ realServersFrom: '/proc/net/ip_vs and GET_DEST dumps', listed: 1, dumped: 0 });
    // The first sync after the restart: the weight set back and the stray real server (no
    // connections, as the listing counts them) deleted at once: 2 ops.
    expect(first).toMatchObject({ full: true, ops: 2, failed: 0 });
    expect(ipvsadmLines()).toContain(inStep);
    // The thresholds: put right by the drift check, which reads real servers over netlink in turn.
    await waitFor('the thresholds cleared', () => thresholds().length === 0, 60_000, 300);
    expect(ipvsadmLines()).toContain(inStep);
  }, 240_000);

  it('an endpoint removed under a live connection drains at weight 0 and goes when the connection closes', async () => {
    dir = new ManifestDir();
    dir.write('config', config({ syncPeriod: 1 }), node);
    dir.write('web', service('web', '10.200.1.35', { 'ipvs-operator.io/scheduler': 'sh' }), slice('web', PODS));
    op = new OperatorProcess(dir.args);
    await op.start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const { pod, socket } = await getPod('http://10.200.1.35/', agent);
    const ip = PODS[Number(pod.slice(2)) - 1]!;
    dir.write('web', service('web', '10.200.1.35', { 'ipvs-operator.io/scheduler': 'sh' }), slice('web', PODS.filter((p) => p !== ip)));
    await waitFor('weight 0', () => ipvsadmLines()[0]?.includes(`${ip}:80 w=0`));
    // Still programmed while the connection lives; other traffic avoids it.
    await new Promise((r) => setTimeout(r, 3000));
    expect(ipvsadmLines()[0]).toContain(`${ip}:80 w=0`);
    const others = await runLoad({ client: 'opclient', url: 'http://10.200.1.35/', count: 6 });
    expect(others.byPod[pod]).toBeUndefined();
    // Close with a reset: IPVS moves the connection to CLOSE (10 s), then counts nothing.
    socket.resetAndDestroy();
    agent.destroy();
    await waitFor('the drained real server deleted', () => !ipvsadmLines()[0]?.includes(ip), 60_000, 500);
    expect(ipvsadmLines()[0]!.split(', ')).toHaveLength(2);
  }, 180_000);
  it('periodic resync repairs drift; sysctls, IPVS timeouts and /metrics as configured', async () => {
    dir = new ManifestDir();
    dir.write('config', config({ syncPeriod: 1, tcpTimeout: 901, tcpFinTimeout: 119, udpTimeout: 299 }), node);
    dir.write('web', service('web', '10.200.1.36'), slice('web', PODS));
    op = new OperatorProcess(dir.args);
    await op.start();
    // Someone edits our virtual server behind our back: the next periodic sync puts it right.
    ipvsadm('-E', '-t', '10.200.1.36:80', '-s', 'wlc');
    ipvsadm('-d', '-t', '10.200.1.36:80', '-r', '10.10.1.21:80');
    await waitFor('drift repaired', () => ipvsadmLines()[0] === 'TCP 10.200.1.36:80 rr -> 10.10.1.21:80 w=1, 10.10.1.22:80 w=1, 10.10.1.23:80 w=1', 30_000, 300);
    // The iptables path: periodic checks read it and write nothing while it is in step...
    const restoresBefore = op.logs.filter((l) => l.message === 'iptables path drifted; applying it again').length;
    await op.nextSync();
    await op.nextSync();
    expect(op.logs.filter((l) => l.message === 'iptables path drifted; applying it again')).toHaveLength(restoresBefore);
    // ...and apply it again once someone flushed a chain and emptied a set by hand.
    execFileSync('iptables', ['-t', 'nat', '-F', 'IPVSOP-SERVICES']);
    execFileSync('ipset', ['flush', 'IPVSOP-CLUSTER-IP']);
    await waitFor('iptables drift repaired', () => /-A IPVSOP-SERVICES -m set --match-set IPVSOP-CLUSTER-IP dst,dst -j IPVSOP-CLUSTER/.test(execFileSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' }))
      && execFileSync('ipset', ['list', 'IPVSOP-CLUSTER-IP'], { encoding: 'utf8' }).includes('10.200.1.36,tcp:80'), 30_000, 300);
    expect(op.logs.some((l) => l.message === 'iptables path drifted; applying it again' && /^(set IPVSOP-CLUSTER-IP has 0 members, not 1|IPv4 nat chain IPVSOP-SERVICES has 0 rules, not 4)$/.test(String(l.reason)))).toBe(true);
    expect(ipvsadm('-L', '--timeout')).toContain('Timeout (tcp tcpfin udp): 901 119 299');
    for (const [path, value] of [['net/ipv4/vs/conntrack', '1'], ['net/ipv4/vs/expire_nodest_conn', '1'], ['net/ipv4/vs/expire_quiescent_template', '1'], ['net/ipv4/ip_forward', '1']]) {
      expect(execFileSync('cat', [`/proc/sys/${path}`], { encoding: 'utf8' }).trim()).toBe(value);
    }
    await runLoad({ client: 'opclient', url: 'http://10.200.1.36/', count: 6 });
    // The kernel folds its per-CPU counters every 2 s (a timer a busy guest runs late): scraped
    // until the 6 connections are in.
    const vsConns = /^ipvsop_virtual_server_connections_total\{namespace="default",service="web",port="http",virtual_server="TCP 10.200.1.36:80"\} (\d+)/m;
    const metrics = await waitFor('the 6 connections in /metrics', async () => {
      const text = await (await fetch('http://127.0.0.1:10249/metrics')).text();
      return Number(vsConns.exec(text)?.[1]) >= 6 ? text : undefined;
    }, 30_000, 500);
    expect(metrics).toMatch(/^ipvsop_sync_proxy_rules_duration_seconds_count \d+/m);
    expect(metrics).toMatch(/^ipvsop_ipvs_ops_total\{kind="add-dest",result="ok"\} \d+/m);
    expect(metrics).toContain('ipvsop_network_programming_duration_seconds_bucket');
    expect(Number(vsConns.exec(metrics)?.[1])).toBeGreaterThanOrEqual(6);
    expect(metrics).toMatch(/^ipvsop_real_server_connections_total\{[^}]*endpoint="10.10.1.2[123]:80"\} \d+/m);
    expect((await fetch('http://127.0.0.1:10249/healthz')).status).toBe(200);
  }, 240_000);

  it('--dry-run prints the plan and changes nothing', async () => {
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('web', service('web', '10.200.1.37'), slice('web', PODS.slice(0, 1)));
    // Its output is waited for up to 240 s (a busy CI run under TCG took more than 60 s to start
    // it); what it wrote to stderr is shown if the plan never comes.
    let errText = '';
    const out = await new Promise<string>((resolve) => {
      const p = spawn(process.execPath, ['dist/src/cli/main.js', 'run', ...dir.args, '--node-name', 'lab-node', '--dry-run',
        '--metrics-addr', '127.0.0.1:10250'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      const kill = setTimeout(() => p.kill('SIGKILL'), 240_000);
      p.stdout!.setEncoding('utf8').on('data', (d: string) => {
        text += d;
        if (text.includes('add-dest')) p.kill('SIGTERM');
      });
      p.stderr!.setEncoding('utf8').on('data', (d: string) => { errText = (errText + d).slice(-4000); });
      p.on('exit', () => { clearTimeout(kill); resolve(text); });
    });
    if (!out.includes('add-dest')) process.stderr.write(`dry run's stderr:\n${errText}\n`);
    expect(out).toContain('add-service TCP 10.200.1.37:80 rr');
    expect(out).toContain('add-dest TCP 10.200.1.37:80 -> 10.10.1.21:80 w=1 masq');
    expect(ipvsadmLines()).toEqual([]);
    expect(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })).not.toContain('ipvs-op0');
  }, 300_000);
});
