// Where the time of reading the IPVS table goes (issue 29), in the lab VM (root, IPVS):
//
//   node dist/lab/cli.js run -- node [--cpu-prof] dist/bench/read-table.js [VS] [RS_PER_VS] [ONLY]
//
// Programs VS virtual servers (default 36 000, the table of 30 000 Services with 1 in 5 NodePort)
// with RS_PER_VS real servers each (default 10) through NetlinkIpvs.apply, then times, each with
// the process's user and system CPU (system = the kernel's dump work and the syscalls):
// `ipvsadm -Ln` (the C tool's full read: the same dumps), the client's virtual server dump, the
// same dump raw (datagrams counted, nothing decoded) with the package's peeked receive and with a
// fixed 32 KiB receive buffer, the real server dumps one by one (raw and through the client), the
// dump pool at 1, 4, 8 and 16 sockets, peeked and 32 KiB receive (nothing decoded), and the
// client's batched read.
// ONLY (comma list: ipvsadm,raw,vs,rawdests,dests,pool,batch) limits what runs. POOLS (comma list
// of socket counts, each peeked, e.g. 16,32,64) replaces the pool's default sizes; BATCH_SOCKETS
// sets the pool the client's batched read uses (default DUMP_SOCKETS).
import { spawnSync } from 'node:child_process';
import { RawNetlinkSocket } from 'netlink';
import { NetlinkIpvs } from '../src/ipvs/client.js';
import { type IpvsOp, type VirtualServer, makeRealServer, makeVirtualServer } from '../src/model/ipvs.js';
import { encodeRequest, listDestsRequest, listServicesRequest } from '../src/ipvs/requests.js';
import { NLMSG_DONE, NLMSG_ERROR } from '../src/netlink/constants.js';
import { msSince, progress } from './fixtures.js';
import { DumpPool } from '../src/ipvs/dump-pool.js';
import { DUMP_RECEIVE_BYTES, GenlSocket } from '../src/ipvs/socket.js';
import { readTable } from '../src/ipvs/read.js';

const [vsArg = '36000', rsArg = '10', onlyArg = 'ipvsadm,raw,vs,rawdests,dests,pool,batch', poolsArg, batchArg] =
  process.argv.slice(2);
const VS = Number(vsArg);
const RS = Number(rsArg);
const ONLY = new Set(onlyArg.split(','));

function ip(base: number, n: number): string {
  return `10.${base + ((n >> 16) & 255)}.${(n >> 8) & 255}.${n & 255}`;
}

/** Times `fn`: wall ms and this process's user/system CPU ms. */
async function timed<T>(what: string, fn: () => Promise<T> | T): Promise<T> {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const r = await fn();
  const wall = msSince(t0);
  const c = process.cpuUsage(c0);
  progress(`${what}: ${wall.toFixed(0)} ms wall, user ${(c.user / 1000).toFixed(0)} ms, ` +
    `system ${(c.system / 1000).toFixed(0)} ms`);
  return r;
}

/** One dump on a raw socket, nothing decoded: datagrams and bytes until DONE. */
function rawDump(sock: RawNetlinkSocket, bytes: Buffer, seq: number): Promise<{ datagrams: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    let datagrams = 0;
    let total = 0;
    const onMessage = (buf: Buffer): void => {
      datagrams++;
      total += buf.length;
      for (let off = 0; off + 16 <= buf.length;) {
        const len = buf.readUInt32LE(off);
        const type = buf.readUInt16LE(off + 4);
        if (buf.readUInt32LE(off + 8) === seq && (type === NLMSG_DONE || type === NLMSG_ERROR)) {
          sock.off('message', onMessage);
          resolve({ datagrams, bytes: total });
          return;
        }
        off += (len + 3) & ~3;
      }
    };
    sock.on('message', onMessage);
    sock.send(bytes, { port: 0 }, (e) => e && reject(e));
  });
}

async function main(): Promise<void> {
  const ipvs = await NetlinkIpvs.open(batchArg ? { dumpSockets: Number(batchArg) } : {});
  const cat = (f: string): string => spawnSync('cat', [f], { encoding: 'utf8' }).stdout.trim();
  progress(`rmem_max ${cat('/proc/sys/net/core/rmem_max')}, clocksource ${cat('/sys/devices/system/clocksource/clocksource0/current_clocksource')}`);
  await ipvs.flush();
  const family = ipvs.familyId!;
  const vss: VirtualServer[] = [];
  for (let i = 0; i < VS; i++) {
    vss.push(makeVirtualServer({ family: 'IPv4', protocol: 'TCP', address: ip(96, i + 1), port: 80, scheduler: 'rr' }));
  }
  await timed(`program ${VS} virtual servers x ${RS} real servers`, async () => {
    const ops: IpvsOp[] = [];
    const flushOps = async (): Promise<void> => {
      const res = await ipvs.apply(ops.splice(0));
      const bad = res.find((r) => r);
      if (bad) throw bad;
    };
    for (let i = 0; i < VS; i++) {
      ops.push({ kind: 'add-service', vs: vss[i]! });
      for (let j = 0; j < RS; j++) {
        ops.push({ kind: 'add-dest', vs: vss[i]!, rs: makeRealServer({ address: ip(128, i * 16 + j + 1), port: 8080 }) });
      }
      if (ops.length >= 20_000) await flushOps();
    }
    await flushOps();
  });
  if (ONLY.has('ipvsadm')) {
    await timed('ipvsadm -Ln (1 + VS dumps)', () => {
      const r = spawnSync('ipvsadm', ['-Ln'], { maxBuffer: 1 << 30 });
      if (r.status !== 0) throw new Error(`ipvsadm -Ln: ${r.stderr}`);
      progress(`  ipvsadm -Ln: ${r.stdout.toString().split('\n').length} lines; its CPU (bash time):`);
      const t = spawnSync('bash', ['-c', 'TIMEFORMAT="  real %R s user %U s sys %S s"; time ipvsadm -Ln >/dev/null'],
        { encoding: 'utf8' });
      progress(t.stderr.trim());
    });
  }
  if (ONLY.has('raw')) {
    for (const opts of [{ name: 'peeked receive', o: {} },
      { name: 'fixed 32 KiB receive', o: { messagePeeking: false, msgBufferSize: 32768 } }]) {
      const sock = new RawNetlinkSocket(16, { recvBufferSize: 4 << 20, sendBufferSize: 1 << 20, ...opts.o });
      progress(`  SO_RCVBUF ${sock.getRecvBufferSize()}`);
      for (let k = 0; k < 2; k++) {
        const seq = 1000 + k;
        const r = await timed(`raw VS dump, ${opts.name}`,
          () => rawDump(sock, encodeRequest(family, listServicesRequest(), seq, 0), seq));
        progress(`  ${r.datagrams} datagrams, ${r.bytes} bytes (${(r.bytes / r.datagrams).toFixed(0)} per datagram)`);
      }
      sock.close();
    }
  }
  if (ONLY.has('vs')) {
    for (let k = 0; k < 2; k++) {
      const n = await timed('listVirtualServers (client)', async () => (await ipvs.listVirtualServers()).length);
      if (n !== VS) throw new Error(`dumped ${n} virtual servers, programmed ${VS}`);
    }
  }
  if (ONLY.has('rawdests')) {
    const sock = new RawNetlinkSocket(16, { recvBufferSize: 4 << 20, sendBufferSize: 1 << 20 });
    const r = await timed(`raw real server dumps x ${VS}, one at a time, nothing decoded`, async () => {
      let datagrams = 0;
      for (let i = 0; i < VS; i++) {
        const seq = 5000 + i;
        datagrams += (await rawDump(sock, encodeRequest(family, listDestsRequest(vss[i]!), seq, 0), seq)).datagrams;
      }
      return datagrams;
    });
    progress(`  ${r} datagrams`);
    sock.close();
  }
  if (ONLY.has('dests')) {
    const n = await timed(`listRealServers x ${VS}, one at a time`, async () => {
      let n = 0;
      for (const vs of vss) n += (await ipvs.listRealServers(vs)).length;
      return n;
    });
    if (n !== VS * RS) throw new Error(`dumped ${n} real servers, programmed ${VS * RS}`);
  }
  if (ONLY.has('pool')) {
    const reqs = vss.map(listDestsRequest);
    const sizes = poolsArg
      ? poolsArg.split(',').map((k) => [Number(k), 0])
      : [[1, 0], [8, DUMP_RECEIVE_BYTES], [1, DUMP_RECEIVE_BYTES], [4, 0], [8, 0], [16, 0]];
    for (const [k, bytes] of sizes) {
      const pool = new DumpPool(() => new GenlSocket(bytes || undefined), k);
      const recv = bytes ? '32 KiB receive' : 'peeked receive';
      const n = await timed(`dump pool of ${k}, ${recv}: ${VS} real server dumps, nothing decoded`,
        async () => (await pool.dumps(family, reqs)).reduce((s, r) => s + r.messages.length, 0));
      if (n !== VS * RS) throw new Error(`dumped ${n} real servers, programmed ${VS * RS}`);
      pool.close();
    }
  }
  if (ONLY.has('batch')) {
    for (let k = 0; k < 2; k++) {
      const n = await timed(`listRealServersMany(${VS} virtual servers)`, async () =>
        (await ipvs.listRealServersMany(vss)).reduce((s, d) => s + (Array.isArray(d) ? d.length : 0), 0));
      if (n !== VS * RS) throw new Error(`dumped ${n} real servers, programmed ${VS * RS}`);
    }
    const t = await timed('readTable (the cache\'s full read: VS dump + batched real server dumps)', () => readTable(ipvs));
    if (t.size !== VS) throw new Error(`read ${t.size} virtual servers, programmed ${VS}`);
  }
  await ipvs.flush();
  ipvs.close();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
