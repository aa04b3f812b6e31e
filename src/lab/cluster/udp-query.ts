#!/usr/bin/env node
// A DNS-style UDP client for the lab cluster, run in a pod or the external client's netns:
//   node dist/src/lab/cluster/udp-query.js --host 10.200.1.12 --port 53 --count 9 [--timeout-ms 2000]
// Each query goes from a fresh socket (a new source port: a new IPVS connection), one datagram
// out and one back, sequentially. Prints {"count","ok","errors","byPod","byPeer"} as JSON; the
// answers are src/lab/cluster/pod.ts's UDP echo ({"pod","peer","data"}).
import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { host: { type: 'string' }, port: { type: 'string', default: '53' }, count: { type: 'string', default: '1' }, 'timeout-ms': { type: 'string', default: '2000' } },
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
