import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, decidedPayment, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * The charge budget, end to end on the real stack (Temporal, PostgreSQL, the worker, two sandbox
 * PSPs with their own databases; no routing: the configured order, `sandbox` then `sandbox-b`).
 * The worker runs with PROVIDER_TRANSIENT_TRIES 2 and PAYMENT_CHARGE_BUDGET_SECONDS 15, so a pass
 * along the route takes a few seconds: every PSP "unavailable" (creates 503, lookups answer none)
 * makes the route start again under new attempts until the budget ends, then `psp_unavailable`
 * (docs/CONTRACT.md §3.8, 5 and 8).
 */

const BUDGET_MS = 15_000;
let stack: TestStack;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {}, charging: { transientTries: 2, budgetMs: BUDGET_MS }, api: { IDEMPOTENCY_WAIT_MS: 1000 } });
  api = apiClient(stack.apiUrl, (await stack.createTenant('charge-budget')).apiKey);
});
afterEach(async () => {
  for (const url of [stack.sandboxUrl, stack.secondSandbox!.url]) await outage(url, 'none');
  await expectLedgerConsistent(stack.sql);
});
afterAll(async () => stack?.stop());

async function outage(url: string, mode: 'none' | 'unavailable') {
  const response = await fetch(`${url}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}

describe('the charge budget', () => {
  it('every PSP unavailable: the route starts again at each PSP under new attempts, then the payment fails psp_unavailable; nothing charged anywhere', async () => {
    for (const url of [stack.sandboxUrl, stack.secondSandbox!.url]) await outage(url, 'unavailable');
    const started = Date.now();
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    const failed = await decidedPayment(api, created.json.id as string, 60_000);
    expect(failed).toMatchObject({ status: 'failed', provider_charge_id: null, failure: { code: 'psp_unavailable', message: expect.stringContaining('charge budget of 15 s') } });
    // Not before the budget ended: the last pass began within it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(BUDGET_MS);
    const attempts = failed.attempts as { attempt: number; provider: string; outcome: string; error_code: string }[];
    // The route [sandbox, sandbox-b] again and again, each attempt its own number (and key), each ended with nothing charged.
    expect(attempts.length % 2).toBe(0);
    expect(attempts.length).toBeGreaterThanOrEqual(4);
    expect(attempts).toEqual(
      attempts.map((_, i) => expect.objectContaining({ attempt: i + 1, provider: i % 2 === 0 ? 'sandbox' : 'sandbox-b', outcome: 'not_charged', error_code: 'psp_error_none_found' })),
    );
    expect(await stack.provider.listChargesByReference(failed.id)).toEqual([]);
    expect(await stack.secondSandbox!.provider.listChargesByReference(failed.id)).toEqual([]);
    // The key's answer is the failure (402 payment_failed with the payment), and the merchant is told once.
    const [events] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM outbox_events WHERE type = 'payment.failed' AND payload->'data'->'object'->>'id' = ${failed.id}`;
    expect(events!.n).toBe(1);
    const [ledger] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_transactions WHERE payment_id = ${failed.id}`;
    expect(ledger!.n).toBe(0);
  });

  it('a PSP back within the budget: the pass started again charges there, once', async () => {
    await outage(stack.sandboxUrl, 'unavailable');
    await outage(stack.secondSandbox!.url, 'unavailable');
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey('pay'));
    const id = created.json.id as string;
    // Until sandbox-b's first attempt ended (the first pass's last PSP): then sandbox comes back.
    await eventually(async () => (await api.get(`/v1/payments/${id}`)).json.attempts?.length >= 3, 30_000, 100, 'the route started again');
    await outage(stack.sandboxUrl, 'none');
    const paid = await decidedPayment(api, id, 60_000);
    expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    const last = (paid.attempts as { attempt: number; provider: string; outcome: string }[]).at(-1)!;
    expect(last).toMatchObject({ provider: 'sandbox', outcome: 'succeeded' });
    expect((await stack.provider.listChargesByReference(id)).map((c) => c.id)).toEqual([paid.provider_charge_id]);
    expect((await stack.provider.findChargeByIdempotencyKey(`${id}:charge:${last.attempt}`))?.id).toBe(paid.provider_charge_id);
    expect(await stack.secondSandbox!.provider.listChargesByReference(id)).toEqual([]);
  });
});
