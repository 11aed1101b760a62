import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CreatePaymentBody } from '../../api/schemas';
import { requestFingerprint } from '../../domain/fingerprint';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { apiClient, eventually, decidedPayment, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * Payments that wait, end to end through the API against the real stack: Temporal,
 * PostgreSQL, the worker and the sandbox PSP with its challenge pages and signed webhooks to
 * POST /provider_webhooks/sandbox. docs/CONTRACT.md: "Payments that wait".
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({
    sandbox: { asyncSettleMs: 500 },
    // The poll is the safety net behind the webhooks: short here, so a lost webhook costs a second.
    api: { PROVIDER_POLL_FIRST_MS: 1000, PROVIDER_POLL_MAX_MS: 2000 },
  });
  tenant = await stack.createTenant('waits');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => {
  await setFaults({ duplicate: 0, reorder: 0, delay_ms: 0, loss: 0 });
  await expectLedgerConsistent(stack.sql);
});
afterAll(async () => stack?.stop());

const returnUrl = 'http://127.0.0.1:9/return';
const body = (payment_method: string, extra: Record<string, unknown> = {}) => ({
  order_id: uniqueKey('ord'),
  amount_minor: 2500,
  currency: 'EUR',
  payment_method,
  return_url: returnUrl,
  ...extra,
});
const approve = (url: string, result: 'approve' | 'deny' = 'approve') =>
  fetch(url, { method: 'POST', body: new URLSearchParams({ result }), redirect: 'manual' });
async function setFaults(faults: Record<string, number>) {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/webhook_faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(faults) });
  expect(response.status).toBeLessThan(300);
}
/** Waits until the sandbox PSP has sent every webhook of the charge (none pending: held back, delayed or failing). */
async function webhooksSent(chargeId: string) {
  await eventually(async () => {
    const [events] = await stack.sql<{ unsent: number }[]>`
      SELECT count(*) FILTER (WHERE state = 'pending')::int AS unsent FROM sandbox.events WHERE charge_id = ${chargeId}`;
    return events!.unsent === 0;
  });
}
/** The payment's merchant events by type: exactly one per fact. */
async function eventsOf(id: string): Promise<Record<string, number>> {
  const rows = await stack.sql<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_events WHERE tenant_id = ${tenant.id} AND event_key LIKE ${`payment:${id}:%`} GROUP BY type`;
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

describe('3-D Secure: requires_action, then the customer decides', () => {
  it('answers 202 requires_action with next_action; Approve decides it succeeded; the first answer replays byte for byte', async () => {
    const key = uniqueKey();
    const request = body('pm_card_threeDSecureRequired');
    const first = await api.post('/v1/payments', request, key);
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ status: 'requires_action', next_action: { type: 'redirect_to_url', redirect_to_url: { return_url: returnUrl } } });
    expect(first.json.next_action.redirect_to_url.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/challenge\//);

    const done = await approve(first.json.next_action.redirect_to_url.url);
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toContain(returnUrl);
    const payment = await decidedPayment(api, first.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, next_action: null });

    const replay = await api.post('/v1/payments', request, key);
    expect(replay.status).toBe(202);
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.requires_action': 1, 'payment.succeeded': 1 });
  });

  it('Deny declines it (authentication_failed) and frees the order', async () => {
    const request = body('pm_card_threeDSecureRequired');
    const first = await api.post('/v1/payments', request, uniqueKey());
    await approve(first.json.next_action.redirect_to_url.url, 'deny');
    expect(await decidedPayment(api, first.json.id)).toMatchObject({ status: 'declined', failure: { code: 'authentication_failed' } });
    const again = await api.post('/v1/payments', { ...request, payment_method: 'pm_card_visa' }, uniqueKey());
    expect(again.status).toBe(201);
  });

  it('a second payment for an order waiting for its customer is refused (the order is held)', async () => {
    const request = body('pm_card_threeDSecureRequired');
    const first = await api.post('/v1/payments', request, uniqueKey());
    expect(first.status).toBe(202);
    const second = await api.post('/v1/payments', { ...request, payment_method: 'pm_card_visa' }, uniqueKey());
    expect(second.status).toBe(409);
    expect(second.json.error.type).toBe('order_already_paid');
    await approve(first.json.next_action.redirect_to_url.url, 'deny');
    await decidedPayment(api, first.json.id);
  });

  it('manual capture after a challenge: requires_action → requires_capture → captured', async () => {
    const first = await api.post('/v1/payments', body('pm_card_threeDSecureRequired', { capture_method: 'manual' }), uniqueKey());
    const early = await api.post(`/v1/payments/${first.json.id}/capture`, {}, uniqueKey());
    expect(early.status).toBe(409);
    expect(early.json.error.type).toBe('payment_not_capturable');
    await approve(first.json.next_action.redirect_to_url.url);
    expect(await decidedPayment(api, first.json.id)).toMatchObject({ status: 'requires_capture' });
    const captured = await eventually(async () => {
      const response = await api.post(`/v1/payments/${first.json.id}/capture`, {}, uniqueKey());
      return response.status === 200 ? response : null;
    });
    expect(captured.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.requires_action': 1, 'payment.requires_capture': 1, 'payment.succeeded': 1 });
  });

  it('abandoned: expired when AUTHENTICATION_WINDOW_SECONDS ends, voided at the PSP; a late Approve changes nothing', async () => {
    const short = await stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 2, PROVIDER_POLL_FIRST_MS: 500 });
    const client = apiClient(short.url, tenant.apiKey);
    const first = await client.post('/v1/payments', body('pm_card_threeDSecureRequired'), uniqueKey());
    expect(first.status).toBe(202);
    const payment = await decidedPayment(client, first.json.id);
    expect(payment).toMatchObject({ status: 'expired', failure: { code: 'authentication_expired' }, amount_captured_minor: 0 });
    await approve(first.json.next_action.redirect_to_url.url);
    // Whatever the PSP says of the late Approve has reached the API.
    await webhooksSent(payment.provider_charge_id);
    expect((await client.get(`/v1/payments/${first.json.id}`)).json.status).toBe('expired');
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.requires_action': 1, 'payment.expired': 1 });
  });
});

describe('return_url', () => {
  it('refuses what is not https (or http on a loopback host) with 400, charging nothing', async () => {
    for (const bad of ['ftp://shop.example/return', 'http://shop.example/return', 'javascript:alert(1)', 'https://user:pw@shop.example/', 'not a url']) {
      const response = await api.post('/v1/payments', body('pm_card_visa', { return_url: bad }), uniqueKey());
      expect(response.status, bad).toBe(400);
      expect(response.json.error.type).toBe('invalid_request');
    }
    const ok = await api.post('/v1/payments', body('pm_card_visa', { return_url: 'https://shop.example/return?order=1' }), uniqueKey());
    expect(ok.status).toBe(201);
  });

  it('refuses plain http in production, even on loopback', async () => {
    const production = await stack.startApi({ NODE_ENV: 'production' });
    const response = await apiClient(production.url, tenant.apiKey).post('/v1/payments', body('pm_card_visa'), uniqueKey());
    expect(response.status).toBe(400);
    expect(response.json.error.message).toMatch(/https in production/);
  });

  it('a request without return_url keeps the fingerprint it always had (rules out 422s for keys stored before return_url existed)', async () => {
    const key = uniqueKey();
    const request = { order_id: uniqueKey('ord'), amount_minor: 700, currency: 'EUR', payment_method: 'pm_card_visa' };
    const validated = CreatePaymentBody.parse(request);
    expect(Object.keys(validated)).not.toContain('return_url');
    const first = await api.post('/v1/payments', request, key);
    expect(first.status).toBe(201);
    const [record] = await stack.sql<{ fingerprint: string }[]>`
      SELECT fingerprint FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    expect(record!.fingerprint).toBe(requestFingerprint({}, validated));
  });
});

describe('asynchronous methods: processing, then the bank decides', () => {
  it('SEPA: 202 processing, then succeeded', async () => {
    const first = await api.post('/v1/payments', body('pm_sepa_debit'), uniqueKey());
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({ status: 'processing', next_action: null });
    expect(await decidedPayment(api, first.json.id)).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.processing': 1, 'payment.succeeded': 1 });
  });

  it('SEPA failing: processing, then declined debit_failed', async () => {
    const first = await api.post('/v1/payments', body('pm_sepa_debit_fails'), uniqueKey());
    expect(first.status).toBe(202);
    expect(await decidedPayment(api, first.json.id)).toMatchObject({ status: 'declined', failure: { code: 'debit_failed' } });
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.processing': 1, 'payment.declined': 1 });
  });
});

describe('the PSP’s webhooks: duplicated, reordered, delayed, lost', () => {
  it('duplicated and reordered webhooks: one event per fact, the final state kept', async () => {
    await setFaults({ duplicate: 1, reorder: 1, delay_ms: 200 });
    const first = await api.post('/v1/payments', body('pm_sepa_debit'), uniqueKey());
    const decided = await decidedPayment(api, first.json.id);
    expect(decided).toMatchObject({ status: 'succeeded' });
    // Every webhook the PSP holds for the charge (held back, delayed, duplicated) sent, then look again.
    await webhooksSent(decided.provider_charge_id);
    expect((await api.get(`/v1/payments/${first.json.id}`)).json.status).toBe('succeeded');
    expect(await eventsOf(first.json.id)).toEqual({ 'payment.processing': 1, 'payment.succeeded': 1 });
    const stored = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM provider_events WHERE payment_id = ${first.json.id}`;
    expect(stored[0]!.n).toBeGreaterThanOrEqual(2);
  });

  it('a webhook reporting what the run has already recorded is not passed on: no signal, no workflow task for it', async () => {
    // Delayed past the record of the outcome; the run stays open, waiting for the capture.
    await setFaults({ delay_ms: 500 });
    const first = await api.post('/v1/payments', body('pm_card_visa', { capture_method: 'manual' }), uniqueKey());
    expect(first.json.status).toBe('requires_capture');
    await webhooksSent(first.json.provider_charge_id);
    const forwarded = await eventually(async () => {
      const rows = await stack.sql<{ forwarded: boolean }[]>`SELECT forwarded_at IS NOT NULL AS forwarded FROM provider_events WHERE payment_id = ${first.json.id}`;
      return rows.length > 0 && rows.every((r) => r.forwarded) ? rows.length : null;
    });
    expect(forwarded).toBeGreaterThan(0);
    const [row] = await stack.sql<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${first.json.id}`;
    const events = (await stack.temporal.workflow.getHandle(row!.workflow_id).fetchHistory()).events ?? [];
    expect(events.filter((e) => e.workflowExecutionSignaledEventAttributes)).toEqual([]);
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(1);
    // The run is still there for the merchant's capture.
    const captured = await api.post(`/v1/payments/${first.json.id}/capture`, {}, uniqueKey());
    expect(captured.status).toBe(200);
    expect(captured.json.status).toBe('succeeded');
  });

  it('every webhook lost: the workflow’s own poll decides the payment', async () => {
    await setFaults({ loss: 1 });
    const first = await api.post('/v1/payments', body('pm_card_threeDSecureRequired'), uniqueKey());
    await approve(first.json.next_action.redirect_to_url.url);
    expect(await decidedPayment(api, first.json.id)).toMatchObject({ status: 'succeeded' });
    const stored = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM provider_events WHERE payment_id = ${first.json.id}`;
    expect(stored[0]!.n).toBe(0);
  });
});

describe('POST /provider_webhooks/{provider}', () => {
  const post = (raw: string, headers: Record<string, string>, provider = 'sandbox') =>
    fetch(`${stack.apiUrl}/provider_webhooks/${provider}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw });
  const event = (id: string, charge: Record<string, unknown>) =>
    JSON.stringify({ id, type: `charge.${String(charge.status)}`, created: Math.floor(Date.now() / 1000), data: { object: charge } });
  const chargeJson = (id: string, reference: string, status: string) => ({
    id,
    object: 'charge',
    status,
    amount_minor: 2500,
    amount_captured_minor: status === 'succeeded' ? 2500 : 0,
    amount_refunded_minor: 0,
    currency: 'EUR',
    capture: true,
    reference,
    failure_code: null,
    failure_message: null,
    next_action: null,
    created_at: new Date().toISOString(),
  });
  const signed = (raw: string) => ({ 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) });

  it('refuses an unverified or stale request with 400 and stores nothing', async () => {
    const raw = event(uniqueKey('evt'), chargeJson('ch_x', 'pay_x', 'succeeded'));
    const unsigned = await post(raw, {});
    expect(unsigned.status).toBe(400);
    expect(((await unsigned.json()) as { error: { type: string } }).error.type).toBe('webhook_signature_invalid');
    const wrong = await post(raw, { 'sandbox-signature': signSandboxWebhook(raw, 'not-the-secret-0123456789') });
    expect(wrong.status).toBe(400);
    const stale = await post(raw, { 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret, Math.floor(Date.now() / 1000) - 3600) });
    expect(stale.status).toBe(400);
    const tampered = await post(raw.replace('2500', '2501'), signed(raw));
    expect(tampered.status).toBe(400);
    const rows = await stack.sql`SELECT 1 FROM provider_events WHERE charge_id = 'ch_x'`;
    expect(rows).toHaveLength(0);
  });

  it('404 for another provider than the configured one; no API key, no Idempotency-Key needed', async () => {
    const raw = event(uniqueKey('evt'), chargeJson('ch_y', 'pay_y', 'succeeded'));
    expect((await post(raw, signed(raw), 'stripe')).status).toBe(404);
  });

  it('acknowledges an event for an unknown charge and keeps it for an operator; a duplicate changes nothing', async () => {
    const id = uniqueKey('evt');
    const raw = event(id, chargeJson(uniqueKey('ch'), uniqueKey('pay'), 'succeeded'));
    const first = await post(raw, signed(raw));
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ received: true, event_id: id, duplicate: false, disposition: 'unknown_charge' });
    const again = await post(raw, signed(raw));
    expect(await again.json()).toEqual({ received: true, event_id: id, duplicate: true, disposition: 'unknown_charge' });
    const rows = await stack.sql<{ payment_id: string | null }[]>`SELECT payment_id FROM provider_events WHERE provider = 'sandbox' AND event_id = ${id}`;
    expect(rows).toEqual([{ payment_id: null }]);
  });

  it('a late processing after succeeded changes nothing (a final state is never left)', async () => {
    const paid = await api.post('/v1/payments', { ...body('pm_card_visa'), return_url: undefined }, uniqueKey());
    expect(paid.status).toBe(201);
    const id = uniqueKey('evt');
    const raw = event(id, chargeJson(paid.json.provider_charge_id, paid.json.id, 'processing'));
    const response = await post(raw, signed(raw));
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ duplicate: false, disposition: 'forward' });
    expect((await api.get(`/v1/payments/${paid.json.id}`)).json).toMatchObject({ status: 'succeeded' });
    expect(await eventsOf(paid.json.id)).toEqual({ 'payment.succeeded': 1 });
  });
});
