/**
 * The checks every fault scenario ends with: the retry's answer, the effects counted per
 * payment, and the verdict over all trials. Vitest-only (scripts/faults.ts does not load it).
 */
import { expect } from 'vitest';
import type { TestStack } from '../stack';
import { judge, takeCensus } from './census';
import type { Merchant } from '../../../testkit/merchant';
import { finalStatusOf, paymentIdIn, untilFinal, type Api, type PaymentRequest } from './payments';
import type { ScenarioResult, ScenarioTally } from './results';

/** Counts one payment's effects (charges, ledger, events, webhook deliveries, runs) against what `plan` must end as. */
export async function tallyEffects(
  tally: ScenarioTally,
  stack: TestStack,
  merchant: Merchant,
  plan: PaymentRequest,
  paymentId: string,
  subject?: string,
): Promise<void> {
  const judgement = judge(await takeCensus(stack, paymentId, { merchant, countRuns: true }), plan.outcome, subject);
  tally.judged(judgement);
  tally.add('redeliveries (same event id, deduped by the merchant)', judgement.redeliveries);
}

/**
 * After the fault: each key, sent again, answers its payment's final outcome for the same
 * payment, and that payment's effects are counted. A key without a payment is an anomaly.
 */
export async function retryAndTally(
  tally: ScenarioTally,
  stack: TestStack,
  merchant: Merchant,
  api: Api,
  timeoutMs: number,
  pairs: (readonly [PaymentRequest, string | null])[],
): Promise<void> {
  for (const [plan, id] of pairs) {
    if (!id) {
      tally.anomaly(`${plan.key}: no payment id`);
      continue;
    }
    const { response } = await untilFinal(api, plan, timeoutMs);
    if (response.status !== finalStatusOf(plan.outcome) || paymentIdIn(response) !== id) {
      tally.anomaly(`${plan.key}: retry answered ${response.status} ${response.text.slice(0, 200)}`);
    }
    await tallyEffects(tally, stack, merchant, plan, id, `${plan.body.payment_method} ${id}`);
  }
}

/** Zero duplicate and zero lost effects, nothing unexpected, and every subject counted. */
export function expectCleanScenario(result: ScenarioResult, subjects: number): void {
  expect(result.anomalies).toEqual([]);
  expect(result.findings).toEqual([]);
  expect(result.duplicateEffects).toBe(0);
  expect(result.lostEffects).toBe(0);
  expect(result.subjects).toBe(subjects);
}
