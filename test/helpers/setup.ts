// Runs before each test file (vitest.config.ts setupFiles). Under `npm test` (--no-isolate,
// TEST_SHARED_PROCESSES=1) a process runs many files, and the Temporal runtime, one per process,
// must be the test one before any file's code can make another (test/helpers/runtime.ts). With
// a process per file (`npm run test:all`) the helpers install it when they first need it,
// and files that never touch Temporal do not load its SDK.
if (process.env.TEST_SHARED_PROCESSES === '1') await (await import('./runtime')).installTestRuntime();

export {};
