#!/usr/bin/env node
// Whether dist/ is current, for `npm run cluster`, which otherwise runs tsc (about 7 s) on every
// call: exits 0 when dist/ was built after the last change to anything tsc reads (the .ts and
// .json files under src/, lab/, test/, bench/ and plugins/, and tsconfig.json), 1 when it was not or
// was never built. "Built" is the later of tsc's own dist/.tsbuildinfo and dist/.built, which
// the script touches after its build (tsc leaves .tsbuildinfo alone when nothing it emits changed,
// so a source saved unchanged would otherwise rebuild on every call). Runs from dist/ itself: when
// dist/ is missing, node fails to start it, which is also exit 1.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from './paths.js';

const SOURCES = ['src', 'lab', 'test', 'bench', 'plugins'];

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
  const built = Math.max(mtime(join(root, 'dist', '.tsbuildinfo')), mtime(join(root, 'dist', '.built')));
  if (built === 0) return false;
  const inputs = Math.max(mtime(join(root, 'tsconfig.json')), ...SOURCES.map((d) => newest(join(root, d))));
  return inputs < built;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exit(distIsFresh(projectRoot) ? 0 : 1);
}
