import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The Temporal SDK's native addon is not happy in worker threads.
    pool: 'forks',
    // One file at a time (vitest's default on 2 cores, made explicit): every file's stack
    // shares the run's database, so a second file's outbox relay would deliver (and count)
    // this file's webhooks, and three stacks at once exceed PostgreSQL's 100 connections.
    // Running files side by side needs a database per file first.
    maxWorkers: 1,
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', 'json'],
    outputFile: { json: 'test/artifacts/vitest.json' },
  },
});
