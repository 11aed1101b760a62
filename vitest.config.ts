import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
