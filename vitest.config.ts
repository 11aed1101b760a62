import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer';

/**
 * The slow folders: left out of `npm test` (project `quick`), run by `npm run test:all` (every
 * project, what CI runs). docs/tests.md.
 */
export const slowFolders = ['test/static', 'test/launch', 'test/faults', 'test/chaos', 'test/cluster'];

/**
 * Run last, one at a time, once every other file has finished (project `alone`): each runs the
 * product as separate processes under its own load and asserts what that load must show (no
 * failed request; for chaos, payments failed over between the PSPs), which other files' stacks
 * on the same two cores can starve (docs/tests.md).
 */
export const runAlone = ['test/chaos/chaos.test.ts', 'test/cluster/rolling-upgrade.test.ts', 'test/cluster/scale-out.test.ts', 'test/cluster/worker-versioning.test.ts'];

export default defineConfig({
  test: {
    // `quick` and `slow` run together, three files at a time; `alone` starts once they have
    // ended (sequence.groupOrder). A project's own `exclude` replaces the command line's
    // `--exclude`: pick projects with `--project`, files by naming them.
    projects: [
      { extends: true, test: { name: 'quick', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...slowFolders.map((folder) => `${folder}/**`)] } },
      { extends: true, test: { name: 'slow', include: slowFolders.map((folder) => `${folder}/**/*.test.ts`), exclude: [...configDefaults.exclude, ...runAlone] } },
      { extends: true, test: { name: 'alone', include: runAlone, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // Three files at a time: most files wait (on Temporal, PostgreSQL, child processes) more
    // than they compute, so more than vitest's default of one on 2 cores pays; more than three
    // ran into CPU-bound timeouts on the 2-core CI machine. Safe because each file has its own
    // copy of the database (test/helpers/database.ts): with one shared database, a second
    // file's outbox relay delivered and counted this file's webhooks. Bounded by PostgreSQL's
    // connections: each test stack's pool is 10 (test/helpers/stack.ts) and the two cluster
    // files take turns (test/helpers/cluster.ts).
    maxWorkers: 3,
    // Longest files first (test/sequencer.ts): the long CPU-bound files and the cluster start
    // at once instead of last.
    sequence: { sequencer: LongestFirstSequencer },
    globalSetup: ['test/global-setup.ts'],
    // Before each file, in its process: under `npm test`, the Temporal runtime, installed once
    // per process (test/helpers/runtime.ts). `npm test` runs with --no-isolate (package.json): a worker
    // process keeps its loaded modules from one file to the next instead of starting afresh
    // for each, which saves most of the quick suite's import time; `npm run test:all` (CI)
    // keeps vitest's default, a fresh process per file.
    setupFiles: ['test/helpers/setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
