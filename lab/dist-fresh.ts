#!/usr/bin/env node
// Whether dist/ is current, for `npm run cluster`, which otherwise runs tsc (about 7 s) on every
// call: exits 0 when dist/ was built after the last change to anything tsc reads (the .ts and
// .json files under src/, lab/, test/, bench/ and plugins/, the projects' tsconfig files among
// them, and tsconfig.json and tsconfig.base.json), 1 when it was not or was never built. "Built"
// is the latest of tsc's own build-info files (dist/.tsbuildinfo, dist/lab.tsbuildinfo, ...: one
// per project) and dist/.built, which the script touches after its build (tsc leaves a build-info
// file alone when nothing it emits changed, so a source saved unchanged would otherwise rebuild on
// every call). Runs from dist/ itself: when dist/ is missing, node fails to start it, which is
// also exit 1.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from './paths.js';

const SOURCES = ['src', 'lab', 'test', 'bench', 'plugins'];
/** The tsconfig files at the top: the list of projects and the options they share. */
const CONFIGS = ['tsconfig.json', 'tsconfig.base.json'];

/** The latest modification time (ms) of the files under `dir` whose names end in .ts or .json; 0 if none. */
function newest(dir: string): number {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (/\.(ts|json)$/.test(e.name)) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

const mtime = (p: string): number => statSync(p, { throwIfNoEntry: false })?.mtimeMs ?? 0;

/** Whether dist/ under `root` is newer than every input of tsc (see the file comment). */
export function distIsFresh(root: string): boolean {
  const dist = join(root, 'dist');
  const stamps = existsSync(dist) ? readdirSync(dist).filter((f) => f.endsWith('tsbuildinfo') || f === '.built') : [];
  const built = Math.max(0, ...stamps.map((f) => mtime(join(dist, f))));
  if (built === 0) return false;
  const inputs = Math.max(...CONFIGS.map((f) => mtime(join(root, f))), ...SOURCES.map((d) => newest(join(root, d))));
  return inputs < built;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exit(distIsFresh(projectRoot) ? 0 : 1);
}
