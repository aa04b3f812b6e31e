#!/usr/bin/env node
// A lab "pod": a tiny HTTP server run inside a pod network namespace by topology.ts
// (`ip netns exec <pod> node dist/lab/pod-server.js --name <pod> [--port 80] [--delay-ms 0]`).
// Answers every request with {"pod":"<name>","peer":"<remote address>:<port>"} (the peer shows
// whether traffic was masqueraded), keeps connections alive, prints "ready" once listening.
// Service-time profile (lab compare): --delay-ms before each answer; optionally a stall, in which
// the server holds every request that arrives during the first --stall-ms of each
// --stall-every-ms window until the window's stall ends (a GC pause, a noisy neighbour).
// `PUT /__lab/profile` with {"delayMs","stallEveryMs","stallMs"} changes the profile at run time
// (from the node, so the same pods serve every profile); every other path answers as above.
import { parseArgs } from 'node:util';
import { http } from '../src/util/node-http.js';

// node:http through require() (src/util/node-http.ts): no ESM facade, no undici, a faster start.
const { createServer } = http;

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    port: { type: 'string', default: '80' },
    host: { type: 'string', default: '0.0.0.0' },
    'delay-ms': { type: 'string', default: '0' },
    'stall-every-ms': { type: 'string', default: '0' },
    'stall-ms': { type: 'string', default: '0' },
  },
});
const name = values.name;
if (!name) {
  process.stderr.write('pod-server: --name is required\n');
  process.exit(2);
}
const port = Number(values.port);
const profile = {
  delayMs: Number(values['delay-ms']),
  stallEveryMs: Number(values['stall-every-ms']),
  stallMs: Number(values['stall-ms']),
};

/** How long a request arriving now waits: the rest of a stall window, if in one, plus the delay. */
function waitMs(now: number): number {
  const { delayMs, stallEveryMs, stallMs } = profile;
  const phase = stallEveryMs > 0 && stallMs > 0 ? now % stallEveryMs : Infinity;
  return (phase < stallMs ? stallMs - phase : 0) + Math.max(0, delayMs);
}

function setProfile(text: string): string | undefined {
  try {
    const p = JSON.parse(text) as Record<string, unknown>;
    const next = { delayMs: p.delayMs ?? 0, stallEveryMs: p.stallEveryMs ?? 0, stallMs: p.stallMs ?? 0 };
    if (!Object.values(next).every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0)) return 'numbers >= 0 expected';
    Object.assign(profile, next);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

const server = createServer((req, res) => {
  if (req.url === '/__lab/profile' && req.method === 'PUT') {
    let text = '';
    req.setEncoding('utf8').on('data', (d: string) => { text += d; });
    req.on('end', () => {
      const problem = setProfile(text);
      res.writeHead(problem ? 400 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(problem ? { error: problem } : { pod: name, profile }));
    });
    return;
  }
  const body = JSON.stringify({ pod: name, peer: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? 0}` });
  const answer = () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  req.resume();
  req.on('end', () => {
    const ms = waitMs(Date.now());
    if (ms > 0) setTimeout(answer, ms);
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
