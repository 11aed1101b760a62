import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { ensureTemporalCli } from '../../devstack/temporal-cli';
import { scheduleId, periodicJobs } from '../../shared/jobs';
import { TEST_PAYLOAD_KEYS, testDataConverter } from '../../testkit/payload-keys';
import { spawnWorker } from '../../testkit/processes';
import { providerRegistry } from '../../provider/registry';
import { SandboxProvider } from '../../provider/sandbox/client';
import { createPaymentWorker } from '../../worker/worker';
import { deleteSchedules, ensureSchedules, type ScheduleSettings } from '../../worker/schedules';
import { eventually, startStack, type TestStack } from '../helpers/stack';

/**
 * docs/CONTRACT.md "Periodic jobs": every periodic job is a workflow started by a Temporal
 * Schedule that every worker creates or updates at start; one run per scheduled time however
 * many workers there are; operated with the Temporal CLI.
 */

let stack: TestStack;
let secondWorker: Worker;
let secondWorkerRun: Promise<void>;
let secondConnection: NativeConnection;
const clients: { client: Client; close: () => Promise<void> }[] = [];

/**
 * Intervals of a day: their actions fall on midnight UTC, so no scheduled action lands inside
 * a test and the runs a test counts are the ones it triggered.
 */
const settings = (): ScheduleSettings => ({
  taskQueue: stack.taskQueue,
  providers: ['sandbox'],
  reconciliationLookbackHours: 3,
  retentionIntervalSeconds: 86_400,
  abandonedRunsIntervalSeconds: 86_400,
});

/** A worker process's own Temporal client, as each one has. */
async function workerClient(): Promise<Client> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  const client = new Client({ connection, dataConverter: testDataConverter });
  clients.push({ client, close: () => connection.close() });
  return client;
}

function cli(...args: string[]): string {
  return execFileSync(ensureTemporalCli(), [...args, '--address', inject('temporalAddress'), '--namespace', 'default'], { encoding: 'utf8' });
}

beforeAll(async () => {
  stack = await startStack();
  // A second worker on the same task queue, as a second worker process would be.
  secondConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  secondWorker = await createPaymentWorker({
    connection: secondConnection,
    namespace: 'default',
    taskQueue: stack.taskQueue,
    deps: { sql: stack.sql, providers: providerRegistry({ sandbox: new SandboxProvider({ baseUrl: stack.sandboxUrl, timeoutMs: 1500 }) }), logger: stack.logger, temporal: stack.temporal },
    dataConverter: testDataConverter,
    workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') },
  });
  secondWorkerRun = secondWorker.run();
});

afterAll(async () => {
  if (stack) await deleteSchedules(stack.temporal, stack.taskQueue);
  if (secondWorker) {
    secondWorker.shutdown();
    await secondWorkerRun;
    await secondConnection.close();
  }
  for (const { close } of clients) await close();
  await stack?.stop();
});

describe('the Schedules are created once, whatever the number of workers starting', () => {
  it('two workers starting at once: each Schedule created by one and found (then updated) by the other, four in all', async () => {
    const [first, second] = await Promise.all([ensureSchedules(await workerClient(), settings()), ensureSchedules(await workerClient(), settings())]);
    for (const job of periodicJobs) {
      const id = scheduleId(stack.taskQueue, job);
      expect([first[id], second[id]].sort(), id).toEqual(['created', 'updated']);
    }
    // The CLI sees exactly this deployment's four, with the overlap policy that never runs two at once.
    const listed = (JSON.parse(cli('schedule', 'list', '-o', 'json')) as { scheduleId: string }[]).map((s) => s.scheduleId).filter((id) => id.startsWith(`${stack.taskQueue}.`));
    expect(listed.sort()).toEqual(periodicJobs.map((job) => scheduleId(stack.taskQueue, job)).sort());
    for (const id of listed) {
      const description = await stack.temporal.schedule.getHandle(id).describe();
      expect(description.policies.overlap, id).toBe(ScheduleOverlapPolicy.SKIP);
      expect(description.action.type).toBe('startWorkflow');
      expect(description.state.paused).toBe(false);
    }
  });

  it('a restart finds them and changes nothing an operator set: a paused Schedule stays paused', async () => {
    const id = scheduleId(stack.taskQueue, 'retention');
    cli('schedule', 'toggle', '--schedule-id', id, '--pause', '--reason', 'maintenance window');
    const outcomes = await ensureSchedules(await workerClient(), { ...settings(), retentionIntervalSeconds: 2 * 86_400 });
    expect(outcomes[id]).toBe('updated');
    const description = await stack.temporal.schedule.getHandle(id).describe();
    expect(description.state.paused).toBe(true);
    expect(description.state.note).toBe('maintenance window');
    // The definition did follow the code: the new interval.
    expect(description.spec.intervals?.[0]?.every).toBe(2 * 86_400_000);
    cli('schedule', 'toggle', '--schedule-id', id, '--unpause', '--reason', 'done');
    expect((await stack.temporal.schedule.getHandle(id).describe()).state.paused).toBe(false);
  });
});

describe('real worker processes', () => {
  it('two worker processes (worker/main.ts) started at once: four Schedules, each once; a trigger runs the job once, on one of them', async () => {
    const taskQueue = `procs-${randomBytes(4).toString('hex')}`;
    const environment = { databaseUrl: stack.databaseUrl, temporalAddress: inject('temporalAddress'), taskQueue, providerUrl: stack.sandboxUrl, env: { LOG_LEVEL: 'warn', RETENTION_JOB_INTERVAL_SECONDS: '86400' } };
    const workers = await Promise.all([spawnWorker('sched-worker-1', environment), spawnWorker('sched-worker-2', environment)]);
    try {
      const ids = periodicJobs.map((job) => scheduleId(taskQueue, job)).sort();
      const listed = await eventually(async () => {
        const found = (JSON.parse(cli('schedule', 'list', '-o', 'json')) as { scheduleId: string }[]).map((s) => s.scheduleId).filter((id) => id.startsWith(`${taskQueue}.`));
        return found.length >= ids.length ? found : null;
      }, 60_000);
      expect(listed.sort()).toEqual(ids);
      const id = scheduleId(taskQueue, 'retention');
      cli('schedule', 'trigger', '--schedule-id', id);
      const runs = await eventually(async () => {
        const found = [];
        for await (const run of stack.temporal.workflow.list({ query: `TemporalScheduledById = '${id}'` })) found.push(run);
        return found.length > 0 && found.every((r) => r.status.name === 'COMPLETED') ? found : null;
      }, 60_000);
      expect(runs).toHaveLength(1);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await deleteSchedules(stack.temporal, taskQueue);
    }
    // Two processes bundling the workflows at once on a loaded machine: up to spawnWorker's 180 s each.
  }, 300_000);
});

describe('npm run schedules', () => {
  it('creates them from the environment, then finds and updates them on a second run, and lists each with its next runs', async () => {
    const taskQueue = `schedules-${randomBytes(4).toString('hex')}`;
    const run = () =>
      execFileSync(process.execPath, ['--import', 'tsx', 'scripts/schedules.ts'], {
        encoding: 'utf8',
        env: { ...process.env, TEMPORAL_ADDRESS: inject('temporalAddress'), TASK_QUEUE: taskQueue, TEMPORAL_PAYLOAD_KEYS: TEST_PAYLOAD_KEYS, LOG_LEVEL: 'silent' },
      });
    try {
      const first = run();
      const second = run();
      for (const job of periodicJobs) {
        expect(first).toContain(`${scheduleId(taskQueue, job)} (created)`);
        expect(second).toContain(`${scheduleId(taskQueue, job)} (updated)`);
      }
      expect(second).toMatch(new RegExp(`${taskQueue}\\.reconciliation-daily \\(updated\\): .* active; next \\d{4}-\\d\\d-\\d\\dT00:30:00\\.000Z`));
    } finally {
      await deleteSchedules(stack.temporal, taskQueue);
    }
  });
});

describe('operated with the Temporal CLI', () => {
  it('pause: the CLI pauses it (and says so in describe); trigger: one run starts even while paused, and completes on one of the two workers', async () => {
    const id = scheduleId(stack.taskQueue, 'retention');
    cli('schedule', 'toggle', '--schedule-id', id, '--pause', '--reason', 'paused by the test');
    const described = JSON.parse(cli('schedule', 'describe', '--schedule-id', id, '-o', 'json')) as { schedule: { state: { paused?: boolean; notes?: string } } };
    expect(described.schedule.state.paused).toBe(true);
    expect(described.schedule.state.notes).toBe('paused by the test');

    expect(cli('schedule', 'trigger', '--schedule-id', id)).toMatch(/Trigger request sent/);
    const runs = await eventually(async () => {
      const found = [];
      for await (const run of stack.temporal.workflow.list({ query: `WorkflowType = 'retentionWorkflow' AND TemporalScheduledById = '${id}'` })) found.push(run);
      return found.length > 0 && found.every((r) => r.status.name === 'COMPLETED') ? found : null;
    }, 30_000);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.workflowId.startsWith(`${id}-`)).toBe(true);
    expect(await stack.temporal.workflow.getHandle(runs[0]!.workflowId).result()).toEqual({ deleted: expect.any(Number) });
    cli('schedule', 'toggle', '--schedule-id', id, '--unpause');
  });

  it('backfill of the daily reconciliation: the action at 2026-11-20 00:30 reconciles 2026-11-19, the day before its scheduled time, and records the run', async () => {
    const id = scheduleId(stack.taskQueue, 'reconciliation-daily');
    cli('schedule', 'backfill', '--schedule-id', id, '--start-time', '2026-11-20T00:00:00Z', '--end-time', '2026-11-21T00:00:00Z', '--overlap-policy', 'AllowAll');
    const run = await eventually(async () => {
      const [row] = await stack.sql<{ id: string; status: string; window_from: Date; window_to: Date; workflow_id: string }[]>`
        SELECT id, status, window_from, window_to, workflow_id FROM reconciliation_runs WHERE workflow_id LIKE ${`${id}-%`} AND status <> 'running'`;
      return row;
    }, 60_000);
    expect(run.workflow_id).toBe(`${id}-2026-11-20T00:30:00Z`);
    expect({ from: run.window_from.toISOString(), to: run.window_to.toISOString() }).toEqual({ from: '2026-11-19T00:00:00.000Z', to: '2026-11-20T00:00:00.000Z' });
    expect(run.status).toBe('clean');
    expect(await stack.temporal.workflow.getHandle(run.workflow_id).result()).toMatchObject({ window: { from: '2026-11-19T00:00:00.000Z' }, runs: [{ provider: 'sandbox', status: 'clean' }] });
  });

  it('trigger of the abandoned-run sweep: the job runs on its workflow (no timer in any process) and reports how many it dealt with', async () => {
    const id = scheduleId(stack.taskQueue, 'abandoned-runs');
    cli('schedule', 'trigger', '--schedule-id', id);
    const run = await eventually(async () => {
      for await (const found of stack.temporal.workflow.list({ query: `WorkflowType = 'abandonedRunSweepWorkflow' AND TemporalScheduledById = '${id}' AND ExecutionStatus = 'Completed'` })) return found;
      return null;
    }, 30_000);
    expect(await stack.temporal.workflow.getHandle(run.workflowId).result()).toEqual({ settled: expect.any(Number) });
  });
});
