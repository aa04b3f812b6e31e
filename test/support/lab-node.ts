// The kernel tests' node, set up once per file: ip_vs loaded, the IPVS table empty, the lab node
// (lab/topology.ts), its pods named `<prefix>1..N` at the given addresses, and one client netns.
import { execFileSync } from 'node:child_process';
import { createClient, createPod, ensureNode } from '../../lab/topology.js';

export async function setUpLabNode(o: { prefix: string; pods: readonly string[]; client?: { name: string; ip: string } }): Promise<void> {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  await ensureNode();
  await Promise.all(o.pods.map((ip, i) => createPod({ name: `${o.prefix}${i + 1}`, ip })));
  if (o.client) await createClient(o.client);
}
