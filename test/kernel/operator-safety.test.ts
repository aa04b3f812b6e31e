// Safety of the real operator process on a real kernel (issue 12): one poisoned Service beside
// healthy ones, and a node-level failure that outlasts the health bound. Checked with ipvsadm,
// `ip addr` and real traffic. Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, clients
// 192.168.100.0/24 (lab/topology.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { cleanupTopology, runLoad } from '../../lab/topology.js';
import { setUpLabNode } from '../support/lab-node.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const PODS = ['10.10.1.41', '10.10.1.42'];
const ADDR = '127.0.0.1:10251';
const config = (extra: Record<string, unknown> = {}) => ({
  apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
  spec: { minSyncPeriod: 0.2, syncPeriod: 2, ...extra },
});
const node = {
  apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
};

let dir: ManifestDir | undefined;
let op: OperatorProcess | undefined;

const status = async (path: string) => {
  const r = await fetch(`http://${ADDR}${path}`);
  return { code: r.status, body: (await r.text()).trim() };
};

beforeAll(async () => {
  await setUpLabNode({ prefix: 'safe', pods: PODS, client: { name: 'safeclient', ip: '192.168.100.40' } });
}, 120_000);

afterEach(async () => {
  await op?.stop();
  op = undefined;
  spawnSync('ip', ['link', 'del', 'ipvs-op0'], { stdio: 'ignore' }); // gone already is fine
}, 180_000);

afterAll(async () => {
  await cleanupNode();
  dir?.dispose();
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 180_000);

describe('one poisoned Service', () => {
  it('leaves the healthy Services programmed and carrying traffic, gets its own problem, and /healthz stays 200', async () => {
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('good-a', service('good-a', '10.200.1.41'), slice('good-a', PODS));
    // scheduler-options nested 2,000 levels deep (12 KB): it used to throw in validation and
    // poison every later sync on every node.
    const deep = `${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}`;
    dir.write('poison', service('poison', '10.200.1.42', { 'ipvs-operator.io/scheduler': 'wrr', 'ipvs-operator.io/scheduler-options': deep }), slice('poison', PODS));
    // A port the kernel refuses (70000) in another Service.
    dir.write('badport', service('badport', '10.200.1.43', {}, 70000), slice('badport', PODS));
    op = new OperatorProcess(dir.args, ADDR);
    await op.start();
    expect(ipvsadmLines()).toContain('TCP 10.200.1.41:80 rr -> 10.10.1.41:80 w=1, 10.10.1.42:80 w=1');
    expect(ipvsadmLines().some((l) => l.startsWith('TCP 10.200.1.43:70000'))).toBe(false);
    const load = await runLoad({ client: 'safeclient', url: 'http://10.200.1.41/', count: 10 });
    expect(load.byPod).toEqual({ safe1: 5, safe2: 5 });
    // Each poisoned Service has its own problem (files source: a warn line with its reason).
    await waitFor('problems of both poisoned Services', () =>
      op!.logs.some((l) => l.object === 'Service default/poison' && l.level === 'warn')
      && op!.logs.some((l) => l.object === 'Service default/badport' && l.reason === 'InvalidPort'));
    // A Service added after the poisoned ones is still programmed: nothing is latched.
    dir.write('good-b', service('good-b', '10.200.1.44'), slice('good-b', PODS.slice(0, 1)));
    await waitFor('a later Service programmed', () => ipvsadmLines().includes('TCP 10.200.1.44:80 rr -> 10.10.1.41:80 w=1'));
    expect(await status('/healthz')).toEqual({ code: 200, body: 'ok' });
    expect(await status('/readyz')).toEqual({ code: 200, body: 'ok' });
  }, 180_000);
});

describe('a node-level failure that lasts', () => {
  it('fails /healthz after 2 x syncPeriod, names the cause, and heals when the cause goes', async () => {
    dir?.dispose();
    dir = new ManifestDir();
    dir.write('config', config(), node);
    dir.write('good-a', service('good-a', '10.200.1.45'), slice('good-a', PODS));
    op = new OperatorProcess(dir.args, ADDR);
    await op.start();
    // Someone puts a non-dummy link where the operator's VIP link was: the operator refuses to
    // touch it, so every sync fails at the VIP step.
    await op.stop();
    execFileSync('ip', ['link', 'del', 'ipvs-op0']);
    execFileSync('ip', ['link', 'add', 'ipvs-op0', 'type', 'veth', 'peer', 'name', 'ipvs-op0p']);
    execFileSync('ip', ['addr', 'add', '198.51.100.7/32', 'dev', 'ipvs-op0']);
    op = new OperatorProcess(dir.args, ADDR);
    const started = op.start().catch((e: unknown) => e);
    // The bound is start()'s own: a loaded lab VM may take a minute to bring the process up at all.
    const sick = await op.waitHttp('/healthz', (code) => code === 503);
    expect(sick.body).toMatch(/^syncs failing for \d+ s: .*ipvs-op0/);
    expect((await status('/readyz')).code).toBe(503);
    // The foreign link and its address were left alone.
    expect(execFileSync('ip', ['-o', 'addr', 'show', 'dev', 'ipvs-op0'], { encoding: 'utf8' })).toContain('198.51.100.7/32');
    execFileSync('ip', ['link', 'del', 'ipvs-op0']);
    await waitFor('/healthz 200 again', async () => (await status('/healthz')).code === 200, 60_000);
    await waitFor('/readyz 200', async () => (await status('/readyz')).code === 200, 60_000);
    expect(ipvsadmLines()).toContain('TCP 10.200.1.45:80 rr -> 10.10.1.41:80 w=1, 10.10.1.42:80 w=1');
    await started;
  }, 300_000);
});
