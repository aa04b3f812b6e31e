// Jest runs the JavaScript that `tsc` emitted into dist/ (no transform): the same files the lab VM
// runs, and ESM dependencies such as @kubernetes/client-node (>= 1, ESM-only) load natively
// under --experimental-vm-modules.
export default {
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform: {},
      testMatch: ['<rootDir>/dist/test/unit/**/*.test.js'],
    },
    {
      displayName: 'kernel',
      testEnvironment: 'node',
      // In the lab VM (TCG, ~26x slower JavaScript, 80-150 ms per process) a test that loads
      // kernel modules or runs a few ipvsadm processes can pass jest's 5 s default on a busy host.
      testTimeout: 120_000,
      transform: {},
      testMatch: ['<rootDir>/dist/test/kernel/**/*.test.js'],
    },
  ],
};
