// Where the lab keeps its files: the project root (found from this module's own location, so it
// works from src/ via ts tooling and from dist/ as emitted JS) and the gitignored cache.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT_NAME = 'ipvs-operator';

function findProjectRoot(start: string): string {
  let dir = start;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        const parsed = JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown };
        if (parsed.name === PROJECT_NAME) return dir;
      } catch {
        // not ours: keep walking up
      }
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`lab: cannot find the ${PROJECT_NAME} project root above ${start}`);
    dir = parent;
  }
}

/** Absolute path of the project (the directory holding package.json). */
export const projectRoot: string = findProjectRoot(dirname(fileURLToPath(import.meta.url)));

/** The lab's cache: kernel, initramfs, per-run directories. `.cache/` is gitignored. */
export const labCacheDir: string = resolve(projectRoot, '.cache', 'lab');
