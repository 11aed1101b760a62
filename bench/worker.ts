/**
 * The benchmark's worker process: exactly the product's worker process (worker/process.ts:
 * Temporal worker, outbox relay, retention job, reconciler) with the floor workflow and its
 * no-op activity registered on the same Worker. The bench compiles it with the product
 * (`scripts/build.ts bench/worker.ts bench/workflows.ts`) and runs dist/bench/worker.js with
 * plain node, as production runs dist/worker/main.js.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWorkerProcess } from '../worker/process';
import { floorActivities } from './floor-activities';

// The bench runs this compiled, from dist/bench/worker.js (bench/stack.ts); under tsx it is the .ts.
const extension = path.extname(fileURLToPath(import.meta.url));
await runWorkerProcess({
  workflowsPath: fileURLToPath(new URL(`./workflows${extension}`, import.meta.url)),
  activities: floorActivities,
});
