// The kernel jest command (lab/kernel-jest.ts) gives the kernel project a 120 s timeout:
// jest's own resolved configuration for exactly that command says so (jest --showConfig on the
// host; the behaviour itself is checked in the VM by test/kernel/jest-timeout.test.ts).
import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { JEST_KERNEL, KERNEL_TEST_TIMEOUT_MS } from '../../../lab/kernel-jest.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));

describe('kernel jest command', () => {
  it('resolves to testTimeout 120000 for the kernel project (the config file global 30 s is for unit tests)', () => {
    const [, ...args] = JEST_KERNEL;
    const r = spawnSync(process.execPath, [...args, '--showConfig'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    const shown = JSON.parse(r.stdout) as { globalConfig: { testTimeout?: number }; configs: { displayName?: { name: string } }[] };
    expect(KERNEL_TEST_TIMEOUT_MS).toBe(120_000);
    expect(shown.globalConfig.testTimeout).toBe(KERNEL_TEST_TIMEOUT_MS);
    expect(shown.configs.map((c) => c.displayName?.name)).toContain('kernel');
    // Without the flag jest resolves the config file's global 30 s: the flag is what sets 120 s.
    const bare = spawnSync(process.execPath, [...args.filter((a) => !a.startsWith('--testTimeout')), '--showConfig'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect((JSON.parse(bare.stdout) as { globalConfig: { testTimeout?: number } }).globalConfig.testTimeout).toBe(30_000);
  });
});
