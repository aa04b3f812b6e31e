// The validators compiled ahead of time (plugins/validators.gen.ts, src/config/validators.gen.ts)
// are what lab/gen-validators.ts writes from the schemas as they are now: a schema changed without
// `npm run gen:validators` fails here, not on a node that validates with the old one.
import { describe, expect, it, jest } from '@jest/globals';
import { Ajv } from 'ajv';
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { GENERATED } from '../../../lab/gen-validators.js';
import { projectRoot } from '../../../lab/paths.js';
import { validateConfig } from '../../../src/config/load.js';

describe('generated validators', () => {
  it.each(GENERATED.map(([path, text]) => [relative(projectRoot, path), path, text] as const))(
    '%s is current (else: npm run gen:validators)', (_name, path, text) => {
      expect(readFileSync(path, 'utf8')).toBe(text());
    });

  it('validating a config compiles no schema at run time', () => {
    const compile = jest.spyOn(Ajv.prototype, 'compile');
    try {
      expect(validateConfig({ spec: { syncPeriod: 0.5 } }).ok).toBe(false);
      expect(validateConfig({ spec: { syncPeriod: 5 } }).ok).toBe(true);
      expect(compile).not.toHaveBeenCalled();
    } finally {
      compile.mockRestore();
    }
  });
});
