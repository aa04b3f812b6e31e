#!/usr/bin/env node
// The guest side of `ipvs-operator lab compare`, run in the lab VM by the host command:
//   node dist/lab/compare/guest.js --spec '<GuestSpec JSON>' --out <results.json>
// Measures (lab/compare/lab.ts), prints one progress line per step, writes the results JSON.
// Rendering (table, SVG, PNG) happens on the host, where JavaScript runs ~26x faster.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { type Progress, runCompare } from './lab.js';
import { formatProgress } from './progress.js';
import type { GuestSpec } from './flags.js';
import { parseModes, parseProfiles } from './types.js';

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { spec: { type: 'string' }, out: { type: 'string' } } });
  if (!values.spec || !values.out) throw new Error('usage: guest.js --spec JSON --out FILE');
  const spec = JSON.parse(values.spec) as GuestSpec;
  const started = Date.now();
  const results = await runCompare({
    backends: spec.backends,
    // A fixed unit when asked for; otherwise the unit the baseline calls for (scaleUnit).
    profiles: spec.unitMs !== undefined ? parseProfiles(spec.profiles, spec.backends, spec.unitMs)
      : (unitMs: number) => parseProfiles(spec.profiles, spec.backends, unitMs),
    modes: parseModes(spec.modes),
    load: spec.load,
    reps: spec.reps,
    baseline: spec.baseline,
    onProgress: (p: Progress) => {
      if (p.run) process.stdout.write(`${formatProgress(p, Date.now() - started)}\n`);
    },
  });
  mkdirSync(dirname(values.out), { recursive: true });
  writeFileSync(values.out, `${JSON.stringify(results)}\n`);
  return 0;
}

main().then((code) => { process.exitCode = code; }, (e: unknown) => {
  process.stderr.write(`lab compare (guest): ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exitCode = 1;
});
