// lab compare's load generator: Debian's wrk (native C, one thread) driven by a Lua script,
// instead of a JavaScript client under TCG. The script keeps the per-request accounting: each
// answer's pod (from the pod server's {"pod": ...} body) is counted, and the thread stops after
// exactly the requested number of answers (wrk itself runs for a duration: the script then
// interrupts wrk's sleeping main thread with SIGINT, through LuaJIT's ffi). `Connection: close`
// when keep-alive is off: wrk then opens one connection per request, as curl in a loop does.
// done() prints one line: the counts, wrk's error counters and latency percentiles (wrk keeps a
// histogram of every request's latency, from the request's first byte written to the answer's
// last byte read: the TCP handshake is not in it). pure: no I/O.
import type { LoadSpec, ModeRun } from './types.js';

/** The quantiles (in %) the script reports; the chart draws the distribution from them. */
export const WRK_QUANTILES: readonly number[] = [
  ...Array.from({ length: 100 }, (_, i) => i + 0.5), 50, 95, 99,
];

/** The Lua script; `-- <requests>` is passed to init(). */
export const WRK_SCRIPT = `-- lab compare (lab/compare/wrk.ts): count answers per pod, stop after N
-- wrk's main thread sleeps for the whole -d duration; a SIGINT to the process (delivered to that
-- thread, the group leader) ends the sleep, as Ctrl-C would: sent once the last answer is counted.
local ffi = require("ffi")
ffi.cdef("int getpid(void); int kill(int pid, int sig);")
local limit = 0
local seen = 0
byPod = {}
bad = 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  limit = tonumber(args[1]) or 0
  if args[2] == "close" then wrk.headers["Connection"] = "close" end
end

function response(status, headers, body)
  seen = seen + 1
  if seen > limit then return end
  local pod = status == 200 and body and string.match(body, '"pod":"([^"]*)"')
  if pod then byPod[pod] = (byPod[pod] or 0) + 1 else bad = bad + 1 end
  if seen >= limit then
    wrk.thread:stop()
    ffi.C.kill(ffi.C.getpid(), 2)
  end
end

function done(summary, latency, requests)
  local pods = {}
  local nbad = 0
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("byPod") or {}) do pods[k] = (pods[k] or 0) + v end
    nbad = nbad + (t:get("bad") or 0)
  end
  local parts = {}
  for k, v in pairs(pods) do table.insert(parts, string.format('"%s":%d', k, v)) end
  local q = {}
  for _, p in ipairs({${WRK_QUANTILES.join(', ')}}) do
    table.insert(q, string.format('[%s,%d]', p, latency:percentile(p)))
  end
  local e = summary.errors
  io.write(string.format('WRK-RESULT {"requests":%d,"durationUs":%d,"bad":%d,"byPod":{%s},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"min":%d,"max":%d,"mean":%.1f,"stdev":%.1f,"q":[%s]}}\\n',
    summary.requests, summary.duration, nbad, table.concat(parts, ","),
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev, table.concat(q, ",")))
end
`;

/** wrk's arguments for one run against `url` with `script` (the file holding WRK_SCRIPT). */
export function wrkArgs(url: string, l: LoadSpec, script: string): string[] {
  // Generous duration: the script stops the thread after l.requests answers.
  const seconds = Math.max(60, Math.ceil((l.requests * l.timeoutMs) / 1000 / l.concurrency) + 30);
  return ['-t', '1', '-c', String(l.concurrency), '-d', `${seconds}s`, '--timeout', `${Math.ceil(l.timeoutMs / 1000)}s`,
    '-s', script, url, '--', String(l.requests), l.keepAlive ? 'keep-alive' : 'close'];
}

/** What one wrk run measured. */
export interface WrkResult {
  requests: number;
  durationUs: number;
  /** Answers that were not a pod's 200 {"pod": ...}. */
  bad: number;
  byPod: Record<string, number>;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  /** Latency in microseconds: min, max, mean, stdev, and [quantile %, value] pairs. */
  latencyUs: { min: number; max: number; mean: number; stdev: number; q: Array<[number, number]> };
}

/** The WRK-RESULT line of wrk's output; throws naming what is wrong when there is none. */
export function parseWrkOutput(stdout: string): WrkResult {
  const line = stdout.split('\n').find((l) => l.startsWith('WRK-RESULT '));
  if (!line) throw new Error(`wrk printed no WRK-RESULT line:\n${stdout.slice(-2000)}`);
  const r = JSON.parse(line.slice('WRK-RESULT '.length)) as WrkResult;
  if (!Number.isFinite(r.requests) || !r.latencyUs || !Array.isArray(r.latencyUs.q)) throw new Error(`wrk: malformed result ${line}`);
  return r;
}

/** The latency (ms) at quantile `p` % from a result's reported quantiles (nearest reported). */
export function quantileMs(r: WrkResult, p: number): number {
  const exact = r.latencyUs.q.find(([q]) => q === p);
  if (exact) return exact[1] / 1000;
  const near = [...r.latencyUs.q].sort((a, b) => Math.abs(a[0] - p) - Math.abs(b[0] - p))[0];
  return (near?.[1] ?? 0) / 1000;
}

/** A ModeRun from wrk's result: errors are wrk's error counters plus answers without a pod. */
export function toModeRun(profile: string, mode: string, rep: number, r: WrkResult, options?: Record<string, unknown>): ModeRun {
  const errorKinds: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.errors)) if (v > 0) errorKinds[k] = v;
  if (r.bad > 0) errorKinds['bad answer'] = r.bad;
  const ok = Object.values(r.byPod).reduce((a, b) => a + b, 0);
  const errors = Object.values(errorKinds).reduce((a, b) => a + b, 0);
  const ms = (us: number) => Math.round(us / 10) / 100;
  return {
    profile, mode, rep, ...(options ? { options } : {}), requests: ok + errors, ok, errors, errorKinds, byPod: r.byPod,
    latencyMs: { p50: ms(quantileMs(r, 50) * 1000), p95: ms(quantileMs(r, 95) * 1000), p99: ms(quantileMs(r, 99) * 1000), max: ms(r.latencyUs.max), mean: ms(r.latencyUs.mean) },
    durationMs: ms(r.durationUs),
    quantiles: r.latencyUs.q.filter(([q]) => !Number.isInteger(q)).map(([q, us]) => [q, ms(us)]),
  };
}
