#!/usr/bin/env node
// A lab cluster pod's server, run in the pod's netns by cluster.ts
// (`node dist/lab/cluster/pod.js --name <pod> [--ports 80,8080] [--udp-ports 53,80]`): the
// study notes' traefik/whoami in one small process.
//   HTTP on each --ports port: `/json` answers {"pod","peer"} (the shape lab/loadgen.ts counts);
//   `/health` answers ok; every other path answers whoami's text (Hostname, IP, RemoteAddr and
//   the request), so the notes' `curl -s webpod | grep Hostname` works unchanged.
//   UDP echo on each --udp-ports port: a datagram gets back {"pod","peer","data"} (a DNS-style
//   question and answer: one datagram each way).
// Prints "ready" once every socket listens.
// SIGTERM is a kubelet's graceful termination: the server stops accepting, answers every request
// in flight (with `connection: close`, so a kept-alive client goes elsewhere for its next one),
// closes idle kept-alive connections, and exits 0 once no connection is left; after --grace-ms
// (terminationGracePeriodSeconds, default 30 s; 0: at once) it cuts what is left, as SIGKILL
// would. Before exiting it prints one line {"terminated":{"open","inFlight","cut","ms"}}: the
// connections and requests it had at SIGTERM and how many it cut (each cut one is a reset client).
import { createSocket } from 'node:dgram';
import type { Socket } from 'node:net';
import { createServer, type Server } from 'node:http';
import { networkInterfaces } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    ports: { type: 'string', default: '80' },
    'udp-ports': { type: 'string', default: '53' },
    'grace-ms': { type: 'string', default: '30000' },
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
const graceMs = Number(values['grace-ms']);

function addresses(): string[] {
  return Object.values(networkInterfaces()).flat().filter((a) => a && !a.internal).map((a) => `IP: ${a!.address}`);
}

const servers: Server[] = [];
/** Every open TCP connection, and the requests being answered. */
const open = new Set<Socket>();
let inFlight = 0;
let terminating: { at: number; open: number; inFlight: number } | undefined;
const sockets: ReturnType<typeof createSocket>[] = [];
let pending = ports.length + udpPorts.length * 2;
const listening = () => {
  if (--pending === 0) process.stdout.write('ready\n');
};

for (const port of ports) {
  const server = createServer((req, res) => {
    inFlight++;
    res.on('close', () => { inFlight--; });
    if (terminating) res.setHeader('connection', 'close');
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
  track(server);
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
  s6.keepAliveTimeout = 30_000;
  track(s6);
  s6.on('error', (e) => {
    process.stderr.write(`pod ${name}: tcp6 ${port}: ${e.message}\n`);
    process.exit(1);
  });
  s6.listen({ port, host: '::', ipv6Only: true }, listening);
  servers.push(s6);
}

function track(server: Server): void {
  server.on('connection', (c: Socket) => {
    open.add(c);
    c.on('close', () => {
      open.delete(c);
      if (terminating && open.size === 0) exit(0);
    });
  });
}

let exiting = false;
function exit(cut: number): void {
  if (exiting) return;
  exiting = true;
  const t = terminating!;
  process.stdout.write(`${JSON.stringify({ terminated: { open: t.open, inFlight: t.inFlight, cut, ms: Date.now() - t.at } })}\n`, () => process.exit(0));
}

/** Graceful termination (see the file comment). */
const stop = () => {
  if (terminating) return;
  terminating = { at: Date.now(), open: open.size, inFlight };
  for (const s of sockets) s.close();
  for (const s of servers) {
    s.close(); // stops accepting; Node 19+ also closes the idle kept-alive connections
    s.closeIdleConnections();
  }
  if (open.size === 0) return exit(0);
  setTimeout(() => {
    const cut = open.size;
    for (const s of servers) s.closeAllConnections();
    exit(cut);
  }, graceMs);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
