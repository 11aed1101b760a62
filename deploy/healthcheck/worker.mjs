// Docker healthcheck of a `worker` container (docker-compose.yml): healthy while THIS
// container's Temporal worker is polling its task queue for both workflow and activity
// tasks. A worker that lost Temporal, wedged, or never registered turns unhealthy, which
// a port check could not see (the worker listens on no port).
//
// The SDK's default worker identity is `${pid}@${hostname}` (@temporalio/worker,
// worker-options), and every container has its own hostname, so the pollers whose identity
// ends in `@<this hostname>` are this replica's. A long poll lasts up to about a minute and
// the server records the poller when each poll starts, so an idle healthy worker is seen
// at least once a minute; 3 minutes leaves margin.
//
// Reads the same variables as the worker (lib/config.ts defaults). Plain ESM so it runs
// with `node` alone, without tsx start-up cost, every interval.
import os from 'node:os';
import { Connection } from '@temporalio/client';

const address = process.env.TEMPORAL_ADDRESS || '127.0.0.1:7233';
const namespace = process.env.TEMPORAL_NAMESPACE || 'default';
const taskQueue = process.env.TASK_QUEUE || 'payments';
const maxPollAgeMs = 180_000;
const suffix = `@${os.hostname()}`;
// temporal.api.enums.v1: TaskQueueKind NORMAL = 1; TaskQueueType WORKFLOW = 1, ACTIVITY = 2.
const types = { workflow: 1, activity: 2 };

const toMs = (ts) => (ts ? Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6) : 0);

let healthy = true;
try {
  const connection = await Connection.connect({ address, connectTimeout: 5000 });
  try {
    for (const [kind, taskQueueType] of Object.entries(types)) {
      const res = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue, kind: 1 },
        taskQueueType,
      });
      const mine = (res.pollers ?? []).filter((p) => (p.identity ?? '').endsWith(suffix));
      const newest = Math.max(0, ...mine.map((p) => toMs(p.lastAccessTime)));
      if (!mine.length || Date.now() - newest > maxPollAgeMs) {
        healthy = false;
        console.error(`unhealthy: no recent ${kind} poller from *${suffix} on ${namespace}/${taskQueue}`);
      }
    }
  } finally {
    await connection.close();
  }
} catch (error) {
  healthy = false;
  console.error(`unhealthy: ${error instanceof Error ? error.message : String(error)}`);
}
if (healthy) console.log(`healthy: polling ${namespace}/${taskQueue} as *${suffix}`);
process.exit(healthy ? 0 : 1);
