import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // Three files at a time: most files wait (on Temporal, PostgreSQL, child processes) more
    // than they compute, and vitest's default on 2 cores is one. Safe because each file has
    // its own copy of the database (test/helpers/database.ts): with one shared database, a
    // second file's outbox relay delivered and counted this file's webhooks. Measured on the
    // 2-core CI machine under the same outside load (README, "Tests"): 722 s of vitest with two
    // files at a time in size order, 522 s with three, longest first. The run's own
    // connections peaked at 57 of PostgreSQL's 100; each more file adds a stack's 10-20, and
    // the two cluster files 13 and 26 (they take turns: test/cluster/support.ts), so four at a
    // time would leave too little room.
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
