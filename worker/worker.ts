import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { requestIdActivityInterceptor } from './interceptors';
import { databaseRefusalInterceptor } from './database-refusals';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));
/** Workflow interceptor modules: bundled with the workflows (pass to bundleWorkflowCode too). */
export const workflowInterceptorModules = [fileURLToPath(new URL('../workflows/interceptors.ts', import.meta.url))];
/** The failure converter of lib/data-converter.ts: bundled with the workflows (pass to bundleWorkflowCode too). */
export { failureConverterPath } from '../lib/data-converter';

/**
 * A Temporal worker for the payment and refund workflows and their activities. Stateless:
 * run as many as the load needs, on one task queue.
 */
export async function createPaymentWorker(options: {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** lib/data-converter.ts: the same as every client's, or the worker cannot read what they wrote. */
  dataConverter: DataConverter;
  /** Pre-built bundle (tests bundle once per run); otherwise bundled from workflowsPath. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  tuning?: Partial<WorkerOptions>;
}): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    dataConverter: options.dataConverter,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath }),
    activities: createActivities(options.deps),
    interceptors: { workflowModules: workflowInterceptorModules, activity: [requestIdActivityInterceptor, databaseRefusalInterceptor] },
    ...options.tuning,
  });
}
