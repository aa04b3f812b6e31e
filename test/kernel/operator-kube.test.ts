// The operator process with `--source kube` against the fake API server (real HTTP list/watch,
// test/support/fake-apiserver.ts) running in this jest process, inside the lab VM: client-node's
// real informers, the real kernel. Addresses: see lab/topology.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanupTopology, runLoad } from '../../lab/topology.js';
import { kubeconfigYaml } from '../../lab/cluster/apiserver.js';
import { FakeApiServer } from '../support/fake-apiserver.js';
import { setUpLabNode } from '../support/lab-node.js';
import { ipvsadmLines } from '../support/ipvsadm.js';
import { OperatorProcess, service, slice, waitFor } from '../support/operator-process.js';
import { cleanupNode } from '../../src/cli/status.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const PODS = ['10.10.1.41', '10.10.1.42', '10.10.1.43'];
let api: FakeApiServer;
let op: OperatorProcess;

beforeAll(async () => {
  await setUpLabNode({ prefix: 'kp', pods: PODS, client: { name: 'kclient', ip: '192.168.100.30' } });
  api = await FakeApiServer.start();
  api.put('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'lab-node' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.100.1' }] } });
  api.put('ipvsproxyconfigs', { apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' }, spec: { minSyncPeriod: 0.2, syncPeriod: 5 } });
  api.put('services', service('web', '10.200.1.50'));
  api.put('endpointslices', slice('web', PODS.slice(0, 2)));
  api.put('services', service('bad', '10.200.1.51', { 'ipvs-operator.io/scheduler': 'fastest' }));
  api.put('endpointslices', slice('bad', PODS.slice(2)));
  const file = join(mkdtempSync(join(tmpdir(), 'kc-')), 'kubeconfig');
  writeFileSync(file, kubeconfigYaml(api.url, 'unused')); // the fake server here checks no token
  op = new OperatorProcess(['--source', 'kube', '--kubeconfig', file]);
  await op.start();
}, 180_000);

afterAll(async () => {
  await op?.stop();
  await cleanupNode();
  await api?.close();
  await cleanupTopology();
}, 180_000);

describe('the operator on client-node informers against a real-HTTP API server', () => {
  it('programs the Services; a bad annotation gets rr in the kernel and an Event on the Service', async () => {
    expect(ipvsadmLines()).toEqual([
      'TCP 10.200.1.50:80 rr -> 10.10.1.41:80 w=1, 10.10.1.42:80 w=1',
      'TCP 10.200.1.51:80 rr -> 10.10.1.43:80 w=1',
    ]);
    const event = await waitFor('an Event', () => api.list('events').find((e) => e.reason === 'UnknownScheduler'));
    expect(event).toMatchObject({ involvedObject: { kind: 'Service', namespace: 'default', name: 'bad' } });
    expect(String(event.message)).toContain('"fastest"');
    // Deduplicated: many syncs later, still one Event for it.
    await op.nextSync();
    await op.nextSync();
    expect(api.list('events').filter((e) => e.reason === 'UnknownScheduler')).toHaveLength(1);
  }, 120_000);

  it('writes its IPVSNodeState status', async () => {
    const s = await waitFor('node status', () => api.get('ipvsnodestates', 'lab-node')?.status as Record<string, unknown> | undefined);
    expect(s).toMatchObject({ kernelIPVSVersion: '1.2.1', virtualServers: 2, lastError: '' });
    expect(s.schedulersAvailable).toEqual(expect.arrayContaining(['rr', 'lc', 'sed', 'mh']));
  }, 60_000);

  it('API server gone for 30 s: the kernel stays exactly as it was, traffic flows, then it converges', async () => {
    const before = ipvsadmLines();
    api.down();
    api.put('endpointslices', slice('web', PODS)); // a change the operator cannot see yet
    await new Promise((r) => setTimeout(r, 30_000));
    expect(ipvsadmLines()).toEqual(before);
    const during = await runLoad({ client: 'kclient', url: 'http://10.200.1.50/', count: 10 });
    expect(during.errors).toBe(0);
    api.up();
    await waitFor('the change applied', () => ipvsadmLines()[0] === 'TCP 10.200.1.50:80 rr -> 10.10.1.41:80 w=1, 10.10.1.42:80 w=1, 10.10.1.43:80 w=1', 90_000, 500);
    const after = await runLoad({ client: 'kclient', url: 'http://10.200.1.50/', count: 9 });
    expect(after.byPod).toEqual({ kp1: 3, kp2: 3, kp3: 3 });
  }, 180_000);
});
