import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import type { AdyenDouble } from '../../doubles/adyen/server';
import type { DisputeRow } from '../../domain/resources';
import { adyen } from '../../provider/adyen/library';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { adyenTestSettings, startAdyenStack } from '../helpers/adyen';
import { ADMIN_TOKEN, apiClient, decidedPayment, eventually, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * Every PSP report is checked against what it reports on, on the real stack (Temporal dev
 * server, PostgreSQL, the sandbox as `sandbox` and the Adyen double as `adyen-test`):
 * - Adyen's CAPTURE is compared with the capture the run asked for: one that disagrees is
 *   acknowledged and held (`needs_operator`), never booked;
 * - a dispute's report is checked in its workflow at every kind: a second chargeback that
 *   would take the payment's disputed total past what was captured, one past the captured
 *   amount, one in another currency are recorded and held for an operator, nothing posted
 *   until an operator releases it (POST /admin/disputes/{id}/release).
 */

let double: AdyenDouble;
let stack: TestStack;
let stop: () => Promise<void>;
/** Tenants whose payments go to adyen-test; the others' to the sandbox. */
const adyenTenants = new Set<string>();
const route: RoutePlanner = async (request) =>
  adyenTenants.has(request.tenantId) ? { providers: ['adyen-test'], reason: 'test route: adyen-test' } : { providers: ['sandbox'], reason: 'test route: sandbox' };

beforeAll(async () => {
  ({ double, stack, stop } = await startAdyenStack({ route, api: { IDEMPOTENCY_WAIT_MS: 3000 } }));
}, 300_000);
afterAll(async () => stop?.());

const faults = async (f: Record<string, number>) => {
  const response = await fetch(`${double.url}/_sandbox/webhook_faults`, { method: 'POST', body: JSON.stringify(f) });
  expect(response.status).toBe(200);
};

async function tenantAt(kind: 'adyen' | 'sandbox', name: string) {
  const tenant = await stack.createTenant(name);
  if (kind === 'adyen') adyenTenants.add(tenant.id);
  return { tenant, api: apiClient(stack.apiUrl, tenant.apiKey) };
}

type Api = ReturnType<typeof apiClient>;

/** A payment of 2500 EUR, decided (201, or 202 then decided on a busy machine). */
async function payment(api: Api, captureMethod: 'automatic' | 'manual' = 'automatic'): Promise<{ id: string; provider_charge_id: string }> {
  const paid = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: captureMethod }, uniqueKey('pay'));
  expect([201, 202], paid.text).toContain(paid.status);
  const decided = paid.status === 201 ? paid.json : await decidedPayment(api, paid.json.id);
  expect(decided.status).toBe(captureMethod === 'manual' ? 'requires_capture' : 'succeeded');
  return decided;
}

/** The tenant's balances by currency and account (GET /v1/balance). */
async function balances(api: Api): Promise<Record<string, Record<string, number>>> {
  const accounts = (await api.get('/v1/balance')).json.accounts as { account: string; currency: string; balance_minor: number }[];
  const byCurrency: Record<string, Record<string, number>> = {};
  for (const a of accounts) (byCurrency[a.currency] ??= {})[a.account] = a.balance_minor;
  return byCurrency;
}

const validator = new adyen.hmacValidator();

/** A notification as Adyen signs and sends it. */
function signedItem(fields: { eventCode: string; pspReference: string; originalReference: string; merchantReference: string; value: number; currency: string }, additionalData: Record<string, string> = {}) {
  const item = {
    amount: { currency: fields.currency, value: fields.value },
    eventCode: fields.eventCode,
    eventDate: new Date().toISOString(),
    merchantAccountCode: adyenTestSettings.merchantAccount,
    merchantReference: fields.merchantReference,
    pspReference: fields.pspReference,
    originalReference: fields.originalReference,
    reason: '',
    success: 'true',
  };
  return { ...item, additionalData: { ...additionalData, hmacSignature: validator.calculateHmac({ ...item, additionalData } as never, adyenTestSettings.hmacKey) } };
}

async function postAdyen(item: unknown): Promise<void> {
  const answer = await fetch(`${stack.apiUrl}/provider_webhooks/adyen-test`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: item }] }) });
  // Acknowledged, whatever it reports: a refusal would have Adyen send it again and again.
  expect(answer.status).toBe(200);
  expect(await answer.text()).toBe('[accepted]');
}

const pspReference = () => randomBytes(8).toString('hex').toUpperCase();

/** Adyen's CHARGEBACK of a payment: a dispute with its own pspReference. */
async function adyenChargeback(paid: { id: string; provider_charge_id: string }, figures: { value: number; currency: string; disputeReference?: string }): Promise<string> {
  const disputeReference = figures.disputeReference ?? pspReference();
  const dueBy = new Date(Date.now() + 7 * 86_400_000).toISOString();
  await postAdyen(
    signedItem(
      { eventCode: 'CHARGEBACK', pspReference: disputeReference, originalReference: paid.provider_charge_id, merchantReference: paid.id, value: figures.value, currency: figures.currency },
      { defensePeriodEndsAt: dueBy, chargebackReasonCode: '10.4' },
    ),
  );
  return disputeReference;
}

const disputeRecorded = (provider: string, providerDisputeId: string) =>
  eventually(async () => (await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE provider = ${provider} AND provider_dispute_id = ${providerDisputeId}`)[0], 20_000, 50, 'the dispute recorded');

const ledgerOf = async (disputeId: string) => (await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${disputeId}`).map((t) => t.event_key);

/** The dispute as the API shows it and its payment, once it is recorded held. */
async function heldDispute(api: Api, provider: string, providerDisputeId: string, paymentId: string) {
  const row = await disputeRecorded(provider, providerDisputeId);
  // Nothing posted: the step that recorded it would have posted its withdrawal with it.
  expect(await ledgerOf(row.id)).toEqual([]);
  const shown = (await api.get(`/v1/disputes/${row.id}`)).json;
  expect(shown.hold, JSON.stringify(shown)).toMatchObject({ released_at: null });
  const paymentShown = (await api.get(`/v1/payments/${paymentId}`)).json;
  expect(paymentShown.failure).toMatchObject({ code: 'needs_operator' });
  expect(paymentShown.failure.message).toContain(row.id);
  return { row, shown };
}

const eventsOf = async (tenant: Tenant, disputeId: string) =>
  (await stack.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE tenant_id = ${tenant.id} AND payload->'data'->'object'->>'id' = ${disputeId} ORDER BY seq`).map((e) => e.type);

describe('a CAPTURE notification is compared with the capture asked for', () => {
  afterEach(async () => faults({}));

  it('capture 2000 of 2500, then a signed CAPTURE of 2500: acknowledged, the payment held needs_operator, nothing captured or booked', async () => {
    const { api } = await tenantAt('adyen', 'capture-report');
    const paid = await payment(api, 'manual');
    // The double's own CAPTURE (of the 2000 asked) is kept back: the report that comes is the one below.
    await faults({ loss: 1 });
    const capture = await api.post(`/v1/payments/${paid.id}/capture`, { amount_minor: 2000 }, uniqueKey('cap'));
    expect(capture.status, capture.text).toBe(202);
    await eventually(async () => double.paymentsFor(paid.id).some((p) => p.capturedMinor === 2000), 20_000, 50, 'the double captured 2000');

    await postAdyen(signedItem({ eventCode: 'CAPTURE', pspReference: pspReference(), originalReference: paid.provider_charge_id, merchantReference: paid.id, value: 2500, currency: 'EUR' }));
    const held = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${paid.id}`);
      return json.failure?.code === 'needs_operator' || json.status !== 'requires_capture' ? json : false;
    }, 20_000, 50, 'the CAPTURE decided');
    expect(held).toMatchObject({ status: 'requires_capture', amount_captured_minor: 0, failure: { code: 'needs_operator' } });
    expect(held.failure.message).toMatch(/amount 2500, not 2000/);
    expect(await balances(api)).toEqual({});
  });
});

describe('a dispute report is checked in its workflow before anything is posted', () => {
  it('adyen: a second CHARGEBACK with another pspReference on the same payment is held; an operator releases it and only then is it booked', async () => {
    const { tenant, api } = await tenantAt('adyen', 'second-chargeback');
    const paid = await payment(api);
    const first = await adyenChargeback(paid, { value: 2500, currency: 'EUR' });
    const firstRow = await disputeRecorded('adyen-test', first);
    await eventually(async () => (await balances(api)).EUR?.merchant_balance === 0, 20_000, 50, 'the first chargeback booked');
    expect(firstRow.held_reason).toBeNull();

    const second = await adyenChargeback(paid, { value: 2500, currency: 'EUR' });
    const { row, shown } = await heldDispute(api, 'adyen-test', second, paid.id);
    expect(shown.hold.reason).toMatch(/disputed total would be 5000 EUR, more than the 2500 captured/);
    expect(row.stage).toBe('chargeback');
    expect(await ledgerOf(row.id)).toEqual([]);
    expect(await eventsOf(tenant, row.id)).toEqual([]);
    expect((await balances(api)).EUR).toMatchObject({ merchant_balance: 0 });
    // A redelivery (the PSP's retry) changes nothing.
    await adyenChargeback(paid, { value: 2500, currency: 'EUR', disputeReference: second });
    expect((await balances(api)).EUR).toMatchObject({ merchant_balance: 0 });

    // The operator's decision: released, it is booked as the PSP reports it, once.
    const operator = apiClient(stack.apiUrl, ADMIN_TOKEN);
    const released = await operator.request('POST', `/admin/disputes/${row.id}/release`);
    expect(released.status, released.text).toBe(200);
    expect(released.json.hold).toMatchObject({ reason: shown.hold.reason, released_at: expect.any(String) });
    await eventually(async () => (await balances(api)).EUR?.merchant_balance === -2500, 20_000, 50, 'the released chargeback booked');
    expect(await ledgerOf(row.id)).toEqual([`dispute:${row.id}:withdrawal`]);
    await eventually(async () => (await eventsOf(tenant, row.id)).includes('dispute.funds_withdrawn'), 20_000, 50, 'its events sent');
    expect(await eventsOf(tenant, row.id)).toEqual(['dispute.created', 'dispute.funds_withdrawn']);
    expect((await operator.request('POST', `/admin/disputes/${firstRow.id}/release`)).json.error.type).toBe('dispute_not_held');
  });

  /** A dispute the sandbox holds against the charge, as its network would open it, and its signed webhook. */
  async function sandboxChargeback(paid: { id: string; provider_charge_id: string }, figures: { amountMinor: number; currency: string }): Promise<string> {
    const id = `dp_${randomBytes(8).toString('hex')}`;
    const [row] = await stack.sql<Record<string, any>[]>`
      INSERT INTO sandbox.disputes (id, charge_id, amount_minor, currency, reason, stage, status, evidence_due_by)
      VALUES (${id}, ${paid.provider_charge_id}, ${figures.amountMinor}, ${figures.currency}, 'fraudulent', 'chargeback', 'needs_response', now() + interval '7 days')
      RETURNING *`;
    const object = {
      id, object: 'dispute', charge: paid.provider_charge_id, reference: paid.id, amount_minor: figures.amountMinor, currency: figures.currency, reason: 'fraudulent',
      stage: 'chargeback', status: 'needs_response', evidence: {}, evidence_due_by: row!.evidence_due_by.toISOString(), evidence_submitted_at: null,
      created_at: row!.created_at.toISOString(), updated_at: row!.updated_at.toISOString(), fee_minor: 1500,
    };
    const raw = JSON.stringify({ id: uniqueKey('evt'), type: 'charge.dispute.created', created: Math.floor(Date.now() / 1000), data: { object } });
    const answer = await fetch(`${stack.apiUrl}/provider_webhooks/sandbox`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
      body: raw,
    });
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(await answer.json()).toMatchObject({ disposition: 'dispute' });
    return id;
  }

  const outOfBounds = [
    { what: 'of 999 999 against 2500 captured', amountMinor: 999_999, currency: 'EUR', reason: /disputed total would be 999999 EUR, more than the 2500 captured/ },
    { what: 'in USD against a EUR payment', amountMinor: 2500, currency: 'USD', reason: /currency USD is not the payment's EUR/ },
  ];
  const kinds = [
    { kind: 'adyen' as const, provider: 'adyen-test', open: (paid: { id: string; provider_charge_id: string }, f: { amountMinor: number; currency: string }) => adyenChargeback(paid, { value: f.amountMinor, currency: f.currency }) },
    { kind: 'sandbox' as const, provider: 'sandbox', open: sandboxChargeback },
  ];
  it.each(kinds.flatMap((k) => outOfBounds.map((c) => ({ ...k, ...c }))))('$kind: a chargeback $what, as the PSP reports it, is recorded and held; the balance is untouched', async ({ kind, provider, open, amountMinor, currency, reason }) => {
    const { tenant, api } = await tenantAt(kind, `${kind}-${currency}-${amountMinor}`);
    const paid = await payment(api);
    const disputeId = await open(paid, { amountMinor, currency });
    const { row, shown } = await heldDispute(api, provider, disputeId, paid.id);
    expect(shown).toMatchObject({ amount_minor: amountMinor, currency, stage: 'chargeback' });
    expect(shown.hold.reason).toMatch(reason);
    expect(await eventsOf(tenant, row.id)).toEqual([]);
    expect(await balances(api)).toEqual({ EUR: { provider_receivable: 2500, merchant_balance: 2500 } });
  });
});
