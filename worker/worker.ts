import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { failureConverterPath } from '../lib/data-converter';
import { createActivities, type ActivityDeps } from '../activities';
import { requestIdActivityInterceptor } from './interceptors';
import { databaseRefusalInterceptor } from './database-refusals';

// .ts from the sources (tsx), .js from the compiled dist/.
const extension = path.extname(fileURLToPath(import.meta.url));
export const workflowsPath = fileURLToPath(new URL(`../workflows/index${extension}`, import.meta.url));
/** Workflow interceptor modules: bundled with the workflows (pass to bundleWorkflowCode too). */
export const workflowInterceptorModules = [fileURLToPath(new URL(`../workflows/interceptors${extension}`, import.meta.url))];
/** The failure converter of lib/data-converter.ts: bundled with the workflows (pass to bundleWorkflowCode too). */
export { failureConverterPath };
/**
 * The bundle `npm run build` writes beside the compiled code (dist/workflow-bundle.js):
 * production workers load it instead of bundling at start, and it is what the replay tests
 * replay (test/global-setup.ts builds it the same way, with bundleWorkflows).
 */
export const prebuiltWorkflowBundlePath = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));

/** The workflow code as every worker runs it: the workflows, their interceptors and the failure converter, one file. */
export async function bundleWorkflows(logger?: Parameters<typeof bundleWorkflowCode>[0]['logger']): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules, failureConverterPath, ...(logger ? { logger } : {}) });
  return code;
}

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
  /** Pre-built bundle (tests bundle once per run); otherwise dist/workflow-bundle.js, or bundled from workflowsPath. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  tuning?: Partial<WorkerOptions>;
}): Promise<Worker> {
  const workflowBundle =
    options.workflowBundle ?? (existsSync(prebuiltWorkflowBundlePath) && !options.tuning?.workflowsPath ? { codePath: prebuiltWorkflowBundlePath } : undefined);
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    dataConverter: options.dataConverter,
    // A bundle already contains the workflow interceptors; bundling from source adds them.
    ...(workflowBundle ? { workflowBundle } : { workflowsPath }),
    activities: createActivities(options.deps),
    interceptors: { ...(workflowBundle ? {} : { workflowModules: workflowInterceptorModules }), activity: [requestIdActivityInterceptor, databaseRefusalInterceptor] },
    ...options.tuning,
  });
}
