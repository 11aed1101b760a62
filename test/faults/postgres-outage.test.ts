import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { CompletionWaiter } from '../../api/completions';
import { createSql } from '../../db/connect';
import { claimRecord, completeRecord } from '../../db/idempotency-records';
import type { EmbeddedPostgresHandle } from '../../devstack/embedded-postgres';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres';
import { eventually, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { FAULT_TRIALS, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { paymentsInFlight, untilQuiet } from '../helpers/faults/census';
import type { Merchant } from '../../testkit/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentIdIn, paymentRequest, untilFinal, type Api, type PaymentRequest } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, retryAndTally } from '../helpers/faults/verify';
import { fileDatabaseUrl } from '../helpers/database';
import { holdFor } from '../helpers/eventually';

/**
 * Scenario 4. The orchestrator's PostgreSQL (a private embedded server) is stopped while
 * payments are in flight and started again. While it is down, a new payment is refused
 * with 503 and Retry-After; once it is back, the in-flight payments complete, once, and
 * the refused request's retry really runs. The provider sandbox keeps the run's shared
 * database: it is another company's system.
 */

const inFlightPerTrial = 3;
let pg: EmbeddedPostgresHandle;
let privatePostgres: PrivatePostgres;
let faults: FaultStack;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;

beforeAll(async () => {
  privatePostgres = await startPrivatePostgres('faults-pg');
  pg = privatePostgres.pg;
  faults = await startFaultStack('postgres-outage', { databaseUrl: pg.url, sandboxDatabaseUrl: await fileDatabaseUrl(), sandbox: { slowMs: 6000 } });
  ({ stack, merchant, tenant, api } = faults);
});
afterAll(async () => {
  await pg?.start();
  await faults?.stop();
  await privatePostgres?.remove();
});

describe('4. PostgreSQL stopped and restarted mid-flight', () => {
  it(
    'answers 503 with Retry-After while it is down; in-flight payments resume and complete once when it is back',
    async () => {
      const tally = new ScenarioTally(
        '4-postgres-restart',
        `4. PostgreSQL stopped and restarted mid-flight (${inFlightPerTrial} payments in flight)`,
        'from the restart of PostgreSQL (its start-up included) until every in-flight payment was recorded and its event delivered',
      );
      const result = await runTrials(tally, FAULT_TRIALS, async () => {
        const plans = Array.from({ length: inFlightPerTrial }, () => paymentRequest('pm_card_slow'));
        const firstAnswers = plans.map((plan) => api.post('/v1/payments', plan.body, plan.key).catch(() => null));
        // In flight: the intent is persisted and the worker is charging the provider.
        const { ids, midCharge } = await paymentsInFlight(stack, tenant.id, plans.map((plan) => plan.key));
        tally.add('payments caught mid-charge by the fault', midCharge);
        if (midCharge === 0) tally.anomaly('no payment was mid-charge when the fault struck: the trial tested nothing');

        const stoppedAt = Date.now();
        await pg.stop();
        tally.sample('stop took (ms)', Date.now() - stoppedAt);
        const refusedPlan = paymentRequest('pm_card_visa');
        let startedAt: number;
        try {
          // Fail closed: a new payment is refused, and says when to come back.
          const refused = await api.post('/v1/payments', refusedPlan.body, refusedPlan.key);
          if (refused.status !== 503 || refused.json?.error?.type !== 'service_unavailable' || !(Number(refused.headers.get('retry-after')) > 0)) {
            tally.anomaly(`while down, a new payment got ${refused.status} ${refused.text.slice(0, 200)}`);
          }
          const ready = await fetch(`${stack.apiUrl}/readyz`);
          if (ready.status !== 503) tally.anomaly(`readyz answered ${ready.status} while PostgreSQL was down`);
          // The provider commits the in-flight charges meanwhile (it has its own database). A
          // lookup that fails (the sandbox answering 500 on a busy machine) is asked again.
          const charged = (id: string) => chargesAtProvider(stack.sandboxUrl, id).then((c) => c.length > 0, () => false);
          await eventually(async () => (await Promise.all(ids.map(charged))).every(Boolean), 30_000);
        } finally {
          // Also when the trial broke while it was down: the next trial needs it.
          startedAt = Date.now();
          await pg.start();
        }
        const upAt = Date.now();
        tally.sample('down for (ms)', upAt - stoppedAt);
        tally.sample('start took (ms)', upAt - startedAt);

        const quiet = await untilQuiet(stack, ids, { merchant, timeoutMs: QUIET_MS });
        if (quiet !== null) tally.recovered(Date.now() - startedAt);
        for (const answer of await Promise.all(firstAnswers)) tally.add(`first answers ${answer?.status ?? 'connection error'}`, 1);

        // The refused request executed nothing: no record, no payment. Its retry really runs.
        const [left] = await stack.sql<{ records: number; payments: number }[]>`
          SELECT (SELECT count(*)::int FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${refusedPlan.key}) AS records,
                 (SELECT count(*)::int FROM payments WHERE tenant_id = ${tenant.id} AND order_id = ${refusedPlan.body.order_id}) AS payments`;
        if (left!.records !== 0 || left!.payments !== 0) tally.anomaly(`the refused request left ${left!.records} records and ${left!.payments} payments`);
        const retryStarted = Date.now();
        const retried = await untilFinal(api, refusedPlan, QUIET_MS);
        tally.sample('new payment after the restart answered in (ms)', Date.now() - retryStarted);
        if (retried.response.status !== 201 || retried.response.headers.get('idempotent-replayed') !== null) {
          tally.anomaly(`the refused request's retry answered ${retried.response.status} replayed=${retried.response.headers.get('idempotent-replayed')}`);
        }

        const pairs: [PaymentRequest, string | null][] = [...plans.map((plan, i) => [plan, ids[i]!] as [PaymentRequest, string]), [refusedPlan, paymentIdIn(retried.response)]];
        await untilQuiet(stack, pairs.flatMap(([, id]) => (id ? [id] : [])), { merchant, timeoutMs: QUIET_MS });
        // Each in-flight key now answers with its final outcome, for the same payment.
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, pairs);
      });

      expectCleanScenario(result, FAULT_TRIALS * (inFlightPerTrial + 1));
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(FAULT_TRIALS, 90_000),
  );
});

describe('regression: completions still wake waiting requests after a PostgreSQL outage', () => {
  it('answers a request waiting on a running operation when the operation completes, not when its bounded wait runs out', async () => {
    // The API's waiter on a client of its own, as in the API process.
    const sql = createSql(pg.url, { max: 2, connectTimeoutSeconds: 2 });
    const waiter = new CompletionWaiter(sql, stack.logger);
    await waiter.start();
    try {
      // postgres.js re-subscribes LISTEN once, right when the connection drops; the database
      // stays down longer than that.
      await pg.stop();
      await holdFor(3000, 'the outage outlasts the driver’s one re-subscription');
      await pg.start();

      const scope = { tenantId: tenant.id, operation: 'POST /v1/payments', key: uniqueKey(), fingerprint: 'f'.repeat(64), retentionSeconds: 3600 };
      const owner = { workflowId: `regression-${scope.key}`, resourceId: `pay_${scope.key}` };
      await eventually(async () => claimRecord(stack.sql, scope, owner).catch(() => null), 30_000, 200);
      const expectation = waiter.expect(scope.tenantId, scope.operation, scope.key);
      try {
        const woken = expectation.wait(20_000);
        await completeRecord(stack.sql, scope, owner, { status: 201, body: '{}', location: null });
        // The stored answer (carried by the NOTIFY) or true (the record seen completed):
        // woken by the completion; false: only the end of the bounded wait ended it.
        expect(await woken).not.toBe(false);
      } finally {
        expectation.dispose();
      }
    } finally {
      await waiter.stop();
      await sql.end({ timeout: 1 });
    }
  }, 180_000);
});
