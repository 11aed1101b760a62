import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // Three files at a time (five until the suite grew to 87 files: CPU-bound timeouts and
    // 202s past the API's wait failed CI runs on 2026-12-01). Most files wait (on Temporal, PostgreSQL, child processes) more
    // than they compute, and vitest's default on 2 cores is one. Safe because each file has
    // its own copy of the database (test/helpers/database.ts): with one shared database, a
    // second file's outbox relay delivered and counted this file's webhooks. Bounded by
    // PostgreSQL's connections: each test stack's pool is 10 (test/helpers/stack.ts) and the
    // two cluster files take turns (test/helpers/cluster.ts). The measurements behind the
    // number (durations with two to five files, the connection peak) are in README, "Tests".
    maxWorkers: 3,
    // Longest files first (test/sequencer.ts): the two-minute chaos run, the long CPU-bound
    // files and the cluster start at once instead of last; the suite cannot end before chaos.
    sequence: { sequencer: LongestFirstSequencer },
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
