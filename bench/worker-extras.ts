/**
 * What the benchmark adds to the product's worker wherever one runs: in its worker process
 * (bench/worker.ts) and in its API's process with eager start (bench/api.ts). The floor
 * workflows (bundled from bench/workflows.ts, which re-exports every product workflow too) and
 * their no-op activity. Both workers then run one bundle, so they are one Worker Deployment
 * Version, and either can take any task of the bench's task queue.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkerProcessExtras } from '../worker/process';
import { floorActivities } from './floor-activities';

// The bench runs this compiled, from dist/bench/ (bench/stack.ts); under tsx it is the .ts.
const extension = path.extname(fileURLToPath(import.meta.url));

export const benchWorkerExtras: WorkerProcessExtras = {
  workflowsPath: fileURLToPath(new URL(`./workflows${extension}`, import.meta.url)),
  activities: floorActivities,
};
