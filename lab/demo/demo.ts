// The quick-start demo (`npm run demo`), run inside the lab VM: the operator itself, on the
// embedded default `--source files:examples/lab` (three Services over the same three pods, with
// the rr, lc and sed scheduler annotations), backend "pods" in network namespaces, traffic to
// each VIP from a client namespace, then `ipvs-operator status` and the per-backend counts.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cleanupTopology, createClient, createPod, ensureNode, runLoad } from '../topology.js';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const EXAMPLES = fileURLToPath(new URL('../../../examples/lab', import.meta.url));
const ADDR = '127.0.0.1:10249';
const pods = [
  { name: 'webpod1', ip: '10.10.1.11' },
  { name: 'webpod2', ip: '10.10.1.12' },
  { name: 'webpod3', ip: '10.10.1.13' },
];
const services = [
  { name: 'webpod-rr', vip: '10.200.1.10' },
  { name: 'webpod-lc', vip: '10.200.1.11' },
  { name: 'webpod-sed', vip: '10.200.1.12' },
];

async function waitReady(op: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (op.exitCode !== null) throw new Error(`the operator exited with ${op.exitCode}`);
    try {
      if ((await fetch(`http://${ADDR}/readyz`)).ok) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the operator was not ready after 60 s');
}

async function main(): Promise<void> {
  if (process.env.IPVS_LAB !== '1') throw new Error('the demo runs in the lab VM: npm run demo');
  await ensureNode();
  await Promise.all(pods.map((p) => createPod(p)));
  await createClient({ name: 'client', ip: '192.168.100.10' });

  console.log('$ ipvs-operator run --source files:examples/lab --node-name lab-node --log-format text');
  const op = spawn(process.execPath, [CLI, 'run', '--source', `files:${EXAMPLES}`, '--node-name', 'lab-node',
    '--log-format', 'text', '--metrics-addr', ADDR], { stdio: ['ignore', 'inherit', 'inherit'] });
  try {
    await waitReady(op);
    console.log('\nready; sending traffic from the client namespace\n');
    const rows: string[] = [];
    for (const { name, vip } of services) {
      // Sequential requests, then 6 at a time: lc and sed differ from rr only when connections
      // overlap, because they count active connections.
      const seq = await runLoad({ client: 'client', url: `http://${vip}/`, count: 30 });
      const conc = await runLoad({ client: 'client', url: `http://${vip}/`, count: 30, concurrency: 6 });
      const count = (r: typeof seq) => pods.map((p) => String(r.byPod[p.name] ?? 0).padStart(5)).join('');
      rows.push(`${name.padEnd(11)} ${vip.padEnd(12)}${count(seq)}   ${count(conc)}   ${seq.errors + conc.errors}`);
    }
    const heads = pods.map((p) => p.name.slice(-4).padStart(5)).join('');
    console.log(`${'Service'.padEnd(11)} ${'VIP'.padEnd(12)}${'sequential x30'.padStart(15)}   ${'6 concurrent x30'.padStart(15)}   errors`);
    console.log(`${' '.repeat(24)}${heads}   ${heads}`);
    for (const r of rows) console.log(r);
    // IPVS folds per-CPU counters into the reported stats every 2 s: let one fold happen.
    await new Promise((r) => setTimeout(r, 2500));
    console.log('\n$ ipvs-operator status');
    console.log(execFileSync(process.execPath, [CLI, 'status', '--operator-addr', ADDR], { encoding: 'utf8' }));
  } finally {
    op.kill('SIGTERM');
    await new Promise((r) => op.once('exit', r));
    console.log('$ ipvs-operator cleanup');
    console.log(execFileSync(process.execPath, [CLI, 'cleanup'], { encoding: 'utf8' }));
    await cleanupTopology();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
