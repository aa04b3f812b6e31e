// `npm run cluster` builds only when dist/ is older than a tsc input (lab/dist-fresh.ts).
import { describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { distIsFresh } from '../../../lab/dist-fresh.js';

/** A project tree with each file at its time (seconds since the epoch). */
function tree(files: Record<string, number>): string {
  const root = mkdtempSync(join(tmpdir(), 'dist-fresh-'));
  for (const [f, t] of Object.entries(files)) {
    mkdirSync(dirname(join(root, f)), { recursive: true });
    writeFileSync(join(root, f), '');
    utimesSync(join(root, f), t, t);
  }
  return root;
}

describe('distIsFresh', () => {
  const sources = { 'tsconfig.json': 100, 'tsconfig.base.json': 100, 'lab/tsconfig.json': 100, 'src/a/b.ts': 200, 'test/unit/x.test.ts': 150, 'bench/run.ts': 120, 'plugins/p.ts': 130, 'lab/cluster/o.json': 190 };
  it.each([
    ['built after every input', { ...sources, 'dist/.tsbuildinfo': 300 }, true],
    ['never built', sources, false],
    ['a source changed since', { ...sources, 'dist/.tsbuildinfo': 180 }, false],
    ['an imported JSON changed since', { ...sources, 'lab/cluster/o.json': 400, 'dist/.tsbuildinfo': 300 }, false],
    ['tsconfig.json changed since', { ...sources, 'tsconfig.json': 400, 'dist/.tsbuildinfo': 300 }, false],
    ['the shared options changed since', { ...sources, 'tsconfig.base.json': 400, 'dist/.tsbuildinfo': 300 }, false],
    ["a project's tsconfig changed since", { ...sources, 'lab/tsconfig.json': 400, 'dist/.tsbuildinfo': 300 }, false],
    ['a later project built after every input', { ...sources, 'dist/.tsbuildinfo': 180, 'dist/test.tsbuildinfo': 300 }, true],
    ['a test changed since', { ...sources, 'test/unit/x.test.ts': 400, 'dist/.tsbuildinfo': 300 }, false],
    ['rebuilt with nothing to emit: the .built stamp counts', { ...sources, 'src/a/b.ts': 400, 'dist/.tsbuildinfo': 300, 'dist/.built': 500 }, true],
    ['other files (docs, the README) do not count', { ...sources, 'dist/.tsbuildinfo': 300, 'lab/README.md': 400, 'docs/x.md': 400 }, true],
  ])('%s', (_, files, fresh) => {
    const root = tree(files);
    try {
      expect(distIsFresh(root)).toBe(fresh);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
