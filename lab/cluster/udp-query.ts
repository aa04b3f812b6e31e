#!/usr/bin/env node
// A DNS-style UDP client for the lab cluster, run in a pod or the external client's netns:
//   node dist/lab/cluster/udp-query.js --host 10.200.1.12 --port 53 --count 9 [--timeout-ms 2000]
// Each query goes from a fresh socket (a new source port: a new IPVS connection), one datagram
// out and one back, sequentially. Prints {"count","ok","errors","byPod","byPeer"} as JSON; the
// answers are lab/cluster/pod.ts's UDP echo ({"pod","peer","data"}).
//   ... --source-port 40053 --count 300 --interval-ms 100
// A DNS-like client that keeps one socket: every query from that one source port (one conntrack
// entry, one IPVS connection), one every interval without waiting for answers; answers are
// collected until timeout-ms after the last query. Adds "answers": [[query, pod], ...] in order.
import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { host: { type: 'string' }, port: { type: 'string', default: '53' }, count: { type: 'string', default: '1' }, 'timeout-ms': { type: 'string', default: '2000' },
    'source-port': { type: 'string' }, 'interval-ms': { type: 'string', default: '100' } },
});
const host = values.host;
if (!host) {
  process.stderr.write('udp-query: --host is required\n');
  process.exit(2);
}
const port = Number(values.port);
const timeoutMs = Number(values['timeout-ms']);

function query(i: number): Promise<{ pod: string; peer: string } | undefined> {
  return new Promise((resolve) => {
    const sock = createSocket(isIPv6(host!) ? 'udp6' : 'udp4');
    const timer = setTimeout(() => { sock.close(); resolve(undefined); }, timeoutMs);
    sock.on('message', (msg) => {
      clearTimeout(timer);
      sock.close();
      try {
        const a = JSON.parse(msg.toString('utf8')) as { pod: string; peer: string; data: string };
        resolve(a.data === `q${i}` ? a : undefined);
      } catch {
        resolve(undefined);
      }
    });
    sock.on('error', () => { clearTimeout(timer); sock.close(); resolve(undefined); });
    sock.send(`q${i}`, port, host);
  });
}

/** --source-port: one socket, a query every interval, answers as they come. */
async function flow(sourcePort: number, count: number, intervalMs: number): Promise<Array<[number, string, string]>> {
  const sock = createSocket(isIPv6(host!) ? 'udp6' : 'udp4');
  const answers: Array<[number, string, string]> = [];
  sock.on('message', (msg) => {
    try {
      const a = JSON.parse(msg.toString('utf8')) as { pod: string; peer: string; data: string };
      const m = /^q(\d+)$/.exec(a.data);
      if (m) answers.push([Number(m[1]), a.pod, a.peer]);
    } catch {
      // not an answer of ours
    }
  });
  sock.on('error', () => {}); // an ICMP error on a send: that query is lost, the flow goes on
  await new Promise<void>((r) => sock.bind(sourcePort, r));
  for (let i = 0; i < count; i++) {
    sock.send(`q${i}`, port, host);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  await new Promise((r) => setTimeout(r, timeoutMs));
  sock.close();
  return answers;
}

if (values['source-port'] !== undefined) {
  const answers = await flow(Number(values['source-port']), Number(values.count), Number(values['interval-ms']));
  const byPod: Record<string, number> = {};
  const byPeer: Record<string, number> = {};
  for (const [, pod, peer] of answers) {
    byPod[pod] = (byPod[pod] ?? 0) + 1;
    const ip = peer.replace(/:\d+$/, '');
    byPeer[ip] = (byPeer[ip] ?? 0) + 1;
  }
  const ok = new Set(answers.map((a) => a[0])).size;
  process.stdout.write(`${JSON.stringify({ count: Number(values.count), ok, errors: Number(values.count) - ok, byPod, byPeer, answers: answers.map(([q, pod]) => [q, pod]) })}\n`);
  process.exit(0);
}

const result = { count: Number(values.count), ok: 0, errors: 0, byPod: {} as Record<string, number>, byPeer: {} as Record<string, number> };
for (let i = 0; i < result.count; i++) {
  const a = await query(i);
  if (!a) { result.errors++; continue; }
  result.ok++;
  result.byPod[a.pod] = (result.byPod[a.pod] ?? 0) + 1;
  const peer = a.peer.replace(/:\d+$/, '');
  result.byPeer[peer] = (result.byPeer[peer] ?? 0) + 1;
}
process.stdout.write(`${JSON.stringify(result)}\n`);
