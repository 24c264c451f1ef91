import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Machines here have two cores; more workers only add contention.
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // The JSON report is what .ci/run reads for its summary line.
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest/results.json' },
  },
});
