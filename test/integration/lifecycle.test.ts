import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { chargesAtProvider, effectsOf, expectLedgerConsistent } from '../helpers/effects';

/**
 * The money movements after the charge (docs/CONTRACT.md §3, §5, §8), each under the idempotency
 * contract. A capture, a cancel and refunds up to the capture, as every kind runs them, are in
 * test/integration/kinds/; here what the sandbox shows beyond them.
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('lifecycle');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => expectLedgerConsistent(stack.sql));
afterAll(async () => stack?.stop());

const manual = (amount = 1000, method = 'pm_card_visa') => ({
  order_id: uniqueKey('ord'),
  amount_minor: amount,
  currency: 'EUR',
  payment_method: method,
  capture_method: 'manual',
});

async function authorize(amount = 1000, method = 'pm_card_visa') {
  const response = await api.post('/v1/payments', manual(amount, method), uniqueKey());
  expect(response.status).toBe(201);
  expect(response.json).toMatchObject({ status: 'requires_capture', amount_captured_minor: 0, capture_method: 'manual' });
  return response.json as { id: string; workflow_id: string };
}

async function paid(amount = 1000, method = 'pm_card_visa') {
  const response = await api.post('/v1/payments', { ...manual(amount, method), capture_method: 'automatic' }, uniqueKey());
  expect(response.status).toBe(201);
  return response.json as { id: string };
}

describe('manual capture', () => {
  it('captures part of an authorization, and refuses more than was authorized', async () => {
    const payment = await authorize(1000);
    const tooMuch = await api.post(`/v1/payments/${payment.id}/capture`, { amount_minor: 1001 }, uniqueKey());
    expect(tooMuch.status).toBe(409);
    expect(tooMuch.json.error.type).toBe('capture_exceeds_authorized');
    const partial = await api.post(`/v1/payments/${payment.id}/capture`, { amount_minor: 600 }, uniqueKey());
    expect(partial.status).toBe(200);
    expect(partial.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 600 });
  });

  it('refuses a second capture under another key with 409, not a stuck workflow', async () => {
    const payment = await authorize();
    expect((await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey())).status).toBe(200);
    const again = await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey());
    expect(again.status).toBe(409);
    expect(again.json.error.type).toBe('payment_not_capturable');
  });

  it('lets only one of a concurrent capture and cancel win', async () => {
    const payment = await authorize();
    const [capture, cancel] = await Promise.all([
      api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey()),
      api.post(`/v1/payments/${payment.id}/cancel`, {}, uniqueKey()),
    ]);
    expect([capture.status, cancel.status].sort()).toEqual([200, 409]);
    const final = await api.get(`/v1/payments/${payment.id}`);
    expect(final.json.status).toBe(capture.status === 200 ? 'succeeded' : 'canceled');
  });

  it('refuses to capture or cancel an automatic payment', async () => {
    const payment = await paid();
    const capture = await api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey());
    expect(capture.status).toBe(409);
    expect(capture.json.error.type).toBe('payment_not_capturable');
    const cancel = await api.post(`/v1/payments/${payment.id}/cancel`, {}, uniqueKey());
    expect(cancel.status).toBe(409);
    expect(cancel.json.error.type).toBe('payment_not_cancelable');
  });
});

describe('an authorization left uncaptured', () => {
  let short: TestStack;
  beforeAll(async () => {
    short = await startStack({ api: { AUTHORIZATION_WINDOW_SECONDS: 2 } });
  });
  afterAll(async () => short?.stop());

  it('is voided at the provider by a durable timer when its window ends', async () => {
    const shortTenant = await short.createTenant();
    const shortApi = apiClient(short.apiUrl, shortTenant.apiKey);
    const created = await shortApi.post('/v1/payments', manual(), uniqueKey());
    expect(created.json.status).toBe('requires_capture');
    const expired = await eventually(async () => {
      const r = await shortApi.get(`/v1/payments/${created.json.id}`);
      return r.json.status === 'canceled' ? r.json : null;
    }, 15_000, 250);
    expect(expired.failure).toMatchObject({ code: 'authorization_expired' });
    const [charge] = await chargesAtProvider(short.sandboxUrl, created.json.id);
    expect(charge!.status).toBe('canceled');
    const late = await shortApi.post(`/v1/payments/${created.json.id}/capture`, {}, uniqueKey());
    expect(late.status).toBe(409);
  });
});

describe('refunds', () => {
  it('replays a refund under its key, and refuses the key with another amount', async () => {
    const payment = await paid(1000);
    const key = uniqueKey();
    const first = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 250 }, key);
    const again = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 250 }, key);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 251 }, key)).status).toBe(422);
    expect((await api.get(`/v1/payments/${payment.id}`)).json.amount_refunded_minor).toBe(250);
  });

  it('never refunds more than was captured, however many refunds race (20 concurrent)', async () => {
    const payment = await paid(1000);
    const refund = (key: string) => api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 150 }, key);
    const keys = Array.from({ length: 20 }, () => uniqueKey());
    // A refund still running when the API's bounded wait ends is answered 202; its retry with
    // the same key gets the final answer (docs/CONTRACT.md §3.1.6), as a client would do.
    const responses = await Promise.all(
      keys.map(async (key) => {
        const first = await refund(key);
        if (first.status !== 202) return first;
        return eventually(async () => {
          const again = await refund(key);
          return again.status === 202 ? null : again;
        }, 60_000);
      }),
    );
    const succeeded = responses.filter((r) => r.status === 201);
    expect(succeeded).toHaveLength(6); // 6 × 150 = 900 ≤ 1000 < 7 × 150
    expect(responses.filter((r) => r.status === 409).every((r) => r.json.error.type === 'refund_exceeds_captured')).toBe(true);
    expect(succeeded.length + responses.filter((r) => r.status === 409).length).toBe(20);
    const after = await api.get(`/v1/payments/${payment.id}`);
    expect(after.json).toMatchObject({ status: 'succeeded', amount_refunded_minor: 900 });
    const [charge] = await chargesAtProvider(stack.sandboxUrl, payment.id);
    expect(charge!.amount_refunded_minor).toBe(900);
    const [ledger] = await stack.sql<{ refunded: number }[]>`
      SELECT coalesce(sum(e.amount_minor), 0)::bigint AS refunded FROM ledger_entries e
      JOIN ledger_transactions t ON t.id = e.transaction_id JOIN ledger_accounts a ON a.id = e.account_id
      WHERE t.payment_id = ${payment.id} AND t.refund_id IS NOT NULL AND a.code = 'merchant_balance'`;
    expect(ledger!.refunded).toBe(900); // the ledger agrees with the provider
  });

  it('refuses to refund a payment that was never captured', async () => {
    const payment = await authorize();
    const refund = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 100 }, uniqueKey());
    expect(refund.status).toBe(409);
    expect(refund.json.error.type).toBe('payment_not_refundable');
  });

  it('records a refund the provider refuses as failed and gives its amount back', async () => {
    const payment = await paid(1000, 'pm_card_refund_fails');
    const refund = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 400 }, uniqueKey());
    expect(refund.status).toBe(402);
    expect(refund.json.error).toMatchObject({ type: 'refund_failed', refund: { status: 'failed', amount_minor: 400 } });
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'succeeded', amount_refunded_minor: 0 });
    const [event] = await stack.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' = ${refund.json.error.refund.id}`;
    expect(event!.type).toBe('refund.failed');
    expect((await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 1000 }, uniqueKey())).status).toBe(402);
  });
});

describe('compensation when money moved but the payment cannot complete', () => {
  async function freezeMerchantAccount(tenantId: string, currency: string) {
    await stack.sql`
      INSERT INTO ledger_accounts (tenant_id, code, currency, frozen) VALUES (${tenantId}, 'merchant_balance', ${currency}, true)
      ON CONFLICT (tenant_id, code, currency) DO UPDATE SET frozen = true`;
  }

  it('refunds the charge when the ledger refuses it, and records why on the payment', async () => {
    const frozen = await stack.createTenant('frozen');
    await freezeMerchantAccount(frozen.id, 'CHF');
    const frozenApi = apiClient(stack.apiUrl, frozen.apiKey);
    const body = { order_id: uniqueKey('ord'), amount_minor: 700, currency: 'CHF', payment_method: 'pm_card_visa' };
    const key = uniqueKey();
    const response = await frozenApi.post('/v1/payments', body, key);
    expect(response.status).toBe(402);
    expect(response.json.error.type).toBe('payment_failed');
    const payment = response.json.error.payment;
    expect(payment).toMatchObject({ status: 'failed', amount_captured_minor: 0, failure: { code: 'ledger_rejected' } });
    expect(payment.failure.message).toMatch(/ledger refused/i);
    expect(payment.failure.message).toMatch(/Compensated: refunded 700 CHF/);
    const [charge] = await chargesAtProvider(stack.sandboxUrl, payment.id);
    expect(charge).toMatchObject({ status: 'succeeded', amount_captured_minor: 700, amount_refunded_minor: 700 });
    expect(await effectsOf(stack.sql, stack.sandboxUrl, payment.id)).toEqual({ charges: 1, ledgerTransactions: 0, events: { 'payment.failed': 1 } });
    expect((await frozenApi.post('/v1/payments', body, key)).text).toBe(response.text);
    // A failed payment leaves the order free for a new attempt (which the frozen ledger refuses again).
    expect((await frozenApi.post('/v1/payments', body, uniqueKey())).status).toBe(402);
  });

  it('surfaces a compensation the provider refuses: never "Compensated", the payment says it needs an operator', async () => {
    const frozen = await stack.createTenant('frozen-refund-fails');
    await freezeMerchantAccount(frozen.id, 'NOK');
    const frozenApi = apiClient(stack.apiUrl, frozen.apiKey);
    const body = { order_id: uniqueKey('ord'), amount_minor: 650, currency: 'NOK', payment_method: 'pm_card_refund_fails' };
    const response = await frozenApi.post('/v1/payments', body, uniqueKey());
    expect(response.status).toBe(402);
    const payment = response.json.error.payment;
    expect(payment).toMatchObject({ status: 'failed', failure: { code: 'compensation_failed' } });
    expect(payment.failure.message).toMatch(/ledger refused/i);
    expect(payment.failure.message).toMatch(/Compensation FAILED, needs an operator: refunded 650 NOK of charge \S+ \(.*refused refund/);
    expect(payment.failure.message).not.toMatch(/Compensated:/);
    // The money is still with the provider's charge: exactly what the operator is told.
    const [charge] = await chargesAtProvider(stack.sandboxUrl, payment.id);
    expect(charge).toMatchObject({ status: 'succeeded', amount_captured_minor: 650, amount_refunded_minor: 0 });
    expect(await effectsOf(stack.sql, stack.sandboxUrl, payment.id)).toEqual({ charges: 1, ledgerTransactions: 0, events: { 'payment.failed': 1 } });
  });

  it('refunds a manual capture the ledger refuses, and answers the capture with why', async () => {
    const frozen = await stack.createTenant('frozen-capture');
    const frozenApi = apiClient(stack.apiUrl, frozen.apiKey);
    const created = await frozenApi.post('/v1/payments', { ...manual(900), currency: 'SEK' }, uniqueKey());
    expect(created.json.status).toBe('requires_capture');
    await freezeMerchantAccount(frozen.id, 'SEK');
    const capture = await frozenApi.post(`/v1/payments/${created.json.id}/capture`, {}, uniqueKey());
    expect(capture.status).toBe(402);
    expect(capture.json.error.payment).toMatchObject({ status: 'failed', failure: { code: 'ledger_rejected' } });
    const [charge] = await chargesAtProvider(stack.sandboxUrl, created.json.id);
    expect(charge).toMatchObject({ amount_captured_minor: 900, amount_refunded_minor: 900 });
  });
});
