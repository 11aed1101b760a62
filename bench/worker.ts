/**
 * The benchmark's worker process: exactly the product's worker process (worker/process.ts:
 * Temporal worker, outbox relay, retention job, reconciler) with the floor workflow and its
 * no-op activity registered on the same Worker (bench/worker-extras.ts). The bench compiles it
 * with the product (`scripts/build.ts bench/worker.ts bench/api.ts bench/workflows.ts`) and runs
 * dist/bench/worker.js with plain node, as production runs dist/worker/main.js.
 */
import { runWorkerProcess } from '../worker/process';
import { benchWorkerExtras } from './worker-extras';

await runWorkerProcess(benchWorkerExtras);
