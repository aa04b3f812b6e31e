// One batch of the lab's load generator (lab/loadgen.ts runs it from its command line or from its
// --serve input): HTTP requests to one URL, so many at once, each counted by the pod that answered.
import { http } from '../src/util/node-http.js';
import { percentile } from './compare/stats.js';

// node:http through require(), as the operator loads it: an ES module import builds its facade,
// which loads undici (seconds per process in the guest).
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

/** One batch's parameters (the command line's, or one line of --serve). */
export interface BatchOptions {
  url: string;
  count: number;
  /** Requests in flight at once (at least 1, at most count). */
  concurrency: number;
  keepAlive: boolean;
  timeoutMs: number;
  samples: boolean;
}

/** Checks a batch's parameters, whether from flags or from a --serve line. */
export function batchOptions(v: Record<string, unknown>): BatchOptions {
  const int = (k: string, d: number, min: number) => {
    const n = v[k] === undefined ? d : Number(v[k]);
    if (!Number.isInteger(n) || n < min) throw new Error(`${k} must be an integer >= ${min}, not ${JSON.stringify(v[k])}`);
    return n;
  };
  if (typeof v.url !== 'string' || v.url === '') throw new Error('url is required');
  const url = new URL(v.url).href;
  const count = int('count', 1, 0);
  return {
    url, count, concurrency: Math.max(1, Math.min(count, int('concurrency', 1, 1))), keepAlive: v.keepAlive === true,
    timeoutMs: int('timeoutMs', 5000, 1), samples: v.samples === true,
  };
}

/** Sends one batch of requests and counts what answered. */
export async function runBatch(o: BatchOptions): Promise<LoadResult> {
  const { count, concurrency, timeoutMs } = o;
  const url = new URL(o.url);
  const agent = new Agent({ keepAlive: o.keepAlive, maxSockets: concurrency });

  const result: LoadResult = {
    count, ok: 0, errors: 0, errorKinds: {}, errorDetails: [], byPod: {}, byPeer: {}, sequence: [],
    latencyMs: { min: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0, mean: 0 }, durationMs: 0,
  };
  const start = performance.now();
  const samples: Array<[string, number]> | undefined = o.samples ? [] : undefined;
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
    const headers = o.keepAlive ? {} : { connection: 'close' };
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
  return result;
}
