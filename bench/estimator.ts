// IPVS's rate estimator as kernels before 6.2 run it (the lab VM's 6.1 among them): a timer walks
// every virtual and real server's estimator each 2 s in softirq context, holding est_lock, which
// adding or removing a server takes too (ip_vs_start_estimator). At 30 000 Services x 10 that is
// 396 000 estimators: the CPU the timer fires on stops for the walk, and a change's add or remove
// waits for it. net.ipv4.vs.run_estimation = 0 stops the walk (the kernel's rates then read 0; the
// counters the operator reads still count). The bench probes the stalls with bench/stall-probe.c
// with the estimator on and off, and times a second series of changes with it off: how much of a
// slow change is the kernel's timer and not ours.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { run } from '../src/util/proc.js';
import { compareKernel } from '../plugins/availability.js';

export const RUN_ESTIMATION = '/proc/sys/net/ipv4/vs/run_estimation';

/** Whether the kernel runs its rate estimator; undefined when it has no such sysctl. */
export function estimationOn(): boolean | undefined {
  if (!existsSync(RUN_ESTIMATION)) return undefined;
  return readFileSync(RUN_ESTIMATION, 'utf8').trim() !== '0';
}

export function setEstimation(on: boolean): void {
  writeFileSync(RUN_ESTIMATION, on ? '1\n' : '0\n');
}

/** A time the probe's loop did not run on its CPU. */
export interface Stall {
  cpu: number;
  /** From the probe's start. */
  atMs: number;
  ms: number;
}

/** What the probes of every CPU saw, run at once. */
export interface StallProbe {
  seconds: number;
  thresholdMs: number;
  stalls: Stall[];
  /** Per CPU, in CPU order: the stalls' count and their sum. */
  perCpu: Array<{ cpu: number; count: number; totalMs: number }>;
  worstMs: number;
}

/** One CPU's probe output (bench/stall-probe.c). Throws on a line it does not know, or without its done line. */
export function parseStallProbe(text: string): { cpu: number; stalls: Stall[]; totalMs: number } {
  const stalls: Stall[] = [];
  let done: { cpu: number; count: number; totalMs: number } | undefined;
  for (const line of text.split('\n').filter((l) => l.trim())) {
    const f = line.trim().split(/\s+/);
    const nums = f.slice(1).map(Number);
    if (f[0] === 'gap' && f.length === 4 && nums.every(Number.isFinite)) {
      stalls.push({ cpu: nums[0]!, atMs: nums[1]!, ms: nums[2]! });
    } else if (f[0] === 'done' && f.length === 4 && nums.every(Number.isFinite)) {
      done = { cpu: nums[0]!, count: nums[1]!, totalMs: nums[2]! };
    } else {
      throw new Error(`stall probe: a line it does not print: ${JSON.stringify(line)}`);
    }
  }
  if (!done) throw new Error('stall probe: no done line (it did not finish)');
  if (done.count !== stalls.length) throw new Error(`stall probe: ${stalls.length} gaps printed, ${done.count} counted`);
  return { cpu: done.cpu, stalls, totalMs: done.totalMs };
}

/** The probes of every CPU in one summary. */
export function summarizeStalls(
  runs: ReadonlyArray<{ cpu: number; stalls: Stall[]; totalMs: number }>, seconds: number, thresholdMs: number,
): StallProbe {
  const sorted = [...runs].sort((a, b) => a.cpu - b.cpu);
  const stalls = sorted.flatMap((r) => r.stalls);
  return {
    seconds, thresholdMs, stalls,
    perCpu: sorted.map((r) => ({ cpu: r.cpu, count: r.stalls.length, totalMs: r.totalMs })),
    worstMs: stalls.reduce((m, s) => Math.max(m, s.ms), 0),
  };
}

/**
 * Runs the probe (`binary`) on CPUs 0..cpus-1 at once for `seconds` (src/util/proc.ts's run); a
 * probe still running 30 s after its time is killed and fails the whole.
 */
export async function probeStalls(binary: string, cpus: number, seconds: number, thresholdMs: number): Promise<StallProbe> {
  if (!existsSync(binary)) throw new Error(`no stall probe at ${binary} (bench/run.ts builds it with gcc)`);
  const one = async (cpu: number): Promise<string> => {
    const r = await run(binary, [String(cpu), String(seconds), String(thresholdMs)], { timeout: seconds * 1000 + 30_000 });
    if (r.code !== 0) throw new Error(`stall probe on CPU ${cpu} exited with ${r.code}: ${r.stderr}`);
    return r.stdout;
  };
  const outs = await Promise.all(Array.from({ length: cpus }, (_, cpu) => one(cpu)));
  return summarizeStalls(outs.map(parseStallProbe), seconds, thresholdMs);
}

/** One line on a probe: "N stalls over T ms in S s (worst W ms; per CPU: ...)". */
export function describeStalls(p: StallProbe): string {
  const per = p.perCpu.map((c) => `CPU ${c.cpu} ${c.count} / ${c.totalMs.toFixed(0)} ms`).join(', ');
  return `${p.stalls.length} stalls over ${p.thresholdMs} ms in ${p.seconds} s (worst ${p.worstMs.toFixed(0)} ms; per CPU: ${per})`;
}

/** The guest report's `estimator` at one size (bench/guest.ts). */
export interface EstimatorRun {
  probeOn: StallProbe;
  probeOff: StallProbe;
  changesOff: { count: number; exactlyOneOp: boolean; p50: number; p99: number; max: number };
}

/**
 * The report's paragraph on the estimator at `services`. `on`: the changes' p99 with it on, as a
 * node runs, and without each kind's first change (the series with it off comes after, warm).
 */
export function estimatorParagraph(
  services: number, e: EstimatorRun | undefined, on: { p99: number; warmP99?: number }, kernel = '',
): string[] {
  if (!e) return [];
  const ms = (x: number): string => `${x.toFixed(x < 10 ? 1 : 0)} ms`;
  const c = e.changesOff;
  const how = compareKernel(kernel, '6.2') >= 0
    ? `kernel ${kernel}: since 6.2 kernel threads estimate, a share of the servers each 40 ms`
    : `kernel ${kernel || 'unknown'}: kernels before 6.2 walk every server's estimator each 2 s in a timer, ` +
      'under the lock a server\'s add or remove takes';
  return ['', `The kernel's rate estimator at ${services} Services (${how}; bench/estimator.ts): a busy loop on each CPU ` +
    `(bench/stall-probe.c) saw ${describeStalls(e.probeOn)} with it on, as a node runs; ${describeStalls(e.probeOff)} ` +
    `with net.ipv4.vs.run_estimation = 0. The same kind of changes again with it off: ${c.count} changes, ` +
    `ops ${c.exactlyOneOp ? 'exactly 1 per virtual server' : 'NOT 1 per virtual server'}, p50 ${ms(c.p50)}, ` +
    `p99 ${ms(c.p99)} (${c.p99 <= 50 ? 'meets' : 'falls short of'} the guest's 50 ms), against ${ms(on.p99)} with it on` +
    `${on.warmP99 === undefined ? '' : ` (${ms(on.warmP99)} without each kind's first change, as this series runs: after them)`}.`];
}
