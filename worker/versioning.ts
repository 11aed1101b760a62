import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Connection, ConnectionLike } from '@temporalio/client';
import type { Logger } from '../lib/logger';

/** One version of the worker within its Worker Deployment (docs/versioning.md). */
export interface WorkerVersion {
  deploymentName: string;
  buildId: string;
}

/** `deployment:buildId`, as the server writes a version in search attributes and logs. */
export function describeVersion(version: WorkerVersion): string {
  return `${version.deploymentName}:${version.buildId}`;
}

/** The version in package.json (found upwards from this file: the sources' root, or the image's /app above dist/). */
export function packageVersion(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (parsed.name === 'payment-orchestrator' && parsed.version) return parsed.version;
    }
    if (path.dirname(dir) === dir) throw new Error('package.json of payment-orchestrator not found above worker/');
  }
}

/**
 * The build id a worker runs as unless TEMPORAL_WORKER_BUILD_ID says otherwise:
 * `<package version>-<first 12 hex digits of the SHA-256 of the workflow bundle>`. The bundle
 * is everything a workflow task executes (workflows, their interceptors, the failure
 * converter), so a change to what a workflow records always gets a new version, and a deploy
 * that changes only activities, the API or configuration keeps the version its runs are
 * pinned to (a plain rolling replacement).
 */
export function workerBuildId(bundleCode: string, version = packageVersion()): string {
  return `${version}-${createHash('sha256').update(bundleCode).digest('hex').slice(0, 12)}`;
}

const NOT_FOUND = 5;

/** The deployment's routing: the current and ramping versions' build ids (null: none, i.e. unversioned workers get the tasks). */
export interface DeploymentRouting {
  current: string | null;
  ramping: string | null;
  rampPercentage: number;
}

/** The routing of `deploymentName`; an unknown deployment (no versioned worker ever polled) has none. */
export async function deploymentRouting(connection: ConnectionLike, namespace: string, deploymentName: string): Promise<DeploymentRouting> {
  try {
    const { workerDeploymentInfo } = await connection.workflowService.describeWorkerDeployment({ namespace, deploymentName });
    const routing = workerDeploymentInfo?.routingConfig;
    return {
      current: routing?.currentDeploymentVersion?.buildId || buildIdOf(routing?.currentVersion, deploymentName),
      ramping: routing?.rampingDeploymentVersion?.buildId || buildIdOf(routing?.rampingVersion, deploymentName),
      rampPercentage: routing?.rampingVersionPercentage ?? 0,
    };
  } catch (error) {
    if ((error as { code?: number }).code === NOT_FOUND) return { current: null, ramping: null, rampPercentage: 0 };
    throw error;
  }
}

/** The build id in the older `deployment.buildId` string form ('__unversioned__' or empty: none). */
function buildIdOf(version: string | null | undefined, deploymentName: string): string | null {
  if (!version || version === '__unversioned__') return null;
  return version.startsWith(`${deploymentName}.`) ? version.slice(deploymentName.length + 1) : version;
}

/**
 * A fresh deployment (no current and no ramping version: its first versioned worker, or a
 * namespace whose workers were all unversioned) routes nothing to a versioned worker, so its
 * first version is made current here, once the server knows it (after the first poll). Any
 * later version becomes current only by a deploy's own step (a ramp, then set-current-version:
 * `npm run rolling-upgrade`, or the CLI). Returns what it did.
 */
export async function makeCurrentIfNone(
  connection: Connection,
  namespace: string,
  version: WorkerVersion,
  logger: Logger,
  options: { deadlineMs?: number; identity?: string } = {},
): Promise<'made-current' | 'already-current' | 'left-as-is'> {
  const deadline = Date.now() + (options.deadlineMs ?? 60_000);
  for (;;) {
    const routing = await deploymentRouting(connection, namespace, version.deploymentName);
    if (routing.current === version.buildId) return 'already-current';
    if (routing.current !== null || routing.ramping !== null) {
      logger.warn(
        { version: describeVersion(version), current: routing.current, ramping: routing.ramping },
        'this worker version is not current: it serves only runs pinned to it, until a deploy ramps it or makes it current (docs/versioning.md)',
      );
      return 'left-as-is';
    }
    try {
      await connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName: version.deploymentName,
        buildId: version.buildId,
        identity: options.identity ?? `${process.pid}@worker`,
      });
      logger.info({ version: describeVersion(version) }, 'the deployment had no current version: this worker version is now current');
      return 'made-current';
    } catch (error) {
      // NOT_FOUND / FAILED_PRECONDITION until the server has registered the version from the worker's first poll.
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
