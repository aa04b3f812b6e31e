#!/usr/bin/env node
// A lab "pod": a tiny HTTP server run inside a pod network namespace by topology.ts
// (`ip netns exec <pod> node dist/src/lab/pod-server.js --name <pod> [--port 80] [--delay-ms 0]`).
// Answers every request with {"pod":"<name>","peer":"<remote address>:<port>"} (the peer shows
// whether traffic was masqueraded), keeps connections alive, prints "ready" once listening.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    port: { type: 'string', default: '80' },
    host: { type: 'string', default: '0.0.0.0' },
    'delay-ms': { type: 'string', default: '0' },
  },
});
const name = values.name;
if (!name) {
  process.stderr.write('pod-server: --name is required\n');
  process.exit(2);
}
const port = Number(values.port);
const delayMs = Number(values['delay-ms']);

const server = createServer((req, res) => {
  const body = JSON.stringify({ pod: name, peer: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}` });
  const answer = () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  req.resume();
  req.on('end', () => {
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  });
});
server.keepAliveTimeout = 30_000;
server.listen(port, values.host, () => {
  process.stdout.write('ready\n');
});
server.on('error', (e) => {
  process.stderr.write(`pod-server ${name}: ${e.message}\n`);
  process.exit(1);
});
const stop = () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
