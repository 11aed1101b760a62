import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // Most files wait (on Temporal, PostgreSQL, child processes) far more than they compute:
    // vitest's default on 2 cores is ONE file at a time, which made the suite ~8 minutes.
    maxWorkers: 3,
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
