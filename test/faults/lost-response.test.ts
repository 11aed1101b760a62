import { afterAll, beforeAll, describe, it } from 'vitest';
import { apiClient, eventually, type Tenant, type TestStack } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';
import { FAULT_TRIALS, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { chargeAttempts, paymentIdOfKey, untilQuiet } from '../helpers/faults/census';
import { startDroppingProxy } from '../helpers/faults/dropping-proxy';
import type { Merchant } from '../../testkit/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { finalStatusOf, paymentIdIn, paymentRequest, untilFinal, type Api, type PaymentRequest } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, tallyEffects } from '../helpers/faults/verify';

/**
 * Scenario 3. Lost responses, on both sides of the orchestrator:
 * a. the provider commits the charge and never answers (pm_card_timeout_after_charge);
 * b. the provider answers later than our client's timeout (pm_card_slow > PROVIDER_TIMEOUT_MS);
 * c. the API's answer is lost after the workflow committed (the connection drops at its
 *    first byte); the client retries with the same key;
 * d. the client gives up while the payment is still running and retries.
 * idempotency.test.ts shows (a) once; here every variant repeats and is counted.
 */

const providerTimeoutMs = 1500;
let faults: FaultStack;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;

beforeAll(async () => {
  faults = await startFaultStack('lost-response', { providerTimeoutMs, sandbox: { slowMs: 2500 } });
  ({ stack, merchant, tenant, api } = faults);
});
afterAll(async () => {
  await expectLedgerConsistent(stack.sql);
  await faults?.stop();
});

/** Waits until quiet, then counts each payment's effects against its expected outcome. */
async function count(tally: ScenarioTally, pairs: [PaymentRequest, string][]): Promise<void> {
  await untilQuiet(stack, pairs.map(([, id]) => id), { merchant, timeoutMs: QUIET_MS });
  for (const [plan, id] of pairs) await tallyEffects(tally, stack, merchant, plan, id);
}


describe('3. lost responses', () => {
  for (const [id, method, title, measure] of [
    ['3a-provider-lost-response', 'pm_card_timeout_after_charge', '3a. Provider commits the charge, never answers', 'from the request until its final answer (provider timeout, then the lookup by sub-key)'],
    ['3b-provider-timeout', 'pm_card_slow', `3b. Provider answers after our ${providerTimeoutMs} ms timeout`, 'from the request until its final answer (timeouts and retries under the same sub-key)'],
  ] as const) {
    it(
      `${title}: the retry finds the charge by its sub-key, exactly one charge`,
      async () => {
        const tally = new ScenarioTally(id, title, measure);
        const result = await runTrials(tally, FAULT_TRIALS, async () => {
          const plans = [paymentRequest(method), paymentRequest(method)];
          const started = Date.now();
          const answers = await Promise.all(plans.map((plan) => untilFinal(api, plan, QUIET_MS)));
          tally.recovered(Date.now() - started);
          const pairs: [PaymentRequest, string][] = [];
          for (const [i, plan] of plans.entries()) {
            const { response, attempts } = answers[i]!;
            tally.add('client retries after 202', attempts - 1);
            if (response.status !== finalStatusOf(plan.outcome)) tally.anomaly(`${plan.key}: answered ${response.status} ${response.text.slice(0, 200)}`);
            const paymentId = paymentIdIn(response) ?? (await paymentIdOfKey(stack, tenant.id, plan.key));
            if (paymentId) pairs.push([plan, paymentId]);
            else tally.anomaly(`${plan.key}: no payment`);
            // The fault really happened: the first attempt got no answer and the charge was retried.
            const charged = paymentId ? await chargeAttempts(stack, paymentId) : 0;
            tally.sample('charge attempts', charged);
            if (charged < 2) tally.anomaly(`${plan.key}: the charge was not retried (attempt ${charged})`);
          }
          await count(tally, pairs);
        });
        expectCleanScenario(result, FAULT_TRIALS * 2);
      },
      scenarioTimeout(FAULT_TRIALS, 60_000),
    );
  }

  it(
    '3c. the API answer is lost after the workflow committed: the retry with the same key replays it, byte for byte, one charge',
    async () => {
      const tally = new ScenarioTally('3c-api-response-dropped', '3c. API response lost after commit, client retries', 'from the dropped connection until the retry had its answer');
      const proxy = await startDroppingProxy(stack.apiUrl);
      try {
        const viaProxy = apiClient(proxy.url, tenant.apiKey);
        const result = await runTrials(tally, FAULT_TRIALS, async () => {
          const plan = paymentRequest('pm_card_visa');
          const droppedBefore = proxy.dropped();
          const lost = await viaProxy.post('/v1/payments', plan.body, plan.key).then(
            (r) => r,
            () => null,
          );
          const droppedAt = Date.now();
          if (lost !== null || proxy.dropped() !== droppedBefore + 1) tally.anomaly(`${plan.key}: the answer was not dropped (${lost?.status})`);
          // The API only writes its answer once the outcome is stored.
          const [record] = await stack.sql<{ state: string; response_body: string | null; resource_id: string }[]>`
            SELECT state, response_body, resource_id FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${plan.key}`;
          if (record?.state !== 'completed') tally.anomaly(`${plan.key}: record is ${record?.state ?? 'missing'} after the answer was written`);

          const retry = await api.post('/v1/payments', plan.body, plan.key);
          tally.recovered(Date.now() - droppedAt);
          if (retry.status !== 201 || retry.headers.get('idempotent-replayed') !== 'true' || retry.text !== record?.response_body) {
            tally.anomaly(`${plan.key}: retry answered ${retry.status} replayed=${retry.headers.get('idempotent-replayed')} (stored and replayed bodies ${retry.text === record?.response_body ? 'match' : 'differ'})`);
          }
          await count(tally, [[plan, paymentIdIn(retry) ?? record?.resource_id ?? 'none']]);
        });
        expectCleanScenario(result, FAULT_TRIALS);
      } finally {
        await proxy.close();
      }
    },
    scenarioTimeout(FAULT_TRIALS, 30_000),
  );

  it(
    '3d. the client gives up while the payment runs: the retry attaches to the same run and gets the one outcome',
    async () => {
      const tally = new ScenarioTally('3d-client-abort', '3d. Client aborts mid-flight, retries with the same key', 'from the abort until the retry had its final answer');
      const result = await runTrials(tally, FAULT_TRIALS, async () => {
        const plan = paymentRequest('pm_card_slow');
        const abort = new AbortController();
        const abandoned = fetch(`${stack.apiUrl}/v1/payments`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'idempotency-key': plan.key, 'content-type': 'application/json' },
          body: JSON.stringify(plan.body),
          signal: abort.signal,
        }).catch(() => null);
        // Give up once the payment is under way (its intent is persisted, the provider is charging).
        const paymentId = await eventually(async () => {
          const id = await paymentIdOfKey(stack, tenant.id, plan.key);
          const [row] = id ? await stack.sql`SELECT 1 FROM payments WHERE id = ${id}` : [];
          return row ? id : null;
        }, 60_000, 50);
        abort.abort();
        const abortedAt = Date.now();
        if ((await abandoned) !== null) tally.add('answered before the abort', 1);

        const { response } = await untilFinal(api, plan, QUIET_MS);
        tally.recovered(Date.now() - abortedAt);
        const [record] = await stack.sql<{ response_body: string | null }[]>`
          SELECT response_body FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${plan.key}`;
        if (response.status !== 201 || paymentIdIn(response) !== paymentId || response.text !== record?.response_body) {
          tally.anomaly(`${plan.key}: retry answered ${response.status} ${response.text.slice(0, 200)}`);
        }
        await count(tally, [[plan, paymentId]]);
      });
      expectCleanScenario(result, FAULT_TRIALS);
    },
    scenarioTimeout(FAULT_TRIALS, 30_000),
  );
});
