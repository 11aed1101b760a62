import { afterAll, beforeAll, describe, it } from 'vitest';
import { apiClient, isolatedApi, type TestStack } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';
import { FAULT_STORM_KEYS, FAULT_TRIALS, QUIET_MS, STORM_SIZE, scenarioTimeout } from '../helpers/faults/config';
import { judge, takeCensus, untilQuiet } from '../helpers/faults/census';
import type { Merchant } from '../../testkit/merchant';
import { tenantWithMerchant } from '../helpers/faults/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { finalStatusOf, paymentIdIn, paymentRequest, untilFinal, type ApiResponse } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario } from '../helpers/faults/verify';

/**
 * Scenario 1. Duplicate storms: every round fires STORM_SIZE identical requests for each of
 * FAULT_STORM_KEYS keys at once, spread over two API processes sharing the database, and
 * counts what each key caused. idempotency.test.ts proves one storm on one key; this
 * repeats many keys at once, round after round, and measures.
 */

let faults: FaultStack;
let stack: TestStack;
let secondApi: Awaited<ReturnType<typeof isolatedApi>>;
let merchant: Merchant;

beforeAll(async () => {
  // Each round has a tenant of its own (tenantWithMerchant), beside the fault stack's.
  faults = await startFaultStack('storms', { sandbox: { slowMs: 1500 } });
  ({ stack, merchant } = faults);
  secondApi = await isolatedApi(stack, stack.temporal);
  faults.alsoStop(() => secondApi.close());
});
afterAll(async () => {
  await faults?.stop();
});

/** Payment methods rotated over the keys of a round: fast, slow, declined and manual capture. */
const mixes = [
  ['pm_card_visa', 'automatic'],
  ['pm_card_slow', 'automatic'],
  ['pm_card_declined', 'automatic'],
  ['pm_card_visa', 'manual'],
] as const;

describe('1. duplicate storms', () => {
  it(
    `${STORM_SIZE} concurrent identical requests per key, ${FAULT_STORM_KEYS} keys at once: one charge, one posting, one event, one delivery per key`,
    async () => {
      const tally = new ScenarioTally(
        '1-duplicate-storms',
        `1. Duplicate storms (${STORM_SIZE} identical requests x ${FAULT_STORM_KEYS} keys at once, 2 API processes)`,
        'from the first request of a round until every request of it had its final answer',
      );
      const tenant = await tenantWithMerchant(stack, merchant, 'storms');
      const apis = [apiClient(stack.apiUrl, tenant.apiKey), apiClient(secondApi.url, tenant.apiKey)];

      const result = await runTrials(tally, FAULT_TRIALS, async (round) => {
        const plans = Array.from({ length: FAULT_STORM_KEYS }, (_, i) => {
          const [method, capture] = mixes[(round + i) % mixes.length]!;
          return paymentRequest(method, capture);
        });
        const started = Date.now();
        const storms = await Promise.all(
          plans.map((plan) => Promise.all(Array.from({ length: STORM_SIZE }, (_, n) => apis[n % 2]!.post('/v1/payments', plan.body, plan.key)))),
        );

        const paymentOf = new Map<string, string>();
        for (const [i, plan] of plans.entries()) {
          const responses: ApiResponse[] = storms[i]!;
          const expected = finalStatusOf(plan.outcome);
          // 202 (still running) and 503 temporal_unavailable (the engine did not answer within
          // the API's deadline; nothing was recorded, Retry-After) both tell the client to send
          // the same request again; every other answer must be the key's final one.
          const retryLater = (r: ApiResponse) => r.status === 202 || (r.status === 503 && r.json?.error?.type === 'temporal_unavailable');
          const pending = responses.filter(retryLater).length;
          tally.add('pending (202) answers', responses.filter((r) => r.status === 202).length);
          tally.add('503 temporal_unavailable answers (retried by key)', responses.filter((r) => r.status === 503).length);
          const unexpected = responses.filter((r) => r.status !== expected && !retryLater(r));
          for (const r of unexpected) tally.anomaly(`${plan.key}: unexpected ${r.status} ${r.text.slice(0, 200)}`);
          // A storm that could not all be answered in the bounded wait ends with the client's retry.
          const finalAnswer = pending ? (await untilFinal(apis[0]!, plan, QUIET_MS)).response : null;
          const finals = [...responses.filter((r) => r.status === expected), ...(finalAnswer ? [finalAnswer] : [])];
          if (new Set(finals.map((r) => r.text)).size !== 1) tally.anomaly(`${plan.key}: final answers differ (${new Set(finals.map((r) => r.text)).size} distinct bodies)`);
          const fresh = finals.filter((r) => r.headers.get('idempotent-replayed') === null).length;
          // One request owns the key; every other final answer is a replay (none at all if the owner got 202).
          if (fresh > 1) tally.anomaly(`${plan.key}: ${fresh} final answers not marked Idempotent-Replayed`);
          const ids = new Set([...responses.filter((r) => r.status !== 503), ...(finalAnswer ? [finalAnswer] : [])].map(paymentIdIn));
          if (ids.size !== 1) tally.anomaly(`${plan.key}: responses name ${ids.size} different payments`);
          const id = paymentIdIn(finals[0] ?? responses[0]!);
          if (id) paymentOf.set(plan.key, id);
          else tally.anomaly(`${plan.key}: no payment id in any answer`);
        }
        tally.recovered(Date.now() - started);

        if (paymentOf.size) await untilQuiet(stack, [...paymentOf.values()], { merchant, timeoutMs: QUIET_MS });
        for (const plan of plans) {
          const id = paymentOf.get(plan.key);
          if (!id) continue;
          const judgement = judge(await takeCensus(stack, id, { merchant, countRuns: true }), plan.outcome);
          tally.judged(judgement);
          tally.add('redeliveries (same event id, deduped by the merchant)', judgement.redeliveries);
        }
        tally.add('requests', plans.length * STORM_SIZE);
      });

      expectCleanScenario(result, FAULT_TRIALS * FAULT_STORM_KEYS);
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(FAULT_TRIALS, 60_000),
  );
});
