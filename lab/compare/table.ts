// The results table of lab compare: the zero-delay baseline, then per profile one row per mode
// with the answers per backend and p50/p95/p99 latency, each the median over the repetitions with
// its min-max interval, the errors, and the differences larger than the spread. pure: no I/O.
import { type ModeSummary, calloutDifferences, formatSpread, spread, summarizeRuns } from './stats.js';
import { type CompareResults, type ModeRun, type Profile, DOMINANCE } from './types.js';

/** The profile's heading: its backends' service times. */
function profileHeading(p: Profile, r: CompareResults): string {
  return `profile ${p.name}: ${p.summary} (${r.backends.map((b, i) => `${b.name} ${describe(p, i)}`).join(', ')})`;
}

function describe(p: Profile, i: number): string {
  const b = p.backends[i];
  if (!b) return '?';
  return b.stallEveryMs > 0 && b.stallMs > 0 ? `${b.delayMs} ms + stall ${b.stallMs}/${b.stallEveryMs} ms` : `${b.delayMs} ms`;
}

/** Each mode's summary over its repetitions under profile `p`, modes in `order`, missing ones left out. */
export function profileSummaries(r: CompareResults, p: Profile, order: readonly string[] = r.modes): ModeSummary[] {
  const names = r.backends.map((b) => b.name);
  return order
    .map((m) => r.runs.filter((x) => x.profile === p.name && x.mode === m))
    .filter((runs) => runs.length > 0)
    .map((runs) => summarizeRuns(runs, names));
}

function rows(summaries: readonly ModeSummary[], names: readonly string[], label = (s: ModeSummary) => s.mode): string[] {
  const cells = summaries.map((s) => [label(s), ...names.map((n) => formatSpread(s.byPod[n]!)),
    formatSpread(s.p50), formatSpread(s.p95), formatSpread(s.p99), String(s.errors)]);
  const head = ['mode', ...names, 'p50 ms', 'p95 ms', 'p99 ms', 'errors'];
  const w = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(w[i]!) : v.padStart(w[i]!))).join('  ');
  return [line(head), ...cells.map(line)];
}

/** One table (text lines) for one profile, with the differences larger than the spread after it. */
export function renderProfileTable(r: CompareResults, p: Profile, order: readonly string[] = r.modes): string[] {
  const names = r.backends.map((b) => b.name);
  const summaries = profileSummaries(r, p, order);
  const out = [profileHeading(p, r), ...rows(summaries, names)];
  if ((r.reps ?? 1) > 1 && summaries.length > 1) {
    const diffs = calloutDifferences(summaries, names);
    out.push(diffs.length
      ? `differences larger than the spread (intervals apart): ${diffs.join('; ')}`
      : 'no difference larger than the spread: every interval overlaps its reference\'s');
  }
  return out;
}

/** The baseline's lines: its row and whether the backend times dominate the harness's own. */
export function renderBaseline(r: CompareResults): string[] {
  const b = r.baseline;
  if (!b || !b.runs.length) return [];
  const names = r.backends.map((x) => x.name);
  const s = summarizeRuns(b.runs, names);
  const p50 = spread(b.runs.map((x) => x.latencyMs.p50));
  return [
    `baseline: every backend 0 ms, through ${b.mode}, ${b.runs.length} run(s): the harness's own time per request`,
    ...rows([s], names, () => 'baseline'),
    `profiles scaled to it: unit ${b.unitMs} ms (the fast backend's service time; ${DOMINANCE}x the baseline p50 ${formatSpread(p50)} ms, at least 20)`,
    b.dominates
      ? `backend times dominate: the fast backend's ${b.unitMs} ms is >= ${DOMINANCE}x the harness's p50`
      : `WARNING: backend times do NOT dominate: the harness's p50 ${b.p50Ms} ms is more than a ${DOMINANCE}th of the fast backend's ${b.unitMs} ms (capped); latency differences mostly measure the emulator`,
  ];
}

/** Every profile's table, with a header line naming the load; the text `lab compare` prints. */
export function renderTables(r: CompareResults): string {
  const l = r.load;
  const reps = r.reps ?? 1;
  const out = [
    `${l.requests} requests per run, ${l.concurrency === 1 ? 'sequential' : `${l.concurrency} concurrent`}, ` +
    `keep-alive ${l.keepAlive ? 'on' : 'off'}; ${reps} run(s) per mode and profile, interleaved; ` +
    `VIP ${r.vip}:${r.port}, ${r.backends.length} backends; kernel ${r.kernel}${r.loadgen ? `; load by ${r.loadgen}` : ''}`,
  ];
  if (reps > 1) out.push('each figure: median over the runs [min-max of the runs]; answers per backend are counts per run');
  const wrr = r.runs.filter((x: ModeRun) => x.mode === 'wrr' && x.options);
  if (wrr.length) out.push('wrr weights follow each profile\'s backend speeds; every other scheduler runs with equal weights');
  const base = renderBaseline(r);
  if (base.length) out.push('', ...base);
  for (const p of r.profiles) out.push('', ...renderProfileTable(r, p));
  return `${out.join('\n')}\n`;
}
