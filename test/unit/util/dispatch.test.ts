// The one dispatcher of both programs (src/util/dispatch.ts).
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { type Program, UsageError, dispatch } from '../../../src/util/dispatch.js';

let out = '';
let err = '';
beforeEach(() => {
  out = '';
  err = '';
  jest.spyOn(process.stdout, 'write').mockImplementation((s) => { out += String(s); return true; });
  jest.spyOn(process.stderr, 'write').mockImplementation((s) => { err += String(s); return true; });
});
afterEach(() => { jest.restoreAllMocks(); });

class SetupError extends Error {}
const seen: string[][] = [];
const program: Program = {
  invoke: 'prog', prefix: (c) => (c ? `prog ${c}` : 'prog'), footer: 'footer',
  commands: {
    echo: { summary: 'echo', usage: 'echo [args]', help: 'echoes', run: async (a) => { seen.push(a); return 0; } },
    bad: { summary: 'bad', usage: 'bad', help: '', run: async () => { throw new UsageError('no such flag'); } },
    setup: { summary: 'setup', usage: 'setup', help: '', run: async () => { throw new SetupError('qemu missing'); } },
  },
  exitCode: (e) => (e instanceof SetupError ? 125 : undefined),
};

describe('dispatch', () => {
  it.each<[string[], number, RegExp, 'out' | 'err']>([
    [[], 2, /^usage: prog <command>/, 'out'],
    [['--help'], 0, /commands:\n {2}echo {3}echo\n/, 'out'],
    [['nope'], 2, /^prog: unknown command "nope"/, 'err'],
    [['toString'], 2, /^prog: unknown command "toString"/, 'err'],
    [['echo', '--help'], 0, /^usage: prog echo \[args\]\n\nechoes\n$/, 'out'],
    [['bad'], 2, /^prog bad: no such flag\nusage: prog bad\n$/, 'err'],
    [['setup'], 125, /^prog setup: qemu missing\n$/, 'err'],
  ])('%j exits %i', async (argv, code, text, where) => {
    expect(await dispatch(program, argv)).toBe(code);
    expect(where === 'out' ? out : err).toMatch(text);
  });

  it('hands a command everything after `--` untouched, --help included', async () => {
    expect(await dispatch(program, ['echo', '--', 'ls', '--help'])).toBe(0);
    expect(seen.at(-1)).toEqual(['--', 'ls', '--help']);
  });
});
