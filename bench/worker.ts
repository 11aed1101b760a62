/**
 * The benchmark's worker process: exactly the product's worker process (worker/process.ts:
 * Temporal worker, outbox relay, retention job, reconciler) with the floor workflow and its
 * no-op activity registered on the same Worker.
 */
import { fileURLToPath } from 'node:url';
import { runWorkerProcess } from '../worker/process';
import { floorActivities } from './floor-activities';

await runWorkerProcess({
  workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
  activities: floorActivities,
});
