// The command that runs the kernel jest project in the lab VM (lab/cli.ts `test`), apart from
// cli.ts so a unit test can import it without starting the CLI.

/** Kernel tests' timeout, ms: in the VM (TCG, ~26x slower JavaScript) on a busy host 5 s is not enough. */
export const KERNEL_TEST_TIMEOUT_MS = 120_000;

/**
 * argv of the kernel jest run. The timeout is on the command line because jest ignores
 * `testTimeout` inside a `projects` entry of jest.config.js (only the global or command-line
 * value applies); test/kernel/jest-timeout.test.ts fails if it is not in effect.
 */
export const JEST_KERNEL = ['node', '--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--selectProjects', 'kernel', '--runInBand',
  `--testTimeout=${KERNEL_TEST_TIMEOUT_MS}`];
