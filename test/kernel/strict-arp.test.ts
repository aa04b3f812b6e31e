// strictARP on a real kernel with the real operator process (issue 14): while the config has it
// on, the node does not answer ARP for a VIP on the operator's dummy interface from another
// interface (arping from a client on that link is the oracle); turned off, the node's earlier
// values (a non-default one included) are back and ARP is answered again; `cleanup` restores
// them too. Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, clients 192.168.100.0/24.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cleanupTopology, createClient, createPod, ensureNode } from '../../lab/topology.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const ADDR = '127.0.0.1:10253';
const VIP = '10.200.1.71';
const ALL = '/proc/sys/net/ipv4/conf/all';
const node = {
  apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
};
const config = (strictARP: boolean) => ({
  apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' },
  spec: { minSyncPeriod: 0.2, syncPeriod: 5, strictARP },
});
const sysctls = () => `${readFileSync(`${ALL}/arp_ignore`, 'utf8').trim()}/${readFileSync(`${ALL}/arp_announce`, 'utf8').trim()}`;
/** Whether the node answers ARP for `ip` to the client on its link (arping exits 0 on a reply). */
const answered = (ip: string) => spawnSync('ip', ['netns', 'exec', 'arpclient', 'arping', '-c', '2', '-w', '3', '-I', 'eth0', ip], { stdio: 'ignore' }).status === 0;

let original = '';
let dir: ManifestDir | undefined;
let op: OperatorProcess | undefined;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  original = sysctls();
  await ensureNode();
  await createPod({ name: 'arppod', ip: '10.10.1.71' });
  await createClient({ name: 'arpclient', ip: '192.168.100.71' });
  // The VIPs are on the client's link as far as it knows: it asks ARP for them, not a gateway.
  execFileSync('ip', ['netns', 'exec', 'arpclient', 'ip', 'route', 'add', '10.200.1.0/24', 'dev', 'eth0']);
  // A non-default value the node had before, to see it restored (arp_announce 1: prefer the
  // outgoing interface's subnet).
  writeFileSync(`${ALL}/arp_ignore`, '0');
  writeFileSync(`${ALL}/arp_announce`, '1');
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await cleanupNode().catch(() => undefined);
  dir?.dispose();
  const [i, a] = original.split('/');
  writeFileSync(`${ALL}/arp_ignore`, i!);
  writeFileSync(`${ALL}/arp_announce`, a!);
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 180_000);

describe('strictARP', () => {
  it('stops ARP answers for the VIPs while on, restores the node\'s values when turned off, and cleanup restores them too', async () => {
    dir = new ManifestDir();
    dir.write('config', config(true), node);
    dir.write('web', service('web', VIP), slice('web', ['10.10.1.71']));
    op = new OperatorProcess(dir.args, ADDR);
    await op.start();
    await waitFor('strictARP on', () => sysctls() === '1/2', 30_000);
    expect(execFileSync('ip', ['-o', 'addr', 'show', 'dev', 'ipvs-op0'], { encoding: 'utf8' })).toContain(`${VIP}/32`);
    expect(answered(VIP)).toBe(false);

    dir.write('config', config(false), node);
    await waitFor('strictARP off', () => op!.logs.some((l) => l.message === 'strictARP off: arp_ignore=0 arp_announce=1 restored'), 30_000);
    expect(sysctls()).toBe('0/1');
    expect(answered(VIP)).toBe(true);

    // On again, then the operator goes away and `cleanup` puts the node back.
    dir.write('config', config(true), node);
    await waitFor('strictARP on again', () => sysctls() === '1/2', 30_000);
    expect(await op.stop()).toBe(0);
    op = undefined;
    const out = execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup'], { encoding: 'utf8' });
    expect(out).toContain('strictARP off: arp_ignore=0 arp_announce=1 restored');
    expect(sysctls()).toBe('0/1');
  }, 180_000);

  it('node-setup (the privileged init container\'s command) loads the modules, sets the sysctls and strictARP; cleanup restores ARP', () => {
    // The client's gateway 192.168.100.1 sits on the node's dummy lab-node0, not on the client's
    // link: answered with the node's ARP settings, not under strictARP.
    expect(answered('192.168.100.1')).toBe(true);
    execFileSync('sysctl', ['-q', '-w', 'net.ipv4.vs.expire_nodest_conn=0']);
    const out = execFileSync(process.execPath, ['dist/src/cli/main.js', 'node-setup', '--strict-arp', '--state-dir', '/tmp/node-setup-state'], { encoding: 'utf8' });
    expect(out).toContain('ip_vs: loaded');
    expect(out).toMatch(/^schedulers: .*\brr\b.*\bsed\b/m);
    expect(out).toContain('sysctl net.ipv4.vs.expire_nodest_conn=1');
    expect(out).toContain('strictARP on: arp_ignore=1 arp_announce=2 (was arp_ignore=0 arp_announce=1)');
    expect(readFileSync('/proc/sys/net/ipv4/vs/expire_nodest_conn', 'utf8').trim()).toBe('1');
    expect(sysctls()).toBe('1/2');
    expect(answered('192.168.100.1')).toBe(false);
    const cleaned = execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup', '--state-dir', '/tmp/node-setup-state'], { encoding: 'utf8' });
    expect(cleaned).toContain('strictARP off: arp_ignore=0 arp_announce=1 restored');
    expect(sysctls()).toBe('0/1');
    expect(answered('192.168.100.1')).toBe(true);
  }, 60_000);
});
