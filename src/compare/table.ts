// The results table of lab compare: per profile, one row per mode with requests per backend and
// their share, p50/p95/p99 latency and errors. pure: no I/O.
import type { CompareResults, ModeRun, Profile } from './types.js';

const fmtMs = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

/** The profile's heading: its backends' service times. */
function profileHeading(p: Profile, r: CompareResults): string {
  return `profile ${p.name}: ${p.summary} (${r.backends.map((b, i) => `${b.name} ${describe(p, i)}`).join(', ')})`;
}

function describe(p: Profile, i: number): string {
  const b = p.backends[i];
  if (!b) return '?';
  return b.stallEveryMs > 0 && b.stallMs > 0 ? `${b.delayMs} ms + stall ${b.stallMs}/${b.stallEveryMs} ms` : `${b.delayMs} ms`;
}

/** One table (text lines) for one profile; modes in `order`, missing runs left out. */
export function renderProfileTable(r: CompareResults, p: Profile, order: readonly string[] = r.modes): string[] {
  const runs = order.map((m) => r.runs.find((x) => x.profile === p.name && x.mode === m)).filter((x): x is ModeRun => !!x);
  const names = r.backends.map((b) => b.name);
  const modeW = Math.max(4, ...runs.map((x) => x.mode.length));
  const cellW = Math.max(12, ...names.map((n) => n.length));
  const head = [
    'mode'.padEnd(modeW),
    ...names.map((n) => n.padStart(cellW)),
    'p50 ms'.padStart(8), 'p95 ms'.padStart(8), 'p99 ms'.padStart(8), 'errors'.padStart(7),
  ].join('  ');
  const rows = runs.map((x) => {
    const total = Math.max(1, x.ok);
    const cells = names.map((n) => {
      const c = x.byPod[n] ?? 0;
      return `${String(c).padStart(5)} ${`${((100 * c) / total).toFixed(1)}%`.padStart(6)}`.padStart(cellW);
    });
    return [x.mode.padEnd(modeW), ...cells,
      fmtMs(x.latencyMs.p50).padStart(8), fmtMs(x.latencyMs.p95).padStart(8), fmtMs(x.latencyMs.p99).padStart(8),
      String(x.errors).padStart(7)].join('  ');
  });
  return [profileHeading(p, r), head, ...rows];
}

/** Every profile's table, with a header line naming the load; the text `lab compare` prints. */
export function renderTables(r: CompareResults): string {
  const l = r.load;
  const out = [
    `${l.requests} requests per mode and profile, ${l.concurrency === 1 ? 'sequential' : `${l.concurrency} concurrent`}, ` +
    `keep-alive ${l.keepAlive ? 'on' : 'off'}; VIP ${r.vip}:${r.port}, ${r.backends.length} backends; kernel ${r.kernel}`,
  ];
  const wrr = r.runs.filter((x) => x.mode === 'wrr' && x.options);
  if (wrr.length) out.push('wrr weights follow each profile\'s backend speeds; every other scheduler runs with equal weights');
  for (const p of r.profiles) out.push('', ...renderProfileTable(r, p));
  return `${out.join('\n')}\n`;
}
