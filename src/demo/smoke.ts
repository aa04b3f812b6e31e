// The IPVS smoke demo (README quick start, command 1), run inside the lab VM by
// `npm run demo`: three backend "pods" in network namespaces, three virtual servers programmed by
// our netlink client with the rr, lc and sed schedulers, VIPs put on a dummy interface by our
// rtnetlink helpers, 30 requests to each VIP from a client namespace, then the kernel's table
// (as `ipvsadm -Ln --stats` and as our client dumps it) and the per-backend counts.
import { execFileSync } from 'node:child_process';
import { NetlinkIpvs } from '../ipvs/client.js';
import { type IpvsOp, formatRealServer, formatVirtualServer, makeRealServer, makeVirtualServer } from '../model/ipvs.js';
import { Rtnl } from '../rtnl/links.js';
import { cleanupTopology, createClient, createPod, ensureNode, runLoad } from '../lab/topology.js';

const VIP_DEV = 'ipvs-op0';
const pods = [
  { name: 'webpod1', ip: '10.10.1.11' },
  { name: 'webpod2', ip: '10.10.1.12' },
  { name: 'webpod3', ip: '10.10.1.13' },
];
const services = [
  { vip: '10.200.1.10', scheduler: 'rr' },
  { vip: '10.200.1.11', scheduler: 'lc' },
  { vip: '10.200.1.12', scheduler: 'sed' },
];

async function main(): Promise<void> {
  if (process.env.IPVS_LAB !== '1') throw new Error('the demo runs in the lab VM: npm run demo');
  execFileSync('modprobe', ['ip_vs']);
  await ensureNode();
  const rtnl = Rtnl.open();
  const ipvs = await NetlinkIpvs.open();
  try {
    await rtnl.ensureDummy(VIP_DEV);
    await rtnl.setUp(VIP_DEV);
    for (const s of services) await rtnl.addAddress(VIP_DEV, s.vip);
    await Promise.all(pods.map((p) => createPod(p)));
    await createClient({ name: 'client', ip: '192.168.100.10' });

    const ops: IpvsOp[] = services.flatMap(({ vip, scheduler }) => {
      const vs = makeVirtualServer({ family: 'IPv4', address: vip, port: 80, scheduler });
      return [{ kind: 'add-service', vs } as IpvsOp, ...pods.map((p) => ({ kind: 'add-dest', vs, rs: makeRealServer({ address: p.ip, port: 80 }) }) as IpvsOp)];
    });
    const failed = (await ipvs.apply(ops)).filter(Boolean);
    if (failed.length) throw failed[0];
    console.log(`programmed ${ops.length} ops through generic netlink (IPVS ${(await ipvs.info()).version})\n`);

    const rows: string[] = [];
    for (const { vip, scheduler } of services) {
      // Sequential requests, then 6 concurrent ones: lc/sed differ from rr only when
      // connections overlap (they count active connections).
      const seq = await runLoad({ client: 'client', url: `http://${vip}/`, count: 30 });
      const conc = await runLoad({ client: 'client', url: `http://${vip}/`, count: 30, concurrency: 6 });
      const count = (r: typeof seq) => pods.map((p) => String(r.byPod[p.name] ?? 0).padStart(3)).join(' ');
      rows.push(`${vip.padEnd(13)} ${scheduler.padEnd(4)} ${count(seq)}   ${count(conc)}   ${seq.errors + conc.errors}`);
    }
    console.log('VIP           sched   sequential x30    6 concurrent x30   errors');
    console.log(`${' '.repeat(18)} ${pods.map((p) => p.name.slice(-4)).join(' ')}   ${pods.map((p) => p.name.slice(-4)).join(' ')}`);
    for (const r of rows) console.log(r);

    // IPVS folds per-CPU counters into the reported stats every 2 s: let one fold happen.
    await new Promise((r) => setTimeout(r, 2500));
    console.log('\n$ ipvsadm -Ln --stats');
    console.log(execFileSync('ipvsadm', ['-Ln', '--stats'], { encoding: 'utf8' }));
    console.log('our client\'s dump:');
    for (const vs of await ipvs.listVirtualServers()) {
      console.log(formatVirtualServer(vs));
      for (const rs of await ipvs.listRealServers(vs)) {
        console.log(`  -> ${formatRealServer(rs)} active=${rs.activeConns} inactive=${rs.inactiveConns}`);
      }
    }
  } finally {
    for (const vs of await ipvs.listVirtualServers()) await ipvs.deleteVirtualServer(vs);
    await rtnl.deleteLink(VIP_DEV);
    ipvs.close();
    rtnl.close();
    await cleanupTopology();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
