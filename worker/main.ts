import { runWorkerProcess } from './process';

/** The worker process: Temporal worker (workflows + activities), outbox relay and retention job (worker/process.ts). */
await runWorkerProcess();
