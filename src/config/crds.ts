// Reads the CRDs shipped in crds/ (relative to the package root, wherever the compiled code runs
// from), apart from load.ts so that lab/gen-validators.ts, which compiles one ahead of time into
// validators.gen.ts, does not load the file it writes.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** The directory holding crds/: the nearest ancestor of this module that has crds/<file>. Throws when none has. */
export function crdsDir(file = 'ipvsproxyconfigs.yaml'): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'crds', file))) return join(dir, 'crds');
    const up = dirname(dir);
    if (up === dir) throw new Error(`crds/${file} not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

/** Every CRD the project ships in crds/, by plural. */
export const PROJECT_CRDS = ['ipvsproxyconfigs', 'ipvsnodestates', 'ipvsloadreports', 'ipvsserviceweights'] as const;

/** A CRD from crds/ by its plural, parsed. Throws when missing. */
export function readCrd(name: (typeof PROJECT_CRDS)[number]): unknown {
  const file = `${name}.yaml`;
  return parse(readFileSync(join(crdsDir(file), file), 'utf8'));
}
