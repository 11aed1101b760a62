import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completeChallenge } from '../../testkit/sandbox';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';

/**
 * Payments that wait (issue 21), at the edges where two parties act at once: the merchant's
 * cancel against the customer finishing the 3-D Secure challenge. Real stack: Temporal,
 * PostgreSQL, the worker and the sandbox PSP with its challenge pages and signed webhooks.
 * docs/CONTRACT.md: "Payments that wait".
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({
    sandbox: { asyncSettleMs: 3000 },
    api: { PROVIDER_POLL_FIRST_MS: 1000, PROVIDER_POLL_MAX_MS: 2000 },
  });
  tenant = await stack.createTenant('waiting-races');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => expectLedgerConsistent(stack.sql));
afterAll(async () => stack?.stop());

const returnUrl = 'http://127.0.0.1:9/return';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function settled(id: string, client = api, timeoutMs = 30_000) {
  return eventually(async () => {
    const { json } = await client.get(`/v1/payments/${id}`);
    return ['requires_action', 'processing'].includes(json.status) ? null : json;
  }, timeoutMs);
}

/** The payment's merchant events by type: exactly one per fact. */
async function eventsOf(id: string): Promise<Record<string, number>> {
  const rows = await stack.sql<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_events WHERE tenant_id = ${tenant.id} AND event_key LIKE ${`payment:${id}:%`} GROUP BY type`;
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

async function ledgerCapturesOf(id: string): Promise<number> {
  const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_transactions WHERE payment_id = ${id} AND refund_id IS NULL`;
  return row!.n;
}

describe('cancel while the customer completes the challenge: exactly one outcome wins', () => {
  it('for each of 5 payments: canceled (challenge voided, no money) or succeeded (cancel refused 409, charge stands), the same in PostgreSQL, the API and at the PSP', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: returnUrl }, uniqueKey());
      expect(created.status, created.text).toBe(202);
      expect(created.json.status).toBe('requires_action');
      const id = created.json.id as string;
      const challengeUrl = created.json.next_action.redirect_to_url.url as string;

      // The same moment: the customer's Approve and the merchant's cancel. The cancel travels
      // further (API, Temporal update, the workflow's void at the PSP) than the customer's one
      // form post, so the customer is held back by 0 to 200 ms: either may reach the PSP first.
      const customerLagMs = [0, 200, 20, 100, 50][i]!;
      const cancelKey = uniqueKey();
      const [customer, cancel] = await Promise.all([
        sleep(customerLagMs).then(() => completeChallenge(challengeUrl, 'approve')),
        api.post(`/v1/payments/${id}/cancel`, {}, cancelKey),
      ]);
      const payment = await settled(id);
      const charges = await chargesAtProvider(stack.sandboxUrl, id);
      // One charge at the PSP, never a second one.
      expect(charges).toHaveLength(1);
      const charge = charges[0]!;
      const label = `payment ${i} ${id}: cancel ${cancel.status} ${cancel.text}; challenge ${customer.status}; psp ${charge.status}`;

      if (cancel.status === 200) {
        // The cancel won: voided at the PSP (the challenge shows expired), no money anywhere.
        outcomes.push('canceled');
        expect(cancel.json, label).toMatchObject({ id, status: 'canceled', amount_captured_minor: 0 });
        expect(payment, label).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
        expect(charge, label).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
        expect(customer.status, label).toBe(410);
        expect(await ledgerCapturesOf(id), label).toBe(0);
        expect(await eventsOf(id), label).toEqual({ 'payment.requires_action': 1, 'payment.canceled': 1 });
      } else {
        // The customer won: the cancel is refused and the charge stands, booked once.
        outcomes.push('succeeded');
        expect(cancel.status, label).toBe(409);
        expect(cancel.json.error.type, label).toBe('payment_not_cancelable');
        expect(customer.status, label).toBe(303);
        expect(payment, label).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
        expect(charge, label).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, amount_refunded_minor: 0 });
        expect(await ledgerCapturesOf(id), label).toBe(1);
        expect(await eventsOf(id), label).toEqual({ 'payment.requires_action': 1, 'payment.succeeded': 1 });
      }
      // Never money kept for a canceled payment: the PSP and PostgreSQL agree.
      const [row] = await stack.sql<{ status: string; amount_captured_minor: number }[]>`SELECT status, amount_captured_minor FROM payments WHERE id = ${id}`;
      expect(row!.status, label).toBe(charge.status === 'canceled' ? 'canceled' : 'succeeded');
      expect(row!.amount_captured_minor, label).toBe(charge.amount_captured_minor - charge.amount_refunded_minor);
      // The cancel's answer is the key's answer: a retry of the same request replays it.
      const replay = await api.post(`/v1/payments/${id}/cancel`, {}, cancelKey);
      expect(replay.status, label).toBe(cancel.status);
      expect(replay.text, label).toBe(cancel.text);
    }
    console.log(`cancel vs. challenge race outcomes: ${outcomes.join(', ')}`);
  });
});
