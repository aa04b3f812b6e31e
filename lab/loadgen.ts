#!/usr/bin/env node
// Lab load generator: one process per batch of requests (process start-up costs ~1 s in the
// guest), run in a client netns by topology.ts's runLoad:
//   node dist/lab/loadgen.js --url http://10.200.1.10/ --count 30 [--concurrency 1]
//     [--keep-alive] [--timeout-ms 5000] [--samples]
// Prints one JSON LoadResult on stdout; with --samples it also carries every request's pod and
// latency (lab compare draws latency distributions from them). Responses are the pod servers'
// {"pod","peer"} bodies.
import { parseArgs } from 'node:util';
import { http } from '../src/util/node-http.js';
import { percentile } from './compare/stats.js';

// node:http through require(), as the operator loads it: an ES module import builds its facade,
// which loads undici (seconds per process in the guest, and runLoad starts one per batch).
const { Agent, request } = http;

export interface LoadResult {
  count: number;
  ok: number;
  errors: number;
  /** Error kinds (code or message, or `status <n>`) with their counts. */
  errorKinds: Record<string, number>;
  /**
   * The first 100 errors, each with when it came (ms from the start) and the client's local port:
   * through a VIP the client only sees the VIP, so the port is what finds the backend afterwards
   * (`ipvsadm -Lnc` on the client's node, or the backend's own record of the connections it cut).
   */
  errorDetails: Array<{ kind: string; atMs: number; localPort?: number }>;
  /** Answers per pod name. */
  byPod: Record<string, number>;
  /** Answers per peer address (port dropped) as the pods saw it. */
  byPeer: Record<string, number>;
  /** Pod names in answer order (only the first 10,000). */
  sequence: string[];
  latencyMs: { min: number; p50: number; p90: number; p95: number; p99: number; max: number; mean: number };
  durationMs: number;
  /** With --samples: [pod name ('' for an error), latency ms] per request, in completion order. */
  samples?: Array<[string, number]>;
}


const round = (n: number) => Math.round(n * 100) / 100;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      count: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '1' },
      'keep-alive': { type: 'boolean', default: false },
      'timeout-ms': { type: 'string', default: '5000' },
      samples: { type: 'boolean', default: false },
    },
  });
  if (!values.url) throw new Error('--url is required');
  const url = new URL(values.url);
  const count = Number(values.count);
  const concurrency = Math.max(1, Math.min(count, Number(values.concurrency)));
  const timeoutMs = Number(values['timeout-ms']);
  const agent = new Agent({ keepAlive: values['keep-alive'], maxSockets: concurrency });

  const result: LoadResult = {
    count, ok: 0, errors: 0, errorKinds: {}, errorDetails: [], byPod: {}, byPeer: {}, sequence: [],
    latencyMs: { min: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0, mean: 0 }, durationMs: 0,
  };
  const start = performance.now();
  const samples: Array<[string, number]> | undefined = values.samples ? [] : undefined;
  const latencies: number[] = [];
  const bump = (m: Record<string, number>, k: string) => { m[k] = (m[k] ?? 0) + 1; };
  const fail = (kind: string, t0: number, localPort?: number) => {
    result.errors++;
    bump(result.errorKinds, kind);
    if (result.errorDetails.length < 100) result.errorDetails.push({ kind, atMs: round(performance.now() - start), ...(localPort ? { localPort } : {}) });
    samples?.push(['', round(performance.now() - t0)]);
  };

  const one = () => new Promise<void>((done) => {
    const t0 = performance.now();
    let localPort: number | undefined;
    // Without keep-alive every request must be its own connection: Node's Agent would otherwise
    // hand a queued request the socket a finished one just freed, even with keepAlive false.
    const headers = values['keep-alive'] ? {} : { connection: 'close' };
    // The signal bounds the whole request, connect included (setTimeout below only sees an idle
    // socket, so an unanswered SYN would wait for the kernel's retries, about 2 minutes).
    const req = request(url, { agent, method: 'GET', headers, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('error', (e: NodeJS.ErrnoException) => { fail(e.code ?? e.message, t0, localPort); done(); });
      res.on('end', () => {
        latencies.push(performance.now() - t0);
        if (res.statusCode !== 200) {
          fail(`status ${res.statusCode}`, t0);
        } else {
          try {
            const parsed = JSON.parse(body) as { pod?: string; peer?: string };
            const pod = parsed.pod ?? '?';
            result.ok++;
            bump(result.byPod, pod);
            bump(result.byPeer, (parsed.peer ?? '?').replace(/:\d+$/, ''));
            if (result.sequence.length < 10_000) result.sequence.push(pod);
            samples?.push([pod, round(performance.now() - t0)]);
          } catch {
            fail('bad body', t0);
          }
        }
        done();
      });
    });
    // (A destroyed socket no longer knows its port: keep it from the connect.)
    req.on('socket', (s) => s.once('connect', () => { localPort = s.localPort; }));
    req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (e: NodeJS.ErrnoException) => { fail(e.code ?? e.message, t0, localPort); done(); });
    req.end();
  });

  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  result.durationMs = round(performance.now() - start);
  agent.destroy();
  const sorted = latencies.sort((a, b) => a - b);
  if (sorted.length) {
    result.latencyMs = {
      min: round(sorted[0] ?? 0), p50: round(percentile(sorted, 0.5)), p90: round(percentile(sorted, 0.9)),
      p95: round(percentile(sorted, 0.95)), p99: round(percentile(sorted, 0.99)), max: round(sorted[sorted.length - 1] ?? 0),
      mean: round(sorted.reduce((a, b) => a + b, 0) / sorted.length),
    };
  }
  if (samples) result.samples = samples;
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`loadgen: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(2);
});
