// The progress line lab compare prints after each step. pure: no I/O.
import type { Progress } from './lab.js';

const clock = (ms: number) => {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

/** `[ 3/36] ███░░░░ one-slow   lc     600 ok  p99 231 ms  0:42 elapsed, ~7:10 left`. */
export function formatProgress(p: Progress, elapsedMs: number): string {
  const width = 16;
  const done = Math.round((width * p.step) / p.total);
  const bar = '#'.repeat(done) + '.'.repeat(width - done);
  const left = p.step < p.total ? `, ~${clock((elapsedMs / p.step) * (p.total - p.step))} left` : '';
  const r = p.run;
  const what = r ? `${String(r.ok).padStart(5)} ok${r.errors ? ` ${r.errors} err` : ''}  p99 ${r.latencyMs.p99.toFixed(0)} ms` : '';
  const mode = r?.rep ? `${p.mode} #${r.rep}` : p.mode;
  return `[${String(p.step).padStart(String(p.total).length)}/${p.total}] ${bar} ${p.profile.padEnd(13)} ${mode.padEnd(17)} ${what}  ` +
    `${clock(elapsedMs)} elapsed${left}`;
}
