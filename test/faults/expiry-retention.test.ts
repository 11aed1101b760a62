import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowNotFoundError } from '@temporalio/client';
import { apiClient, eventually, isolatedApi, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { FAULT_TRIALS, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { judge, paymentIdOfKey, takeCensus, untilQuiet, type Judgement } from '../helpers/faults/census';
import type { Merchant } from '../../testkit/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentIdIn, paymentRequest, untilFinal, type Api, type PaymentRequest } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario } from '../helpers/faults/verify';

/**
 * Scenarios 7 and 8: what happens when an idempotency record's retention window ends.
 *
 * 7. The key expired (IDEMPOTENCY_RETENTION_SECONDS=1, then the retention job) and the
 *    client retries the same request with the old key. Two behaviours, both without a
 *    second charge:
 *    a. Temporal still holds the run's history: the deterministic workflow id and
 *       REJECT_DUPLICATE make the API attach to the closed run and answer its original result;
 *    b. the history is gone too (DeleteWorkflowExecution, as Temporal's own retention would):
 *       a new run starts and the domain guard refuses it, 409 order_already_paid.
 * 8. The retention job deletes only finished, expired records: never one that has not
 *    expired, never an unfinished one, however old.
 */

let faults: FaultStack;
let stack: TestStack;
let longRetention: Awaited<ReturnType<typeof isolatedApi>>;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;
let keepingApi: Api;

beforeAll(async () => {
  // Records of this API expire one second after they are written.
  faults = await startFaultStack('expiry', { api: { IDEMPOTENCY_RETENTION_SECONDS: 1 }, sandbox: { slowMs: 8000 } });
  ({ stack, merchant, tenant, api } = faults);
  // A second API process on the same database that keeps its records for an hour.
  longRetention = await isolatedApi(stack, stack.temporal, { IDEMPOTENCY_RETENTION_SECONDS: 3600 });
  faults.alsoStop(() => longRetention.close());
  keepingApi = apiClient(longRetention.url, tenant.apiKey);
});
afterAll(async () => {
  await expectLedgerConsistent(stack.sql);
  await faults?.stop();
});

async function recordOf(key: string) {
  const [row] = await stack.sql<{ state: string; resource_id: string; workflow_id: string; expired: boolean }[]>`
    SELECT state, resource_id, workflow_id, expires_at < now() AS expired FROM idempotency_records
    WHERE tenant_id = ${tenant.id} AND operation = 'POST /v1/payments' AND idempotency_key = ${key}`;
  return row ?? null;
}

/**
 * Waits until every given key's record is finished and past its expiry, then runs the retention
 * job once. Finished too: the job deletes only completed records, and a record is completed by
 * its run's last step, which can come after the API has answered (under load the job can run
 * between the two).
 */
async function expireAndRunRetention(keys: string[]): Promise<number> {
  await eventually(async () => (await Promise.all(keys.map(recordOf))).every((r) => r?.expired && r.state === 'completed'), 30_000, 100);
  return stack.retention.runOnce();
}

/** Simulates Temporal's own retention: the closed run's history is deleted. */
async function deleteHistory(workflowId: string): Promise<void> {
  await stack.temporal.workflowService.deleteWorkflowExecution({ namespace: 'default', workflowExecution: { workflowId } });
  await eventually(async () => {
    try {
      await stack.temporal.connection.withDeadline(Date.now() + 5000, () => stack.temporal.workflow.getHandle(workflowId).describe());
      return false;
    } catch (error) {
      return error instanceof WorkflowNotFoundError;
    }
  }, 180_000, 500);
}

describe('7. a retry after the idempotency record expired', () => {
  it(
    'history retained: the API attaches to the closed run and answers its original result; history deleted: 409 order_already_paid; never a second charge',
    async () => {
      const retained = new ScenarioTally('7a-expired-key-history-retained', '7a. Key expired, Temporal history retained: retry answered from the closed run', 'from the retry until its answer');
      const deleted = new ScenarioTally('7b-expired-key-history-deleted', '7b. Key and Temporal history expired: retry refused by the order guard (409)', 'from the retry until its answer');
      const runs: { plan: PaymentRequest; variant: 'retained' | 'deleted'; paymentId: string; first: string; workflowId: string }[] = [];

      // All trials' payments first, so that the one-second expiry is waited for once.
      await runTrials(retained, FAULT_TRIALS, async () => {
        deleted.trials++;
        for (const variant of ['retained', 'deleted'] as const) {
          const plan = paymentRequest('pm_card_visa');
          const { response } = await untilFinal(api, plan, QUIET_MS);
          if (response.status !== 201) (variant === 'retained' ? retained : deleted).anomaly(`first request answered ${response.status}`);
          const record = await recordOf(plan.key);
          runs.push({ plan, variant, paymentId: paymentIdIn(response)!, first: response.text, workflowId: record!.workflow_id });
        }
      });
      retained.sample('records deleted by the retention job', await expireAndRunRetention(runs.map((r) => r.plan.key)));
      for (const run of runs) {
        const tally = run.variant === 'retained' ? retained : deleted;
        if (await recordOf(run.plan.key)) tally.anomaly(`${run.plan.key}: the expired record was not deleted by the retention job`);
      }
      // The dev server deletes histories in the background (tens of seconds): all at once.
      await Promise.all(
        runs
          .filter((r) => r.variant === 'deleted')
          .map(async (run) => {
            const started = Date.now();
            await deleteHistory(run.workflowId);
            deleted.sample('history deletion took (ms)', Date.now() - started);
          }),
      );

      for (const run of runs) {
        const tally = run.variant === 'retained' ? retained : deleted;
        try {
          const started = Date.now();
          const { response } = await untilFinal(api, run.plan, QUIET_MS);
          tally.recovered(Date.now() - started);
          const claimed = await paymentIdOfKey(stack, tenant.id, run.plan.key);
          if (run.variant === 'retained') {
            // The closed run's result is the first final response, byte for byte.
            if (response.status !== 201 || response.text !== run.first) tally.anomaly(`${run.plan.key}: retry answered ${response.status} ${response.text.slice(0, 200)}`);
            tally.add(`retry marked Idempotent-Replayed: ${response.headers.get('idempotent-replayed') ?? 'absent'}`, 1);
          } else if (response.status !== 409 || response.json?.error?.type !== 'order_already_paid' || response.json?.error?.payment_id !== run.paymentId) {
            tally.anomaly(`${run.plan.key}: retry answered ${response.status} ${response.text.slice(0, 200)}`);
          }
          // The retry's answer is now stored under the key again and replays as such.
          const again = await api.post('/v1/payments', run.plan.body, run.plan.key);
          if (again.status !== response.status || again.text !== response.text || again.headers.get('idempotent-replayed') !== 'true') {
            tally.anomaly(`${run.plan.key}: second retry answered ${again.status} replayed=${again.headers.get('idempotent-replayed')}`);
          }
          await untilQuiet(stack, [run.paymentId], { merchant, timeoutMs: QUIET_MS });
          // Whatever the new claim's payment id, it never reached the provider.
          const judgement = judge(await takeCensus(stack, run.paymentId, { merchant, countRuns: run.variant === 'retained' }), 'succeeded');
          if (claimed && claimed !== run.paymentId) {
            const strayCharges = (await chargesAtProvider(stack.sandboxUrl, claimed)).length;
            if (strayCharges) judgement.duplicates.push({ effect: `provider charge under the retry's new payment id ${claimed}`, extra: strayCharges });
            tally.add('retries that claimed a new payment id', 1);
          }
          tally.judged(judgement);
        } catch (error) {
          tally.anomaly(`${run.plan.key}: ${(error as Error)?.stack ?? error}`);
        }
      }
      const results = [retained.write(), deleted.write()];
      for (const result of results) {
        expectCleanScenario(result, FAULT_TRIALS);
      }
    },
    scenarioTimeout(FAULT_TRIALS, 30_000, 300_000),
  );
});

describe('8. the retention job', () => {
  it(
    'deletes finished, expired records only: never one still within its window, never one whose operation is unfinished',
    async () => {
      const tally = new ScenarioTally('8-retention-job', '8. Retention job: finished+expired deleted; unexpired and unfinished kept', 'n/a (no fault to recover from)', 'records');
      const result = await runTrials(tally, FAULT_TRIALS, async () => {
        const expired = paymentRequest('pm_card_visa');
        const unexpired = paymentRequest('pm_card_visa');
        const unfinished = paymentRequest('pm_card_slow');
        for (const [client, plan] of [[api, expired], [keepingApi, unexpired]] as const) {
          const { response } = await untilFinal(client, plan, QUIET_MS);
          if (response.status !== 201) tally.anomaly(`${plan.key}: answered ${response.status}`);
        }
        // Running, and past its expiry: the provider takes 8 s, the record expires after 1 s.
        const running = api.post('/v1/payments', unfinished.body, unfinished.key);
        await eventually(async () => {
          const record = await recordOf(unfinished.key);
          return record?.state === 'running' && record.expired;
        }, 30_000, 50);
        await expireAndRunRetention([expired.key]);
        const stillRunning = (await recordOf(unfinished.key))?.state === 'running';
        if (!stillRunning) tally.add('unfinished payment finished before the pass (not a trial of the rule)', 1);

        const fates: [PaymentRequest, boolean, string][] = [
          [expired, false, 'finished and expired'],
          [unexpired, true, 'finished, within its window'],
          [unfinished, true, 'unfinished, past its expiry'],
        ];
        for (const [plan, kept, what] of fates) {
          const present = (await recordOf(plan.key)) !== null;
          const judgement: Judgement = { subject: `${what} record ${plan.key}`, duplicates: [], losses: [], anomalies: [], redeliveries: 0 };
          if (kept && !present) judgement.losses.push('deleted by the retention job');
          if (!kept && present) judgement.anomalies.push('expired record survived the retention job');
          tally.judged(judgement);
        }

        // The unfinished operation completes and answers once; its key replays that answer.
        const first = await running;
        const { response } = await untilFinal(api, unfinished, QUIET_MS);
        const paymentId = paymentIdIn(response);
        if (response.status !== 201 || !paymentId || (first.status === 201 && first.text !== response.text)) {
          tally.anomaly(`${unfinished.key}: answered ${first.status} then ${response.status}`);
        }
        const replay = await api.post('/v1/payments', unfinished.body, unfinished.key);
        if (replay.text !== response.text || replay.headers.get('idempotent-replayed') !== 'true') tally.anomaly(`${unfinished.key}: replay differs`);
        if (paymentId) {
          await untilQuiet(stack, [paymentId], { merchant, timeoutMs: QUIET_MS });
          tally.judged(judge(await takeCensus(stack, paymentId, { merchant, countRuns: true }), 'succeeded'), { asSubject: false });
        }
      });

      expectCleanScenario(result, FAULT_TRIALS * 3);
      expect(result.figures['unfinished payment finished before the pass (not a trial of the rule)']).toBeUndefined();
    },
    scenarioTimeout(FAULT_TRIALS, 40_000),
  );
});
