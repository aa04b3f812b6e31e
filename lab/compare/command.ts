// `ipvs-operator lab compare` on the host: validates the flags, boots the lab VM and runs the
// guest side (guest.ts) from the built JS in it, then renders what it measured: the table on
// stdout and in table.txt, results.json, chart.svg and chart.png in the results directory.
// `--render FILE` re-renders an earlier results.json without a VM.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectRoot } from '../paths.js';
import { runInVm } from '../vm.js';
import { renderChart } from './chart.js';
import { CompareUsageError, int, parseCompareFlags } from './flags.js';
import { renderPng } from './png.js';
import { renderTables } from './table.js';
import type { CompareResults } from './types.js';

const GUEST = fileURLToPath(new URL('./guest.js', import.meta.url));

/** Runs the command; resolves to the exit code (the VM's when it failed). */
export async function compareCommand(v: Record<string, string | boolean | undefined>): Promise<number> {
  const out = resolve(String(v.out));
  if (typeof v.render === 'string') {
    return renderOutputs(JSON.parse(readFileSync(resolve(v.render), 'utf8')) as CompareResults, out);
  }
  const spec = parseCompareFlags(v);
  const timeoutMs = int(v.timeout, 'timeout', 60, 6 * 3600) * 1000;
  if (!existsSync(GUEST)) throw new Error(`${GUEST} is missing: build first (npm run build)`);
  mkdirSync(out, { recursive: true });
  const resultsFile = join(out, 'results.json');
  rmSync(resultsFile, { force: true });
  const rel = relative(projectRoot, resultsFile);
  if (rel.startsWith('..')) throw new CompareUsageError(`--out must be inside the project (${projectRoot}): the VM writes there`);
  process.stdout.write(`lab compare: ${spec.backends} backends, profiles ${spec.profiles}, modes ${spec.modes}, ` +
    `${spec.load.requests} requests x ${spec.load.concurrency} concurrent${spec.load.keepAlive ? ', keep-alive' : ''}, ` +
    `${spec.reps} run(s) each, interleaved${spec.baseline ? ', after a zero-delay baseline' : ''}; booting the lab VM\n`);
  const code = await runInVm({
    command: [process.execPath, GUEST, '--spec', JSON.stringify(spec), '--out', resultsFile],
    cwd: projectRoot, timeoutMs, memoryMb: 3072,
  });
  if (code !== 0) return code;
  if (!existsSync(resultsFile)) {
    process.stderr.write(`lab compare: the guest wrote no ${rel}\n`);
    return 1;
  }
  return renderOutputs(JSON.parse(readFileSync(resultsFile, 'utf8')) as CompareResults, out);
}

/** Writes table.txt, chart.svg, chart.png (and results.json when missing) into `out`; prints the table. */
export function renderOutputs(r: CompareResults, out: string): number {
  mkdirSync(out, { recursive: true });
  const table = renderTables(r);
  const svg = renderChart(r);
  writeFileSync(join(out, 'table.txt'), table);
  writeFileSync(join(out, 'chart.svg'), svg);
  writeFileSync(join(out, 'chart.png'), renderPng(svg));
  if (!existsSync(join(out, 'results.json'))) writeFileSync(join(out, 'results.json'), `${JSON.stringify(r)}\n`);
  process.stdout.write(`\n${table}\nwrote ${['results.json', 'table.txt', 'chart.svg', 'chart.png'].map((f) => join(out, f)).join(', ')}\n`);
  return 0;
}
