// Ownership is recorded, not guessed (issue 14), on the real kernel with the real operator
// process: beside a kube-proxy-IPVS-style table made with ipvsadm (its kube-ipvs0 VIP and a
// NodePort on the same node address as ours), the operator removes exactly its own virtual
// servers when a Service goes, and `cleanup` removes all it created, NodePorts included, and
// nothing else. Addresses: pods 10.10.1.0/24, VIPs 10.200.1.0/24, node 192.168.100.1.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cleanupTopology, createPod, ensureNode } from '../../lab/topology.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { ManifestDir, OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const PODS = ['10.10.1.51'];
const RECORD = '/run/ipvs-operator/owned-virtual-servers';
const node = {
  apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] },
};
const config = { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' }, spec: { minSyncPeriod: 0.2, syncPeriod: 2 } };
const nodePort = () => {
  const s = service('np', '10.200.1.51') as { spec: { type: string; ports: Array<Record<string, unknown>> } };
  s.spec.type = 'NodePort';
  s.spec.ports[0]!.nodePort = 30051;
  return s;
};
// What kube-proxy's IPVS mode would hold on this node: its own dummy VIP and a NodePort.
const FOREIGN = [
  'TCP 10.96.0.10:53 rr -> 10.10.1.51:53 w=1',
  'TCP 192.168.100.1:30052 rr -> 10.10.1.51:80 w=1',
];

let dir: ManifestDir;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  spawnSync('rm', ['-f', RECORD]);
  await ensureNode();
  await createPod({ name: 'own1', ip: PODS[0]! });
  execFileSync('ip', ['link', 'add', 'kube-ipvs0', 'type', 'dummy']);
  execFileSync('ip', ['addr', 'add', '10.96.0.10/32', 'dev', 'kube-ipvs0']);
  for (const [vip, rs] of [['10.96.0.10:53', '10.10.1.51:53'], ['192.168.100.1:30052', '10.10.1.51:80']] as const) {
    execFileSync('ipvsadm', ['-A', '-t', vip, '-s', 'rr']);
    execFileSync('ipvsadm', ['-a', '-t', vip, '-r', rs, '-m']);
  }
}, 120_000);

afterAll(async () => {
  dir?.dispose();
  spawnSync('ip', ['link', 'del', 'kube-ipvs0']);
  execFileSync('ipvsadm', ['-C']);
  await cleanupTopology();
}, 180_000);

describe('a recorded ownership beside kube-proxy\'s IPVS mode', () => {
  it('removes only its own NodePort when the Service goes; cleanup removes all it created and leaves the foreign table', async () => {
    dir = new ManifestDir();
    dir.write('config', config, node);
    dir.write('np', nodePort(), slice('np', PODS));
    let op = new OperatorProcess([...dir.args, '--no-iptables']);
    await op.start();
    expect(ipvsadmLines()).toEqual([
      'TCP 10.200.1.51:80 rr -> 10.10.1.51:80 w=1',
      ...FOREIGN,
      'TCP 192.168.100.1:30051 rr -> 10.10.1.51:80 w=1',
    ].sort());
    expect(execFileSync('cat', [RECORD], { encoding: 'utf8' }).split('\n').filter((l) => l && !l.startsWith('#')))
      .toEqual(['TCP 10.200.1.51:80', 'TCP 192.168.100.1:30051']);

    // The Service goes while the operator is down; after the restart only the record tells.
    await op.stop();
    dir.remove('np');
    op = new OperatorProcess([...dir.args, '--no-iptables']);
    await op.start();
    await waitFor('our virtual servers gone', () => ipvsadmLines().join('\n') === [...FOREIGN].sort().join('\n'));

    // Again, then cleanup with the operator stopped.
    dir.write('np', nodePort(), slice('np', PODS));
    await waitFor('ours back', () => ipvsadmLines().length === 4);
    await op.stop();
    const out = execFileSync(process.execPath, ['dist/src/cli/main.js', 'cleanup'], { encoding: 'utf8' });
    expect(out).toContain('delete-service TCP 192.168.100.1:30051');
    expect(ipvsadmLines()).toEqual([...FOREIGN].sort());
    expect(execFileSync('ip', ['-o', 'addr', 'show', 'dev', 'kube-ipvs0'], { encoding: 'utf8' })).toContain('10.96.0.10/32');
    expect(existsSync(RECORD)).toBe(false);
  }, 240_000);
});
