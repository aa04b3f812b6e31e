// The lab harness itself on a real IPVS kernel (runs in the lab VM: `npm run test:kernel`).
// Topology: 3 pods (10.10.1.11-13) and a client (192.168.100.10) wired to the guest's root netns,
// a VIP 10.200.1.10 on the root ns's dummy ipvs-lab0, services programmed with ipvsadm in NAT
// mode (-m) without any SNAT, so the pods must see the client's own address.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import {
  addVip, cleanupTopology, createClient, createPod, deleteNetns, freshNetns, netnsExec, runLoad, type Pod,
} from '../../lab/topology.js';

const inLab = process.env.IPVS_LAB === '1';
const lab = inLab ? describe : describe.skip;

const VIP = '10.200.1.10';
const CLIENT = { name: 'lab-client', ip: '192.168.100.10' };
const PODS = [
  { name: 'lab-pod-a', ip: '10.10.1.11' },
  { name: 'lab-pod-b', ip: '10.10.1.12' },
  { name: 'lab-pod-c', ip: '10.10.1.13' },
];

function ipvsadm(...args: string[]): string {
  return execFileSync('ipvsadm', args, { encoding: 'utf8' });
}

lab('lab VM', () => {
  const pods: Pod[] = [];

  beforeAll(async () => {
    execFileSync('modprobe', ['ip_vs']);
    const created = await Promise.all([...PODS.map((p) => createPod(p)), createClient(CLIENT)]);
    pods.push(...(created.slice(0, PODS.length) as Pod[]));
    await addVip(VIP);
  }, 120_000);

  afterAll(async () => {
    try {
      ipvsadm('-C');
    } finally {
      await cleanupTopology();
    }
  }, 60_000);

  test('the kernel has IPVS and the guest forwards IPv4', () => {
    expect(existsSync('/proc/net/ip_vs')).toBe(true);
    expect(readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim()).toBe('1');
    expect(ipvsadm('-Ln')).toMatch(/IP Virtual Server version \d+\.\d+\.\d+/);
  });

  test('rr over 3 pods: 30 sequential requests give 10/10/10, pods see the client address', async () => {
    ipvsadm('-A', '-t', `${VIP}:80`, '-s', 'rr');
    for (const p of PODS) ipvsadm('-a', '-t', `${VIP}:80`, '-r', `${p.ip}:80`, '-m');
    const r = await runLoad({ client: CLIENT.name, url: `http://${VIP}/`, count: 30, concurrency: 1, keepAlive: false });
    expect(r.errors).toBe(0);
    expect(r.byPod).toEqual({ 'lab-pod-a': 10, 'lab-pod-b': 10, 'lab-pod-c': 10 });
    expect(r.byPeer).toEqual({ [CLIENT.ip]: 30 });
  }, 60_000);

  test('wrr 3:2:1: 30 sequential requests give 15/10/5', async () => {
    ipvsadm('-E', '-t', `${VIP}:80`, '-s', 'wrr');
    PODS.forEach((p, i) => ipvsadm('-e', '-t', `${VIP}:80`, '-r', `${p.ip}:80`, '-m', '-w', String(3 - i)));
    const r = await runLoad({ client: CLIENT.name, url: `http://${VIP}/`, count: 30, concurrency: 1, keepAlive: false });
    expect(r.errors).toBe(0);
    expect(r.byPod).toEqual({ 'lab-pod-a': 15, 'lab-pod-b': 10, 'lab-pod-c': 5 });
    expect(r.byPeer).toEqual({ [CLIENT.ip]: 30 });
  }, 60_000);

  test('keep-alive: one connection is scheduled once', async () => {
    const r = await runLoad({ client: CLIENT.name, url: `http://${VIP}/`, count: 20, concurrency: 1, keepAlive: true });
    expect(r.errors).toBe(0);
    expect(Object.values(r.byPod)).toEqual([20]);
  }, 60_000);

  test('a fresh netns has its own, empty IPVS table', async () => {
    await freshNetns('lab-iso');
    try {
      const inside = await netnsExec('lab-iso', ['ipvsadm', '-Ln']);
      expect(inside.code).toBe(0);
      expect(inside.stdout).not.toContain(VIP);
      expect(ipvsadm('-Ln')).toContain(`${VIP}:80`);
    } finally {
      await deleteNetns('lab-iso');
    }
  }, 60_000);
});

if (!inLab) {
  test.skip('lab VM tests run only inside the VM (npm run test:kernel)', () => undefined);
}
