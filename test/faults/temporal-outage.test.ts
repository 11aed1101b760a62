import { afterAll, beforeAll, describe, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTemporalDevServer, type DevServer } from '../../devstack/temporal-cli';
import { eventually, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { freePort } from '../../devstack/ports';
import { FAULT_TRIALS, LOGS_DIR, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { paymentsInFlight, untilQuiet } from '../helpers/faults/census';
import type { Merchant } from '../../testkit/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentIdIn, paymentRequest, untilFinal, type Api, type PaymentRequest } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, retryAndTally } from '../helpers/faults/verify';

/**
 * Scenario 5. The Temporal server (a private, file-backed dev server on its own port) is
 * killed while payments are in flight and started again on the same file. While it is down
 * a new payment is refused with 503 and nothing is left behind; once it is back, the
 * in-flight workflows resume from their histories and complete, once.
 */

const inFlightPerTrial = 3;
let dataDir: string;
let port: number;
let temporal: DevServer;
let faults: FaultStack;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;

async function startTemporal(): Promise<DevServer> {
  mkdirSync(LOGS_DIR, { recursive: true });
  return startTemporalDevServer({ port, dbFilename: path.join(dataDir, 'temporal.db'), headless: true, logFile: path.join(LOGS_DIR, `temporal-outage-${port}.log`) });
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'payorch-faults-temporal-'));
  port = await freePort();
  temporal = await startTemporal();
  faults = await startFaultStack('temporal-outage', { temporalAddress: temporal.address, sandbox: { slowMs: 6000 }, api: { TEMPORAL_RPC_TIMEOUT_MS: 2000 } });
  ({ stack, merchant, tenant, api } = faults);
});
afterAll(async () => {
  await faults?.stop();
  await temporal?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('5. Temporal stopped and restarted mid-flight', () => {
  it(
    'fails closed with 503 while it is down; in-flight workflows resume and complete once after the restart',
    async () => {
      const tally = new ScenarioTally(
        '5-temporal-restart',
        `5. Temporal dev server (file-backed) killed and restarted mid-flight (${inFlightPerTrial} payments in flight)`,
        'from the restart of the server process (its start-up included) until every in-flight payment was recorded and its event delivered',
      );
      const result = await runTrials(tally, FAULT_TRIALS, async () => {
        const plans = Array.from({ length: inFlightPerTrial }, () => paymentRequest('pm_card_slow'));
        const firstAnswers = plans.map((plan) => api.post('/v1/payments', plan.body, plan.key).catch(() => null));
        const { ids, midCharge } = await paymentsInFlight(stack, tenant.id, plans.map((plan) => plan.key));
        tally.add('payments caught mid-charge by the fault', midCharge);
        if (midCharge === 0) tally.anomaly('no payment was mid-charge when the fault struck: the trial tested nothing');

        const killedAt = Date.now();
        await temporal.stop('SIGKILL');
        const refusedPlan = paymentRequest('pm_card_visa');
        let restartAt: number;
        try {
          const refused = await api.post('/v1/payments', refusedPlan.body, refusedPlan.key);
          if (refused.status !== 503 || refused.json?.error?.type !== 'temporal_unavailable' || !(Number(refused.headers.get('retry-after')) > 0)) {
            tally.anomaly(`while down, a new payment got ${refused.status} ${refused.text.slice(0, 200)}`);
          }
          // Nothing charged and no answer stored (the claim and the intent are kept for the retry).
          const [left] = await stack.sql<{ answered: number; charged: number }[]>`
            SELECT (SELECT count(*)::int FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${refusedPlan.key} AND state = 'completed') AS answered,
                   (SELECT count(*)::int FROM payments WHERE tenant_id = ${tenant.id} AND order_id = ${refusedPlan.body.order_id} AND (status <> 'processing' OR provider_charge_id IS NOT NULL)) AS charged`;
          if (left!.answered !== 0 || left!.charged !== 0) tally.anomaly(`the refused request left ${left!.answered} answers and ${left!.charged} charged payments`);
          const ready = await fetch(`${stack.apiUrl}/readyz`);
          if (ready.status !== 503) tally.anomaly(`readyz answered ${ready.status} while Temporal was down`);
          // The provider commits the in-flight charges while the engine is gone.
          await eventually(async () => (await Promise.all(ids.map((id) => chargesAtProvider(stack.sandboxUrl, id)))).every((c) => c.length > 0), 30_000);
        } finally {
          // Also when the trial broke while it was down: the next trial needs it.
          restartAt = Date.now();
          temporal = await startTemporal();
        }
        const upAt = Date.now();
        tally.sample('down for (ms)', upAt - killedAt);
        tally.sample('restart took (ms)', upAt - restartAt);

        const quiet = await untilQuiet(stack, ids, { merchant, timeoutMs: QUIET_MS });
        if (quiet !== null) tally.recovered(Date.now() - restartAt);
        for (const answer of await Promise.all(firstAnswers)) tally.add(`first answers ${answer?.status ?? 'connection error'}`, 1);

        const retried = await untilFinal(api, refusedPlan, QUIET_MS);
        if (retried.response.status !== 201 || retried.response.headers.get('idempotent-replayed') !== null) {
          tally.anomaly(`the refused request's retry answered ${retried.response.status} replayed=${retried.response.headers.get('idempotent-replayed')}`);
        }
        const pairs: [PaymentRequest, string | null][] = [...plans.map((plan, i) => [plan, ids[i]!] as [PaymentRequest, string]), [refusedPlan, paymentIdIn(retried.response)]];
        await untilQuiet(stack, pairs.flatMap(([, id]) => (id ? [id] : [])), { merchant, timeoutMs: QUIET_MS });
        // Each key now answers with its final outcome, for the same payment.
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, pairs);
      });

      expectCleanScenario(result, FAULT_TRIALS * (inFlightPerTrial + 1));
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(FAULT_TRIALS, 120_000),
  );
});
