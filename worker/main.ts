import { runWorkerProcess } from './process';

/**
 * The worker process's entry file: everything it runs is wired in worker/process.ts (the
 * Temporal worker with the workflows and activities, the outbox relay, and the Schedules of
 * the periodic jobs, whose passes run as activities). Kept to this one call so the compiled
 * entry (dist/worker/main.js) and `tsx worker/main.ts` start the same thing.
 */
await runWorkerProcess();
