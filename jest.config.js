// Jest runs the JavaScript that `tsc` emitted into dist/ (no transform): the same files the lab VM
// runs, and ESM dependencies such as @kubernetes/client-node (>= 1, ESM-only) load natively
// under --experimental-vm-modules.
export default {
  // The one timeout jest honours (it ignores testTimeout inside a `projects` entry): 30 s for a
  // unit test on a machine whose cores the lab VM keeps busy. The kernel run overrides it with
  // --testTimeout=120000 on its command line (lab/kernel-jest.ts).
  testTimeout: 30_000,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform: {},
      // .cache holds the lab's kernel and the exported image's filesystem (another package.json): never modules of ours.
      modulePathIgnorePatterns: ['<rootDir>/.cache/'],
      testMatch: ['<rootDir>/dist/test/unit/**/*.test.js'],
    },
    {
      displayName: 'kernel',
      testEnvironment: 'node',
      // No testTimeout here: jest ignores it inside a `projects` entry. The kernel run's 120 s is
      // on its command line (lab/kernel-jest.ts); test/kernel/jest-timeout.test.ts checks it.
      transform: {},
      // .cache holds the lab's kernel and the exported image's filesystem (another package.json): never modules of ours.
      modulePathIgnorePatterns: ['<rootDir>/.cache/'],
      testMatch: ['<rootDir>/dist/test/kernel/**/*.test.js'],
    },
    {
      // The multi-node lab cluster's scenarios (test/cluster/): `npm test` runs them in their own
      // VM boot after the kernel tests (test/run-all.ts); `npm run test:cluster` runs them alone.
      displayName: 'cluster',
      testEnvironment: 'node',
      transform: {},
      // .cache holds the lab's kernel and the exported image's filesystem (another package.json): never modules of ours.
      modulePathIgnorePatterns: ['<rootDir>/.cache/'],
      testMatch: ['<rootDir>/dist/test/cluster/**/*.test.js'],
    },
  ],
};
