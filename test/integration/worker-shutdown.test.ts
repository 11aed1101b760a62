import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config';
import { workerTuning } from '../../worker/process';
import { apiClient, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { chargeAttempts, chargeInFlight, paymentIdOfKey } from '../helpers/faults/census';
import { chargesAtProvider } from '../helpers/effects';
import { spawnWorker, type WorkerProcess } from '../../testkit/processes';

/**
 * SIGTERM (worker.shutdown()) while a payment's first charge is in flight. Attempt 1 is a local
 * activity in the run's first workflow task, and that task has its next local step (the
 * outcome's record) still to run: a worker that is shutting down schedules no new local
 * activity, so unless the task had scheduled it before the shutdown began, the task does not
 * complete there, and its markers with it: it fails, and the next worker's try finds attempt 1
 * recorded and asks the PSP before it charges. Either way the payment completes with the one
 * charge the stopped worker made.
 */

let stack: TestStack | null = null;
let next: WorkerProcess | null = null;
afterEach(async () => {
  await next?.kill();
  next = null;
  await stack?.stop();
  stack = null;
});

describe('worker shutdown', () => {
  it('a shutdown in the middle of the first charge leaves one charge: the stopping worker finishes it, or the next worker looks it up and finishes the payment', async () => {
    stack = await startStack({ sandbox: { slowMs: 2500 }, providerTimeoutMs: 10_000, workerTuning: { shutdownGraceTime: '20s' } });
    const running = stack;
    const tenant = await running.createTenant('shutdown');
    const key = uniqueKey();
    void apiClient(running.apiUrl, tenant.apiKey)
      .post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_slow' }, key)
      .catch(() => null);
    const paymentId = await eventually(() => paymentIdOfKey(running, tenant.id, key), 30_000);
    await eventually(() => chargeInFlight(running, paymentId), 30_000, 50);
    await running.stopWorker();

    next = await spawnWorker(`shutdown-${running.taskQueue}`, {
      databaseUrl: running.databaseUrl,
      temporalAddress: running.temporalAddress,
      taskQueue: running.taskQueue,
      providerUrl: running.sandboxUrl,
    });
    const [row] = await running.sql<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${paymentId}`;
    const final = await running.temporal.workflow.getHandle(row!.workflow_id).result();
    expect(final.status).toBe(201);
    const [payment] = await running.sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
    expect(payment!.status).toBe('succeeded');
    expect((await chargesAtProvider(running.sandboxUrl, paymentId)).map((charge) => charge.status)).toEqual(['succeeded']);
    // Either the stopping worker finished the task within its grace (one try), or the task
    // failed at the shutdown and the next worker tried again, asking the PSP first (two):
    // one charge at the PSP either way.
    expect([1, 2]).toContain(await chargeAttempts(running, paymentId));
  });

  it('the worker process sets it from WORKER_SHUTDOWN_GRACE_SECONDS (30 s by default), slots only when set', () => {
    expect(workerTuning(loadConfig({}))).toEqual({ shutdownGraceTime: '30s' });
    const tuned = workerTuning(loadConfig({ WORKER_SHUTDOWN_GRACE_SECONDS: '45', WORKER_MAX_CACHED_WORKFLOWS: '500', WORKER_MAX_CONCURRENT_ACTIVITIES: '50', WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '20' }));
    expect(tuned).toEqual({ shutdownGraceTime: '45s', maxCachedWorkflows: 500, maxConcurrentActivityTaskExecutions: 50, maxConcurrentWorkflowTaskExecutions: 20 });
  });
});
