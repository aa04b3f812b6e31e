// `npm test`: the lab's host packages (`lab prepare`), the unit tests on the host, then the
// kernel tests in the lab VM, then the lab cluster's scenarios in a second VM boot, then one plain
// closing line `tests: N passed, N failed, N skipped` summed from the jest runs' JSON results.
// Exits non-zero when any test failed or either run did not complete.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const results = join(root, '.cache', 'results');
mkdirSync(results, { recursive: true });

interface JestJson {
  numPassedTests: number; numFailedTests: number; numPendingTests: number; numTotalTestSuites: number; numFailedTestSuites: number;
  testResults?: Array<{ name: string; message?: string; assertionResults?: Array<{ status: string; fullName: string; failureMessages?: string[] }> }>;
}

// Each failed test, or a file that failed outside its tests, as one line with the start of its
// message: printed again last, so that the end of a long log names what failed.
function failures(name: string, json: JestJson): string[] {
  const lines: string[] = [];
  const firstLine = (m: string | undefined): string =>
    (m ?? '').replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '').split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 8).join(' | ').slice(0, 600);
  for (const file of json.testResults ?? []) {
    const failed = (file.assertionResults ?? []).filter((a) => a.status === 'failed');
    for (const a of failed) lines.push(`${name}: FAILED ${a.fullName}: ${firstLine(a.failureMessages?.[0])}`);
    if (failed.length === 0 && file.message) lines.push(`${name}: FAILED file ${file.name.replace(root + '/', '')}: ${firstLine(file.message)}`);
  }
  return lines;
}

function run(name: string, cmd: string[]): { code: number; json?: JestJson } {
  const out = join(results, `${name}.json`);
  rmSync(out, { force: true });
  const r = spawnSync(cmd[0]!, [...cmd.slice(1), '--json', `--outputFile=${out}`], { cwd: root, stdio: 'inherit' });
  const code = r.status ?? 1;
  return existsSync(out) ? { code, json: JSON.parse(readFileSync(out, 'utf8')) as JestJson } : { code };
}

const only = process.argv[2];
// The host packages first (lab/host.ts): the unit project's etcd tests need Debian's etcd, which
// a fresh machine has only after `lab prepare`; without it they would be counted as skipped.
if (!only || only === 'unit') {
  const prep = spawnSync(process.execPath, ['dist/lab/cli.js', 'prepare'], { cwd: root, stdio: 'inherit' });
  if (prep.status !== 0) console.error(`lab prepare exited ${prep.status ?? prep.signal}: tests that need the lab's host packages will say so`);
}
const runs: Array<[string, string[]]> = [
  ['unit', [process.execPath, '--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--selectProjects', 'unit']],
  ['kernel', [process.execPath, 'dist/lab/cli.js', 'test']],
  // The multi-node lab cluster (test/cluster/): its own VM boot, one jest file, in band.
  ['cluster', [process.execPath, 'dist/lab/cli.js', 'run', '--timeout', '2400', '--memory', '3072', '--', process.execPath,
    '--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--selectProjects', 'cluster', '--runInBand', '--testTimeout=1200000']],
];
let passed = 0;
let failed = 0;
let skipped = 0;
let broken = false;
const failedLines: string[] = [];
for (const [name, cmd] of runs) {
  if (only && only !== name) continue;
  const t0 = Date.now();
  const { code, json } = run(name, cmd);
  const wall = `${Math.round((Date.now() - t0) / 1000)} s wall`;
  if (!json) {
    console.error(`${name} tests: no results (exit code ${code}) after ${wall}`);
    broken = true;
    continue;
  }
  console.log(`${name}: ${json.numPassedTests} passed, ${json.numFailedTests} failed, ${json.numPendingTests} skipped` +
    ` in ${json.numTotalTestSuites} files, ${wall}`);
  passed += json.numPassedTests;
  failed += json.numFailedTests;
  skipped += json.numPendingTests;
  failedLines.push(...failures(name, json));
  if (code !== 0 || json.numFailedTestSuites > 0) broken = true;
}
for (const line of failedLines) console.log(line);
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exitCode = broken || failed > 0 || passed === 0 ? 1 : 0;
