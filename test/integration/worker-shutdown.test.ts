import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config';
import { workerTuning } from '../../worker/process';
import { apiClient, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { chargeInFlight, paymentIdOfKey } from '../helpers/faults/census';

/**
 * SIGTERM (worker.shutdown()) with shutdownGraceTime: the worker stops polling and lets the
 * charge it is running finish, instead of cancelling it for another worker to retry after
 * its timeout. Without a grace time the same charge is cancelled mid-call.
 */

let stack: TestStack | null = null;
afterEach(async () => {
  await stack?.stop();
  stack = null;
});

/** Starts a slow charge, shuts the worker down while the provider call is in flight, and says whether the charge completed. */
async function chargeAcrossShutdown(shutdownGraceTime: `${number}s`): Promise<{ completed: boolean; failed: boolean }> {
  stack = await startStack({ sandbox: { slowMs: 2500 }, providerTimeoutMs: 10_000, workerTuning: { shutdownGraceTime } });
  const tenant = await stack.createTenant('shutdown');
  const key = uniqueKey();
  void apiClient(stack.apiUrl, tenant.apiKey)
    .post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_slow' }, key)
    .catch(() => null);
  const running = stack;
  const paymentId = await eventually(() => paymentIdOfKey(running, tenant.id, key), 30_000);
  await eventually(() => chargeInFlight(running, paymentId), 30_000, 50);
  await running.stopWorker();
  const [row] = await running.sql<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${paymentId}`;
  const history = await running.temporal.workflow.getHandle(row!.workflow_id).fetchHistory();
  const charge = (history.events ?? []).find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'chargeAttempt');
  const about = (attributes: { scheduledEventId?: unknown } | null | undefined) => String(attributes?.scheduledEventId) === String(charge?.eventId);
  return {
    completed: (history.events ?? []).some((e) => about(e.activityTaskCompletedEventAttributes)),
    failed: (history.events ?? []).some((e) => about(e.activityTaskFailedEventAttributes) || about(e.activityTaskCanceledEventAttributes)),
  };
}

describe('worker shutdown', () => {
  it('lets a running charge finish within shutdownGraceTime', async () => {
    expect(await chargeAcrossShutdown('20s')).toEqual({ completed: true, failed: false });
  });

  it('without a grace time, the charge in flight does not complete on this worker', async () => {
    expect((await chargeAcrossShutdown('0s')).completed).toBe(false);
  });

  it('the worker process sets it from WORKER_SHUTDOWN_GRACE_SECONDS (30 s by default), slots only when set', () => {
    expect(workerTuning(loadConfig({}))).toEqual({ shutdownGraceTime: '30s' });
    const tuned = workerTuning(loadConfig({ WORKER_SHUTDOWN_GRACE_SECONDS: '45', WORKER_MAX_CACHED_WORKFLOWS: '500', WORKER_MAX_CONCURRENT_ACTIVITIES: '50', WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '20' }));
    expect(tuned).toEqual({ shutdownGraceTime: '45s', maxCachedWorkflows: 500, maxConcurrentActivityTaskExecutions: 50, maxConcurrentWorkflowTaskExecutions: 20 });
  });
});
