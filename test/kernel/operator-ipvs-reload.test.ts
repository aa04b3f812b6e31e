// The IPVS module unloaded and loaded again under the running operator (issue 12: "the kernel
// socket forced to fail -> the operator recovers without a restart"). Reloading ip_vs is a real
// kernel fault: the generic netlink family goes away, comes back with a new id (ids are allocated
// cyclically), the table and the /proc/sys/net/ipv4/vs sysctls start from scratch. The operator is
// paused (SIGSTOP) while the module is swapped so it cannot re-add a virtual server in between;
// after SIGCONT it must reprogram its Services, set its sysctls again and carry traffic, with no
// restart. ipvsadm, sysctl and real traffic are the oracles.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { cleanupTopology, runLoad } from '../../lab/topology.js';
import { setUpLabNode } from '../support/lab-node.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { netlinkRows, socketInodes } from '../support/netlink-sockets.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const PODS = ['10.10.1.51', '10.10.1.52'];
const ADDR = '127.0.0.1:10252';
const VIP = '10.200.1.55';
const EXPIRE_NODEST = '/proc/sys/net/ipv4/vs/expire_nodest_conn';
let dir: ManifestDir | undefined;
let op: OperatorProcess | undefined;

/** ipvsadm's `tcp tcpfin udp` timeouts. */
const timeouts = () => /Timeout \(tcp tcpfin udp\): (\d+ \d+ \d+)/.exec(execFileSync('ipvsadm', ['-L', '--timeout'], { encoding: 'utf8' }))?.[1] ?? '';

/**
 * The netlink sockets with a dump running, each with the process that holds it: a dump holds a
 * reference on the module that answers it until it is read to its end or its socket is closed
 * (netlink_dump_start), so ip_vs cannot be unloaded under a process stopped in one.
 */
function runningDumps(): Array<{ family: string; inode: string; pid?: string; comm?: string }> {
  const owners = new Map<string, { pid: string; comm: string }>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let comm: string;
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      continue; // gone meanwhile
    }
    for (const inode of socketInodes(pid)) owners.set(inode, { pid, comm });
  }
  return netlinkRows().filter((r) => r.dump).map((r) => ({ family: r.family, inode: r.inode, ...owners.get(r.inode) }));
}

/**
 * Stops `pid` (SIGSTOP) where it has no dump running, so that nothing of it holds ip_vs: stopped
 * inside a dump it is let go on (SIGCONT) and stopped again, at most 50 times.
 */
async function stopOutsideDumps(pid: number): Promise<void> {
  for (let i = 0; ; i++) {
    execFileSync('kill', ['-STOP', String(pid)]);
    const held = runningDumps().filter((d) => d.pid === String(pid));
    if (!held.length || i === 50) return;
    process.stderr.write(`ip_vs reload: the operator stopped inside a dump (${JSON.stringify(held)}), let go on\n`);
    execFileSync('kill', ['-CONT', String(pid)]);
    await new Promise((r) => setTimeout(r, 10 + i));
  }
}

/** Every ip_vs module loaded (schedulers first, ip_vs last), for modprobe -r. */
function ipvsModules(): string[] {
  const mods = readdirSync('/sys/module').filter((m) => m.startsWith('ip_vs'));
  return [...mods.filter((m) => m !== 'ip_vs'), ...(mods.includes('ip_vs') ? ['ip_vs'] : [])];
}

beforeAll(async () => {
  await setUpLabNode({ prefix: 'rld', pods: PODS, client: { name: 'rldclient', ip: '192.168.100.50' } });
}, 120_000);

afterAll(async () => {
  if (op?.pid) spawnSync('kill', ['-CONT', String(op.pid)]);
  await op?.stop();
  execFileSync('modprobe', ['ip_vs']);
  await cleanupNode();
  dir?.dispose();
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 120_000);

describe('ip_vs reloaded under the running operator', () => {
  it('reprograms its Services, sets its sysctls again and carries traffic, without a restart', async () => {
    dir = new ManifestDir();
    dir.write('config', {
      apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
      spec: { minSyncPeriod: 0.2, syncPeriod: 2, tcpTimeout: 1200 },
    }, { apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] } });
    dir.write('reload', service('reload', VIP), slice('reload', PODS));
    op = new OperatorProcess(dir.args, ADDR);
    await op.start();
    const programmed = `TCP ${VIP}:80 rr -> 10.10.1.51:80 w=1, 10.10.1.52:80 w=1`;
    await waitFor('programmed', () => ipvsadmLines().includes(programmed));
    expect(readFileSync(EXPIRE_NODEST, 'utf8').trim()).toBe('1');
    await waitFor('tcp timeout 1200', () => timeouts().startsWith('1200 '));

    const pid = op.pid!;
    await stopOutsideDumps(pid);
    execFileSync('ipvsadm', ['-C']);
    try {
      execFileSync('modprobe', ['-r', ...ipvsModules()], { stdio: 'pipe' });
    } catch (e) {
      const refs = readFileSync('/sys/module/ip_vs/refcnt', 'utf8').trim();
      throw new Error(`${(e as Error).message}; ip_vs refcnt ${refs}; dumps running ${JSON.stringify(runningDumps())}; operator ${pid}`);
    }
    expect(readdirSync('/sys/module').filter((m) => m.startsWith('ip_vs'))).toEqual([]);
    execFileSync('modprobe', ['ip_vs']);
    expect(readFileSync(EXPIRE_NODEST, 'utf8').trim()).toBe('0'); // the fresh module's default
    expect(ipvsadmLines()).toEqual([]);
    expect(timeouts()).toBe('900 120 300'); // the fresh module's defaults
    execFileSync('kill', ['-CONT', String(pid)]);

    await waitFor('reprogrammed after the reload', () => ipvsadmLines().includes(programmed), 60_000)
      .catch((e: unknown) => { throw new Error(`${(e as Error).message}; last log lines: ${JSON.stringify(op!.logs.slice(-8))}`); });
    await waitFor('tcp timeout set again', () => timeouts().startsWith('1200 '), 30_000);
    await waitFor('expire_nodest_conn set again', () => readFileSync(EXPIRE_NODEST, 'utf8').trim() === '1', 30_000);
    const load = await runLoad({ client: 'rldclient', url: `http://${VIP}/`, count: 20 });
    expect({ ok: load.ok, errors: load.errors, byPod: load.byPod }).toEqual({ ok: 20, errors: 0, byPod: { rld1: 10, rld2: 10 } });
    expect((await fetch(`http://${ADDR}/healthz`)).status).toBe(200);
    expect(op.pid).toBe(pid); // the same process all along
    expect(op.logs.filter((l) => /exit|fatal/i.test(String(l.message)))).toEqual([]);
    expect(op.logs.find((l) => String(l.message).startsWith('ip_vs was loaded again'))).toMatchObject({ level: 'warn' });
  }, 180_000);
});
