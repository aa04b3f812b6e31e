// `loadgen.js --serve` (lab/loadgen.ts), the long-lived load generator topology.ts's runLoad keeps
// per client netns: here as a process on the host, against a pod-like server on loopback. The
// netns side (one agent per netns, a netns made again gets a new one) is the kernel test's
// (test/kernel/lab.test.ts).
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { batchOptions, type LoadResult } from '../../../lab/load-batch.js';

const LOADGEN = fileURLToPath(new URL('../../../lab/loadgen.js', import.meta.url));
let server: Server;
let url: string;
let answered = 0;

beforeAll(async () => {
  // Answers as a lab pod does; `?slow` after 300 ms.
  server = createServer((req, res) => {
    const reply = () => {
      answered++;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ pod: 'pod-a', peer: `${req.socket.remoteAddress}:${req.socket.remotePort}` }));
    };
    if (req.url?.includes('slow')) setTimeout(reply, 300); else reply();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/json`;
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

/** A serving loadgen and its answers, each line parsed as it comes. */
function serveProcess(): { child: ChildProcessWithoutNullStreams; answers: Array<{ id: unknown; result?: LoadResult; error?: string }>; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [LOADGEN, '--serve']);
  const answers: Array<{ id: unknown; result?: LoadResult; error?: string }> = [];
  let buf = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const l of lines) answers.push(JSON.parse(l) as (typeof answers)[number]);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, answers, exited };
}

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('runs each line as a batch, overlapping batches at once, and answers each by its id', async () => {
  const { child, answers, exited } = serveProcess();
  try {
    const before = answered;
    child.stdin.write(`${JSON.stringify({ id: 1, url: `${url}?slow`, count: 3 })}\n`);
    child.stdin.write(`${JSON.stringify({ id: 2, url, count: 5, concurrency: 2, samples: true })}\n`);
    await until('both answers', () => answers.length === 2);
    // The fast batch answers first: the slow one (3 x 300 ms) did not hold it up.
    expect(answers.map((a) => a.id)).toEqual([2, 1]);
    const [fast, slow] = [answers[0]!.result!, answers[1]!.result!];
    expect({ ok: fast.ok, errors: fast.errors, byPod: fast.byPod, samples: fast.samples?.length, sequence: fast.sequence.length })
      .toEqual({ ok: 5, errors: 0, byPod: { 'pod-a': 5 }, samples: 5, sequence: 5 });
    expect({ ok: slow.ok, byPeer: slow.byPeer, samples: slow.samples }).toEqual({ ok: 3, byPeer: { '127.0.0.1': 3 }, samples: undefined });
    expect(slow.latencyMs.min).toBeGreaterThanOrEqual(290);
    expect(answered - before).toBe(8);
  } finally {
    child.stdin.end();
  }
  expect(await exited).toBe(0);
});

it('answers a bad line with an error and goes on; at the end of its input it finishes what is out, then exits', async () => {
  const { child, answers, exited } = serveProcess();
  child.stdin.write('not json\n');
  child.stdin.write(`${JSON.stringify({ id: 7, count: 2 })}\n`);
  child.stdin.write(`${JSON.stringify({ id: 8, url, count: -1 })}\n`);
  child.stdin.write(`${JSON.stringify({ id: 9, url: `${url}?slow`, count: 2 })}\n`);
  child.stdin.end();
  expect(await exited).toBe(0);
  const byId = new Map(answers.map((a) => [a.id, a]));
  expect(answers).toHaveLength(4);
  expect(byId.get(null)?.error).toMatch(/JSON/);
  expect(byId.get(7)?.error).toBe('url is required');
  expect(byId.get(8)?.error).toBe('count must be an integer >= 0, not -1');
  expect(byId.get(9)?.result?.ok).toBe(2);
});

it('a refused connection is an error of the batch, not of the process', async () => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const { child, answers, exited } = serveProcess();
  child.stdin.write(`${JSON.stringify({ id: 1, url: `http://127.0.0.1:${port}/`, count: 2, timeoutMs: 2000 })}\n`);
  child.stdin.write(`${JSON.stringify({ id: 2, url, count: 1 })}\n`);
  child.stdin.end();
  expect(await exited).toBe(0);
  const byId = new Map(answers.map((a) => [a.id, a.result]));
  expect({ errors: byId.get(1)?.errors, kinds: byId.get(1)?.errorKinds }).toEqual({ errors: 2, kinds: { ECONNREFUSED: 2 } });
  expect(byId.get(2)?.ok).toBe(1);
});

it('batchOptions: the defaults, concurrency within 1..count, and what it refuses', () => {
  expect(batchOptions({ url: 'http://10.200.1.10/json' })).toEqual({
    url: 'http://10.200.1.10/json', count: 1, concurrency: 1, keepAlive: false, timeoutMs: 5000, samples: false,
  });
  expect(batchOptions({ url: 'http://x/', count: '3', concurrency: 8 }).concurrency).toBe(3);
  expect(batchOptions({ url: 'http://x/', count: 0 }).concurrency).toBe(1);
  expect(() => batchOptions({ url: 'not a url' })).toThrow(/Invalid URL/);
  expect(() => batchOptions({ url: 'http://x/', concurrency: 0 })).toThrow('concurrency must be an integer >= 1, not 0');
  expect(() => batchOptions({ url: 'http://x/', timeoutMs: 1.5 })).toThrow('timeoutMs must be an integer >= 1, not 1.5');
});
