import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ first: CLI tests spawn the built command line.
    globalSetup: ['test/helpers/build-ts.ts'],
    // Machines here have two cores; more workers only add contention.
    maxWorkers: 2,
    // Generous: on a busy machine tests get slow, never wrong (they wait on conditions, not
    // clocks), and a test that hangs still fails, only later.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // The JSON report is what .ci/run reads for its summary line.
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest/results.json' },
  },
});
