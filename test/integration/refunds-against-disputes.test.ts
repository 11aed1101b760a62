import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DisputeRow } from '../../domain/resources';
import { expectLedgerConsistent } from '../helpers/effects';
import { apiClient, eventually, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * Money never leaves twice between refunds and chargebacks (docs/CONTRACT.md §3.2, §3.6.1 item 8),
 * and a payment's status follows its refunds whatever their interleaving, on the real stack: the
 * sandbox opens a chargeback soon after a pm_card_createDispute payment is captured.
 */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({
    sandbox: { disputes: { disputeAfterMs: 200, disputeDecisionMs: 200, disputeEvidenceSeconds: 30 } },
    api: { DISPUTE_POLL_SECONDS: 1 },
  });
});
afterAll(async () => stack?.stop());

type Answer = { status: number; json: any };

async function pay(tenant: Tenant, paymentMethod: string, amountMinor: number): Promise<{ id: string }> {
  const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: amountMinor, currency: 'EUR', payment_method: paymentMethod }, uniqueKey());
  expect(paid.status).toBe(201);
  return paid.json as { id: string };
}

/** A refund under its own key, repeated with that key until its answer is final (a 202 is never final). */
async function refund(tenant: Tenant, paymentId: string, amountMinor: number, key = uniqueKey('refund')): Promise<Answer> {
  const client = apiClient(stack.apiUrl, tenant.apiKey);
  return eventually(async () => {
    const answer = await client.post(`/v1/payments/${paymentId}/refunds`, { amount_minor: amountMinor }, key);
    return answer.status === 202 ? null : answer;
  }, 30_000, 100, `the refund's final answer (key ${key})`);
}

const disputeOf = (paymentId: string, status?: DisputeRow['status']) =>
  eventually(async () => {
    const [row] = await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${paymentId}`;
    return row && (status === undefined || row.status === status) ? row : undefined;
  }, 30_000, 50, `the dispute recorded${status ? ` ${status}` : ''}`);

const refundsAtPsp = async (paymentId: string) => {
  const [payment] = await stack.sql<{ provider_charge_id: string }[]>`SELECT provider_charge_id FROM payments WHERE id = ${paymentId}`;
  const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM sandbox.refunds WHERE charge_id = ${payment!.provider_charge_id}`;
  return row!.n;
};

describe('a refund returns at most what the chargebacks left', () => {
  it('after a lost chargeback, a refund of the payment is 409 payment_disputed, replayed under its key, and nothing is refunded at the PSP', async () => {
    const tenant = await stack.createTenant('refund-after-lost');
    const payment = await pay(tenant, 'pm_card_createDispute', 5001);
    const opened = await disputeOf(payment.id);
    await stack.provider.disputes.updateDispute({ disputeId: opened.provider_dispute_id, idempotencyKey: uniqueKey('ev'), evidence: { uncategorized_text: 'losing_evidence' }, submit: true });
    await disputeOf(payment.id, 'lost');

    const key = uniqueKey('refund');
    const refused = await refund(tenant, payment.id, 5001, key);
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatchObject({ type: 'payment_disputed', amount_refundable_minor: 0 });
    expect(refused.json.error.message).toContain(opened.id);
    // The refusal is the key's answer; a smaller refund is refused too: the network took it all.
    const again = await apiClient(stack.apiUrl, tenant.apiKey).post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 5001 }, key);
    expect(again.status).toBe(409);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await refund(tenant, payment.id, 1)).json.error.type).toBe('payment_disputed');
    expect(await refundsAtPsp(payment.id)).toBe(0);
    expect((await stack.sql`SELECT 1 FROM refunds WHERE payment_id = ${payment.id}`).length).toBe(0);
    const [row] = await stack.sql<{ status: string; amount_refunded_minor: number }[]>`SELECT status, amount_refunded_minor FROM payments WHERE id = ${payment.id}`;
    expect(row).toEqual({ status: 'succeeded', amount_refunded_minor: 0 });
    await expectLedgerConsistent(stack.sql, tenant.id);
  });

  it('while the chargeback waits for a response nothing can be refunded; once it is won its amount is refundable again', async () => {
    const tenant = await stack.createTenant('refund-after-won');
    const payment = await pay(tenant, 'pm_card_createDispute', 3000);
    const opened = await disputeOf(payment.id);
    await eventually(async () => (await stack.sql`SELECT 1 FROM ledger_transactions WHERE event_key = ${`dispute:${opened.id}:withdrawal`}`).length === 1, 30_000, 50, 'the withdrawal posted');
    const held = await refund(tenant, payment.id, 100);
    expect(held.status).toBe(409);
    expect(held.json.error).toMatchObject({ type: 'payment_disputed', amount_refundable_minor: 0 });

    await stack.provider.disputes.updateDispute({ disputeId: opened.provider_dispute_id, idempotencyKey: uniqueKey('ev'), evidence: { uncategorized_text: 'winning_evidence' }, submit: true });
    await disputeOf(payment.id, 'won');
    const first = await refund(tenant, payment.id, 1000);
    expect(first.status).toBe(201);
    // Past the captured amount is the ordinary refusal, not a dispute's.
    const over = await refund(tenant, payment.id, 2001);
    expect(over.status).toBe(409);
    expect(over.json.error).toMatchObject({ type: 'refund_exceeds_captured', amount_refundable_minor: 2000 });
    expect((await refund(tenant, payment.id, 2000)).status).toBe(201);
    expect(await refundsAtPsp(payment.id)).toBe(2);
    const [row] = await stack.sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${payment.id}`;
    expect(row!.status).toBe('refunded');
    await expectLedgerConsistent(stack.sql, tenant.id);
  });
});

describe('concurrent refunds', () => {
  it('ten refunds of 100 at once on a 500 payment: five succeed, five are refused, and the payment is refunded (twice over)', async () => {
    for (let round = 0; round < 2; round++) {
      const tenant = await stack.createTenant(`concurrent-refunds-${round}`);
      const payment = await pay(tenant, 'pm_card_visa', 500);
      const answers = await Promise.all(Array.from({ length: 10 }, () => refund(tenant, payment.id, 100)));
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([201, 201, 201, 201, 201, 409, 409, 409, 409, 409]);
      expect(answers.filter((a) => a.status === 409).every((a) => a.json.error.type === 'refund_exceeds_captured')).toBe(true);
      const [row] = await stack.sql<{ status: string; amount_refunded_minor: number }[]>`SELECT status, amount_refunded_minor FROM payments WHERE id = ${payment.id}`;
      expect(row).toEqual({ status: 'refunded', amount_refunded_minor: 500 });
      const shown = await apiClient(stack.apiUrl, tenant.apiKey).get(`/v1/payments/${payment.id}`);
      expect(shown.json).toMatchObject({ status: 'refunded', amount_refunded_minor: 500 });
      await expectLedgerConsistent(stack.sql, tenant.id);
    }
  });
});
