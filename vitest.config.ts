import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // Two files at a time: most files wait (on Temporal, PostgreSQL, child processes) more
    // than they compute, and vitest's default on 2 cores is one. Safe because each file has
    // its own copy of the database (test/helpers/database.ts): with one shared database, a
    // second file's outbox relay delivered and counted this file's webhooks. Measured: the
    // two busiest files together peak at 46 PostgreSQL connections (of 100).
    maxWorkers: 3,
    // Longest files first (test/sequencer.ts): the two-minute chaos run and the cluster files
    // start at once instead of last.
    sequence: { sequencer: LongestFirstSequencer },
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
