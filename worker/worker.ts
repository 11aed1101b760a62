import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { failureConverterPath } from '../lib/data-converter';
import { tracingActivityInterceptors, tracingWorkflowSinks } from '../lib/tracing';
import { createActivities, type ActivityDeps } from '../activities';
import { requestIdActivityInterceptor } from './interceptors';
import { databaseRefusalInterceptor } from './database-refusals';
import type { WorkerVersion } from './versioning';

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

/**
 * The workflow code as every worker runs it: the workflows, their interceptors and the failure
 * converter, one file. `entry` replaces workflows/index.ts (the benchmark's re-exports it plus more).
 */
export async function bundleWorkflows(logger?: Parameters<typeof bundleWorkflowCode>[0]['logger'], entry = workflowsPath): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: entry, workflowInterceptorModules, failureConverterPath, ...(logger ? { logger } : {}) });
  return code;
}

/**
 * The bundle a production worker runs, as code (its hash is the default build id,
 * worker/versioning.ts): dist/workflow-bundle.js when present, otherwise bundled now from
 * `entry` (the sources under tsx, ~1.5 s). An `entry` other than workflows/index.ts is always bundled.
 */
export async function workerWorkflowBundle(entry?: string, logger?: Parameters<typeof bundleWorkflowCode>[0]['logger']): Promise<string> {
  if (!entry && existsSync(prebuiltWorkflowBundlePath)) return readFileSync(prebuiltWorkflowBundlePath, 'utf8');
  return bundleWorkflows(logger, entry);
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
  /**
   * Worker Versioning (docs/versioning.md): the worker polls as this version of its Worker
   * Deployment and gets only the runs routed to it. Omitted: an unversioned worker (the test
   * stacks, each on a task queue of its own). The version must name the bundle it runs: the
   * caller derives its build id from that bundle (worker/versioning.ts workerBuildId).
   */
  version?: WorkerVersion;
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
    // A type without its own behaviour in workflows/versioning.ts would be pinned: every type has one there.
    ...(options.version ? { workerDeploymentOptions: { useWorkerVersioning: true, version: options.version, defaultVersioningBehavior: 'PINNED' } } : {}),
    // Tracing (lib/tracing.ts): the activity's span and log ids from its headers; the workflow isolate's spans through the sink.
    interceptors: {
      ...(workflowBundle ? {} : { workflowModules: workflowInterceptorModules }),
      activity: [...tracingActivityInterceptors(), requestIdActivityInterceptor, databaseRefusalInterceptor],
    },
    sinks: tracingWorkflowSinks(),
    ...options.tuning,
  });
}
