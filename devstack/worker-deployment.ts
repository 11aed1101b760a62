/**
 * The deploy steps of Worker Versioning (docs/versioning.md) as `npm start` and
 * `npm run rolling-upgrade` take them, through the same gRPC calls as the CLI's
 * `temporal worker deployment set-ramping-version / set-current-version / describe-version`
 * (and over the stack's own connection settings, TLS included).
 */
import type { Connection } from '@temporalio/client';
import protos from '@temporalio/proto';
import { describeVersion, type WorkerVersion } from '../worker/versioning';

export { deploymentRouting, describeVersion, type DeploymentRouting, type WorkerVersion } from '../worker/versioning';

const identity = `${process.pid}@payment-orchestrator-deploy`;

/** Routes every new run (and every unpinned one) to `version`; the previous current version starts draining. */
export async function setCurrentVersion(connection: Connection, namespace: string, version: WorkerVersion): Promise<void> {
  await connection.workflowService.setWorkerDeploymentCurrentVersion({ namespace, deploymentName: version.deploymentName, buildId: version.buildId, identity });
}

/** Routes `percentage` of new runs to `version` (the rest to the current one); 0 ends a ramp. */
export async function setRampingVersion(connection: Connection, namespace: string, version: WorkerVersion, percentage: number): Promise<void> {
  await connection.workflowService.setWorkerDeploymentRampingVersion({ namespace, deploymentName: version.deploymentName, buildId: version.buildId, percentage, identity });
}

/** Ends a ramp without a ramping version (the current version takes every new run again). */
export async function clearRampingVersion(connection: Connection, namespace: string, deploymentName: string): Promise<void> {
  await connection.workflowService.setWorkerDeploymentRampingVersion({ namespace, deploymentName, buildId: '', percentage: 0, identity });
}

export interface VersionDrainage {
  /** The server's status: `draining` while it may still have open pinned runs, `drained` once it has none; `active` while current or ramping. */
  status: 'active' | 'draining' | 'drained' | 'unknown';
  /** Open runs pinned to the version, as visibility counts them now (the server's own query). */
  openPinnedRuns: number;
}

/** `temporal worker deployment describe-version`'s drainage status, and the count of runs still pinned to the version. */
export async function versionDrainage(connection: Connection, namespace: string, version: WorkerVersion): Promise<VersionDrainage> {
  const described = await connection.workflowService.describeWorkerDeploymentVersion({
    namespace,
    deploymentVersion: { deploymentName: version.deploymentName, buildId: version.buildId },
  });
  const info = described.workerDeploymentVersionInfo;
  const Status = protos.temporal.api.enums.v1.WorkerDeploymentVersionStatus;
  const Drainage = protos.temporal.api.enums.v1.VersionDrainageStatus;
  const drainage = info?.drainageInfo?.status;
  const status: VersionDrainage['status'] =
    info?.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT || info?.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING
      ? 'active'
      : drainage === Drainage.VERSION_DRAINAGE_STATUS_DRAINED || info?.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED
        ? 'drained'
        : drainage === Drainage.VERSION_DRAINAGE_STATUS_DRAINING || info?.status === Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING
          ? 'draining'
          : 'unknown';
  return { status, openPinnedRuns: await openPinnedRuns(connection, namespace, version) };
}

/** The server's own drainage query: runs still open whose BuildIds carry `pinned:<deployment>:<build id>`. */
export async function openPinnedRuns(connection: Connection, namespace: string, version: WorkerVersion): Promise<number> {
  const { count } = await connection.workflowService.countWorkflowExecutions({
    namespace,
    query: `BuildIds = 'pinned:${describeVersion(version)}' AND ExecutionStatus = 'Running'`,
  });
  return Number(count ?? 0);
}

/**
 * Until the server reports `version` drained (no open run pinned to it, past the visibility
 * grace period). `progress` hears the open count whenever it changes. No deadline of its own
 * (only two minutes of failing looks end it):
 * a payment waiting for its capture may keep its version for days, and its workers must stay.
 */
export async function waitUntilDrained(
  connection: Connection,
  namespace: string,
  version: WorkerVersion,
  progress: (drainage: VersionDrainage) => void,
  shouldStop: () => boolean = () => false,
): Promise<void> {
  let last = '';
  let failingSince: number | null = null;
  for (;;) {
    let drainage: VersionDrainage;
    try {
      drainage = await versionDrainage(connection, namespace, version);
      failingSince = null;
    } catch (error) {
      // A look that fails (a frontend restarting, or, on a cluster, NOT_FOUND for a moment
      // from a node whose view of the version lags) is tried again; only a lasting failure stops the wait.
      failingSince ??= Date.now();
      if (Date.now() - failingSince > 120_000 || shouldStop()) throw error;
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    const seen = `${drainage.status}/${drainage.openPinnedRuns}`;
    if (seen !== last) progress(drainage);
    last = seen;
    // Both the server's word and our own count of open runs pinned to it: a run still pinned to
    // the version needs its workers, whatever a lagging drainage status says.
    if (drainage.status === 'drained' && drainage.openPinnedRuns === 0) return;
    if (shouldStop()) throw new Error(`stopped while ${describeVersion(version)} was draining`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
