#!/usr/bin/env node
// A lab cluster pod's server, run in the pod's netns by cluster.ts
// (`node dist/src/lab/cluster/pod.js --name <pod> [--ports 80,8080] [--udp-ports 53,80]`): the
// study notes' traefik/whoami in one small process.
//   HTTP on each --ports port: `/json` answers {"pod","peer"} (the shape src/lab/loadgen.ts counts);
//   `/health` answers ok; every other path answers whoami's text (Hostname, IP, RemoteAddr and
//   the request), so the notes' `curl -s webpod | grep Hostname` works unchanged.
//   UDP echo on each --udp-ports port: a datagram gets back {"pod","peer","data"} (a DNS-style
//   question and answer: one datagram each way).
// Prints "ready" once every socket listens; SIGTERM closes them and exits 0.
import { createSocket } from 'node:dgram';
import { createServer, type Server } from 'node:http';
import { networkInterfaces } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    ports: { type: 'string', default: '80' },
    'udp-ports': { type: 'string', default: '53' },
  },
});
const name = values.name;
if (!name) {
  process.stderr.write('pod: --name is required\n');
  process.exit(2);
}
const list = (s: string) => s.split(',').filter(Boolean).map(Number);
const ports = list(values.ports!);
const udpPorts = list(values['udp-ports']!);

function addresses(): string[] {
  return Object.values(networkInterfaces()).flat().filter((a) => a && !a.internal).map((a) => `IP: ${a!.address}`);
}

const servers: Server[] = [];
const sockets: ReturnType<typeof createSocket>[] = [];
let pending = ports.length + udpPorts.length * 2;
const listening = () => {
  if (--pending === 0) process.stdout.write('ready\n');
};

for (const port of ports) {
  const server = createServer((req, res) => {
    const peer = `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}`;
    req.resume();
    req.on('end', () => {
      if (req.url === '/health') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok\n');
        return;
      }
      if (req.url === '/json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ pod: name, peer }));
        return;
      }
      const headers = Object.entries(req.headers).map(([k, v]) => `${k.replace(/\b\w/g, (c) => c.toUpperCase())}: ${String(v)}`);
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end([`Hostname: ${name}`, ...addresses(), `RemoteAddr: ${peer}`, `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}`, ...headers, ''].join('\n'));
    });
  });
  server.keepAliveTimeout = 30_000;
  server.on('error', (e) => {
    process.stderr.write(`pod ${name}: tcp ${port}: ${e.message}\n`);
    process.exit(1);
  });
  // `::` with dual-stack sockets: IPv4 peers show as ::ffff:a.b.c.d, so listen on each family.
  server.listen({ port, host: '0.0.0.0' }, listening);
  servers.push(server);
}

for (const port of udpPorts) {
  for (const type of ['udp4', 'udp6'] as const) {
    const sock = createSocket({ type, ipv6Only: type === 'udp6' });
    sock.on('message', (msg, rinfo) => {
      const body = JSON.stringify({ pod: name, peer: `${rinfo.address}:${rinfo.port}`, data: msg.toString('utf8') });
      sock.send(body, rinfo.port, rinfo.address);
    });
    sock.on('error', (e) => {
      process.stderr.write(`pod ${name}: ${type} ${port}: ${e.message}\n`);
      process.exit(1);
    });
    sock.bind(port, type === 'udp4' ? '0.0.0.0' : '::', listening);
    sockets.push(sock);
  }
}

// IPv6 HTTP beside IPv4 (separate sockets keep the peers' addresses in their own family).
for (const port of ports) {
  pending++;
  const s6 = createServer(servers[ports.indexOf(port)]!.listeners('request')[0] as Parameters<typeof createServer>[0]);
  s6.on('error', (e) => {
    process.stderr.write(`pod ${name}: tcp6 ${port}: ${e.message}\n`);
    process.exit(1);
  });
  s6.listen({ port, host: '::', ipv6Only: true }, listening);
  servers.push(s6);
}

const stop = () => {
  for (const s of servers) {
    s.close();
    s.closeAllConnections();
  }
  for (const s of sockets) s.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
