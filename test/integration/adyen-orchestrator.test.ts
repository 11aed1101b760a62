import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { adyen } from '../../provider/adyen/library';
import { adyenPspReference, adyenTestSettings, startAdyenStack, startTestAdyenDouble, testAdyenClient } from '../helpers/adyen';
import { apiClient, decidedPayment, eventually, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * The adyen kind end to end through the orchestrator: the API, the payment workflow on a real
 * worker (real Temporal and PostgreSQL) whose registry has `adyen-test` (the client through the
 * official library, against the Adyen double on loopback) beside the stack's sandbox. The
 * double sends its signed notification batches to the API's /provider_webhooks/adyen-test,
 * which answers `[accepted]` (the kind's `notifications: 'batch'`), under the sandbox's webhook
 * faults; and the failover rule as the kind's capability `unknownOutcome: 'replay'` makes it.
 * The flows every kind runs (a charge, a decline, a retried request, a capture held until its
 * CAPTURE, a cancel, a refund pending until its REFUND, a saved card charged off-session, lost
 * answers replayed) run at Adyen in test/integration/kinds/; here what only Adyen shows.
 */
const { merchantAccount } = adyenTestSettings;
const hmacKey: string = adyenTestSettings.hmacKey;
let double: AdyenDouble;
let gone: AdyenDouble;
let stack: TestStack;
let stop: (() => Promise<void>) | undefined;
let tenant: Tenant;
let failoverTenant: Tenant;
let api: ReturnType<typeof apiClient>;
const routes = new Map<string, string[]>();
const route: RoutePlanner = async (request) => {
  const providers = routes.get(request.tenantId) ?? ['adyen-test'];
  return { providers, reason: `test route: ${providers.join(' then ')}` };
};
/** Short, so that a capture whose confirmation never comes ends within the test. */
const WINDOW_SECONDS = 20;

beforeAll(async () => {
  // A second double, closed before its test: nobody listens at its address any more.
  gone = await startTestAdyenDouble();
  ({ double, stack, stop } = await startAdyenStack({ route, extraProviders: { 'adyen-gone': testAdyenClient(gone.url) }, api: { IDEMPOTENCY_WAIT_MS: 3000, AUTHORIZATION_WINDOW_SECONDS: WINDOW_SECONDS } }));
  tenant = await stack.createTenant('adyen');
  failoverTenant = await stack.createTenant('adyen-failover');
  routes.set(failoverTenant.id, ['adyen-gone', 'sandbox']);
  api = apiClient(stack.apiUrl, tenant.apiKey);
}, 300_000);
afterAll(async () => stop?.());

const control = (path: string, body?: unknown) =>
  fetch(`${double.url}/_sandbox${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
const outage = (mode: string) => fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode }) }).then((r) => expect(r.status).toBe(200));
const body = (payment_method = 'pm_card_visa', extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method, ...extra });

describe('Adyen through the orchestrator (the Adyen double)', () => {
  it('a kind that replays never fails over after lost answers: routed to adyen-test then sandbox, while the double is unavailable the payment keeps asking it, and no other PSP charges', async () => {
    const routed = await stack.createTenant('adyen-replay-route');
    routes.set(routed.id, ['adyen-test', 'sandbox']);
    const routedApi = apiClient(stack.apiUrl, routed.apiKey);
    const before = double.paymentsMade();
    await outage('unavailable');
    const created = await routedApi.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    // Past the lookups that let a lookup kind move on (two), it is still asking adyen-test.
    const { workflow_id: workflowId } = (await routedApi.get(`/v1/payments/${created.json.id}`)).json;
    await eventually(async () => {
      const { raw } = await stack.temporal.workflow.getHandle(workflowId).describe();
      const pending = raw.pendingActivities?.find((a) => a.activityType?.name === 'chargeAttempt');
      return (pending?.attempt ?? 0) >= 3;
    }, 60_000);
    expect(await stack.provider.listChargesByReference(created.json.id)).toEqual([]);
    await outage('none');
    const payment = await decidedPayment(routedApi, created.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    expect(payment.attempts).toHaveLength(1);
    expect(double.paymentsMade()).toBe(before + 1);
  });

  it('routed {"fallback":["adyen-gone","sandbox"]}: an Adyen that cannot be reached (nothing sent) fails over, one charge in all', async () => {
    await gone.close();
    const failoverApi = apiClient(stack.apiUrl, failoverTenant.apiKey);
    const created = await failoverApi.post('/v1/payments', body(), uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    const payment = await decidedPayment(failoverApi, created.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'adyen-gone', outcome: 'not_sent', error_code: 'connection_refused' },
      { attempt: 2, provider: 'sandbox', outcome: 'succeeded' },
    ]);
    expect(await stack.provider.listChargesByReference(created.json.id)).toHaveLength(1);
    expect(gone.paymentsMade()).toBe(0);
  });
});

type Kept = { id: string; type: string; state: string; attempts: number };
const keptOf = async (charge: string): Promise<Kept[]> => (await control(`/events?charge=${charge}`)).json.data;
const storedOf = (charge: string) =>
  stack.sql<{ event_id: string; type: string }[]>`SELECT event_id, type FROM provider_events WHERE provider = 'adyen-test' AND charge_id = ${charge} ORDER BY event_id`;
const manualPayment = async (paymentMethod = 'pm_card_visa') => {
  const created = await api.post('/v1/payments', body(paymentMethod, { capture_method: 'manual' }), uniqueKey('pay'));
  expect(created.status, created.text).toBe(201);
  expect(created.json).toMatchObject({ status: 'requires_capture', provider: 'adyen-test' });
  return created.json as { id: string; provider_charge_id: string };
};

describe('Adyen notifications reach the product: signed batches to /provider_webhooks/adyen-test, answered [accepted]', () => {
  afterEach(async () => {
    expect((await control('/webhook_faults', {})).status).toBe(200);
  });

  it.each([
    { fault: 'no fault', faults: {} },
    { fault: 'every notification sent twice', faults: { duplicate: 1 } },
    { fault: 'every notification delayed', faults: { delay_ms: 300 } },
    { fault: 'every notification held back (reordered)', faults: { reorder: 1, reorder_hold_ms: 300 } },
  ])('$fault: the payment’s AUTHORISATION is delivered, stored once by its id, and changes nothing it recorded', async ({ faults }) => {
    expect((await control('/webhook_faults', faults)).json).toMatchObject(faults);
    const payment = await manualPayment();
    const charge = payment.provider_charge_id;
    const kept = await eventually(async () => {
      const list = await keptOf(charge);
      return list.length > 0 && list.every((k) => k.state === 'delivered') ? list : undefined;
    }, 20_000);
    expect(kept.map((k) => k.type)).toEqual(['AUTHORISATION']);
    // Every delivery was answered [accepted]; a duplicate is the same row.
    await eventually(async () => (await storedOf(charge)).length === 1);
    expect(await storedOf(charge)).toEqual([{ event_id: kept[0]!.id, type: 'charge.requires_capture' }]);
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'requires_capture', amount_captured_minor: 0 });
  });

  it('a lost notification is never delivered until it is redelivered; then it is stored once', async () => {
    await control('/webhook_faults', { loss: 1 });
    const payment = await manualPayment();
    const charge = payment.provider_charge_id;
    const [lost] = await eventually(async () => {
      const list = await keptOf(charge);
      return list.length === 1 ? list : undefined;
    });
    expect(lost).toMatchObject({ type: 'AUTHORISATION', state: 'lost', attempts: 0 });
    expect(await storedOf(charge)).toEqual([]);
    expect((await control(`/events/${encodeURIComponent(lost!.id)}/redeliver`, {})).status).toBe(200);
    await eventually(async () => (await keptOf(charge))[0]!.state === 'delivered');
    expect(await storedOf(charge)).toEqual([{ event_id: lost!.id, type: 'charge.requires_capture' }]);
  });

  describe('a batch posted to the route', () => {
    const validator = new adyen.hmacValidator();
    const item = (pspReference: string, fields: Record<string, unknown> = {}) => ({
      amount: { currency: 'EUR', value: 1200 },
      eventCode: 'REPORT_AVAILABLE',
      eventDate: new Date().toISOString(),
      merchantAccountCode: merchantAccount,
      merchantReference: 'report',
      pspReference,
      reason: '',
      success: 'true',
      ...fields,
    });
    const signed = (fields: ReturnType<typeof item>, key = hmacKey) => ({ ...fields, additionalData: { hmacSignature: validator.calculateHmac(fields as never, key) } });
    const post = (items: unknown[]) =>
      fetch(`${stack.apiUrl}/provider_webhooks/adyen-test`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ live: 'false', notificationItems: items.map((NotificationRequestItem) => ({ NotificationRequestItem })) }),
      }).then(async (r) => ({ status: r.status, text: await r.text() }));
    const storedWith = (references: string[]) =>
      stack.sql<{ event_id: string }[]>`SELECT event_id FROM provider_events WHERE provider = 'adyen-test' AND split_part(event_id, ':', 1) IN ${stack.sql(references)} ORDER BY event_id`;

    it('every item signed and readable: answered [accepted], each item stored once, and once again for a redelivery of the batch', async () => {
      const references = [adyenPspReference(), adyenPspReference()];
      const batch = references.map((r) => signed(item(r)));
      for (let delivery = 0; delivery < 2; delivery++) {
        const answer = await post(batch);
        expect(answer, answer.text).toEqual({ status: 200, text: '[accepted]' });
      }
      expect((await storedWith(references)).map((r) => r.event_id)).toEqual(references.map((r) => `${r}:REPORT_AVAILABLE:true`).sort());
    });

    it.each([
      { what: 'one item signed with another key', second: (r: string) => signed(item(r), 'AB'.repeat(32)), code: 'webhook_signature_invalid', issues: undefined },
      { what: 'one item without a signature', second: (r: string) => item(r), code: 'webhook_signature_invalid', issues: undefined },
      {
        what: 'one signed item whose amount is a string and eventDate no time',
        second: (r: string) => signed(item(r, { amount: { currency: 'EUR', value: '1200' }, eventDate: 'soon' }) as never),
        code: 'invalid_request',
        issues: ['notificationItems.1.NotificationRequestItem.amount.value', 'notificationItems.1.NotificationRequestItem.eventDate'],
      },
    ])('$what: 400 $code, and nothing of the batch is stored', async ({ second, code, issues }) => {
      const references = [adyenPspReference(), adyenPspReference()];
      const answer = await post([signed(item(references[0]!)), second(references[1]!)]);
      expect(answer.status, answer.text).toBe(400);
      const error = (JSON.parse(answer.text) as { error: { type: string; issues?: { path: string }[] } }).error;
      expect(error.type).toBe(code);
      expect(error.issues?.map((i) => i.path)).toEqual(issues);
      expect(await storedWith(references)).toEqual([]);
    });
  });
});

describe('a capture at a kind whose modifications are notified waits for the PSP’s CAPTURE notification', () => {
  afterEach(async () => {
    expect((await control('/webhook_faults', {})).status).toBe(200);
  });
  const capture = (id: string, key: string) => api.post(`/v1/payments/${id}/capture`, {}, key);
  const notified = (charge: string, type: string) => eventually(async () => (await keptOf(charge)).find((k) => k.type === type), 20_000, 100, `${type} of ${charge}`);

  it('a capture of part of the authorization is confirmed by a CAPTURE of that part: succeeded with that amount captured', async () => {
    const payment = await manualPayment();
    const answer = await api.post(`/v1/payments/${payment.id}/capture`, { amount_minor: 1000 }, uniqueKey('capture'));
    expect([200, 202], answer.text).toContain(answer.status);
    const captured = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${payment.id}`);
      return json.status === 'requires_capture' ? undefined : json;
    }, 20_000);
    expect(captured).toMatchObject({ status: 'succeeded', amount_captured_minor: 1000 });
  });

  it.each([
    { outcome: 'CAPTURE_FAILED', method: 'pm_card_captureFailed', faults: {}, code: 'capture_failed' },
    // The double did capture (only its CAPTURE was lost): the void is refused, so the payment is left to an operator, not "Compensated".
    { outcome: 'no confirmation within the authorization window', method: 'pm_card_visa', faults: { loss: 1 }, code: 'compensation_failed' },
  ])('$outcome: never succeeded; the authorization is voided and the payment fails with $code', async ({ method, faults, code }) => {
    const payment = await manualPayment(method);
    await control('/webhook_faults', faults);
    const answer = await capture(payment.id, uniqueKey('capture'));
    // Only the CAPTURE is lost: the void that follows is confirmed by its CANCELLATION (adyen-cancel.test.ts has it lost).
    if (faults.loss) expect((await notified(payment.provider_charge_id, 'CAPTURE')).state).toBe('lost');
    await control('/webhook_faults', {});
    if (answer.status === 202) expect(answer.json).toMatchObject({ status: 'requires_capture', amount_captured_minor: 0 });
    else expect(answer.json.error).toMatchObject({ type: 'payment_failed', payment: { status: 'failed', failure: { code } } });
    const ended = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${payment.id}`);
      return json.status === 'requires_capture' ? undefined : json;
    }, (WINDOW_SECONDS + 30) * 1000);
    expect(ended).toMatchObject({ status: 'failed', amount_captured_minor: 0, failure: { code } });
    if (code === 'compensation_failed') expect(ended.failure.message).toMatch(/did not confirm the capture.*Compensation FAILED, needs an operator: voided authorization/);
    // The void was asked for: its CANCELLATION was made.
    await notified(payment.provider_charge_id, 'CANCELLATION');
  }, (WINDOW_SECONDS + 60) * 1000);
});

describe('a refund at a kind whose modifications are notified waits for the PSP’s REFUND notification', () => {
  afterEach(async () => {
    expect((await control('/webhook_faults', {})).status).toBe(200);
  });
  const paid = async (paymentMethod = 'pm_card_visa') => {
    const created = await api.post('/v1/payments', body(paymentMethod), uniqueKey('pay'));
    expect(created.status, created.text).toBe(201);
    return created.json as { id: string; provider_charge_id: string };
  };
  const refund = (paymentId: string, amountMinor: number, key = uniqueKey('refund')) => api.post(`/v1/payments/${paymentId}/refunds`, { amount_minor: amountMinor }, key);
  const posted = async (refundId: string) => (await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE refund_id = ${refundId}`).length;
  const settled = (refundId: string) =>
    eventually(async () => {
      const { json } = await api.get(`/v1/refunds/${refundId}`);
      return json.status === 'pending' ? undefined : json;
    }, 20_000);

  it('two pending refunds of one payment for the same amount are each settled by their own REFUND (the notification names the payment, not the refund)', async () => {
    const payment = await paid();
    await control('/webhook_faults', { loss: 1 });
    const first = await refund(payment.id, 1000);
    const second = await refund(payment.id, 1000);
    expect([first.status, second.status], first.text + second.text).toEqual([202, 202]);
    const refunds = await eventually(async () => {
      const kept = (await keptOf(payment.provider_charge_id)).filter((k) => k.type === 'REFUND');
      return kept.length === 2 ? kept : undefined;
    }, 20_000);
    // Kept in the order the refunds were asked: each one's PSP reference leads its notification's id.
    const pspIds = refunds.map((kept) => kept.id.split(':')[0]);
    await control('/webhook_faults', {});
    // The second refund's notification first: it settles the second, not the older one.
    for (const kept of [...refunds].reverse()) expect((await control(`/events/${encodeURIComponent(kept.id)}/redeliver`, {})).status).toBe(200);
    expect(await settled(first.json.id)).toMatchObject({ status: 'succeeded' });
    expect(await settled(second.json.id)).toMatchObject({ status: 'succeeded' });
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ amount_refunded_minor: 2000 });
    expect((await posted(first.json.id)) + (await posted(second.json.id))).toBe(2);
    const recorded = await stack.sql<{ id: string; provider_refund_id: string }[]>`SELECT id, provider_refund_id FROM refunds WHERE payment_id = ${payment.id}`;
    expect(Object.fromEntries(recorded.map((r) => [r.id, r.provider_refund_id]))).toEqual({ [first.json.id]: pspIds[0], [second.json.id]: pspIds[1] });
  });

  it('REFUND_FAILED: the refund fails with its reason, its reservation is given back and nothing is posted', async () => {
    const payment = await paid('pm_card_refundFailed');
    const answer = await refund(payment.id, 2500);
    if (answer.status === 202) expect(answer.json).toMatchObject({ status: 'pending' });
    else expect(answer.json.error).toMatchObject({ type: 'refund_failed', refund: { status: 'failed' } });
    const refundId = answer.status === 202 ? answer.json.id : answer.json.error.refund.id;
    expect(await settled(refundId)).toMatchObject({ status: 'failed', failure: { code: 'refund_failed', message: 'Refund refused by the acquirer' } });
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'succeeded', amount_refunded_minor: 0 });
    expect(await posted(refundId)).toBe(0);
  });
});

describe('saved cards at adyen-test (charged off-session by the stored id: test/integration/kinds/)', () => {
  it('a payment with setup_future_usage stores the card for a shopper of our own: token shopperReference/storedPaymentMethodId, the card network\'s transaction id, the card as Adyen summarises it', async () => {
    const customer = await api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'));
    expect(customer.status, customer.text).toBe(201);
    const first = await api.post('/v1/payments', body('pm_card_mastercard', { customer: customer.json.id, setup_future_usage: 'off_session' }), uniqueKey('pay'));
    expect(first.status, first.text).toBe(201);
    expect(first.json).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    const method = await eventually(async () => (await api.get(`/v1/customers/${customer.json.id}/payment_methods`)).json.data[0] ?? null);
    expect(method).toMatchObject({ customer: customer.json.id, card: { brand: 'mc', last4: '1115', exp_month: 3, exp_year: 2030 } });
    const [stored] = await stack.sql<{ provider_tokens: Record<string, string>; network_transaction_id: string }[]>`
      SELECT provider_tokens, network_transaction_id FROM payment_methods WHERE id = ${method.id}`;
    // Stored for a shopper of its own: the first payment's id.
    expect(stored!.provider_tokens).toEqual({ 'adyen-test': expect.stringMatching(new RegExp(`^${first.json.id}/[0-9A-F]{16}$`)) });
    // The sandboxes' card network's id (the double is on it): a sandbox could charge the card by it.
    expect(stored!.network_transaction_id).toMatch(/^ntx_/);
  });
});

describe('a card saved elsewhere, routed to adyen-test first', () => {
  it('routing skips adyen-test (no stored id of the card, and it takes no other processor\'s network transaction id): the PSP that saved it charges it, nothing reaches Adyen', async () => {
    const elsewhere = await stack.createTenant('adyen-saved-elsewhere');
    const client = apiClient(stack.apiUrl, elsewhere.apiKey);
    routes.set(elsewhere.id, ['sandbox', 'adyen-test']);
    const customer = await client.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'));
    const first = await client.post('/v1/payments', body('pm_card_visa', { customer: customer.json.id, setup_future_usage: 'off_session' }), uniqueKey('pay'));
    expect(first.status, first.text).toBe(201);
    expect(first.json).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    const method = await eventually(async () => (await client.get(`/v1/customers/${customer.json.id}/payment_methods`)).json.data[0] ?? null);

    routes.set(elsewhere.id, ['adyen-test', 'sandbox']);
    const before = double.paymentsMade();
    const later = await client.post('/v1/payments', body(method.id, { customer: customer.json.id, off_session: true }), uniqueKey('pay'));
    expect(later.status, later.text).toBe(201);
    expect(later.json).toMatchObject({ status: 'succeeded', provider: 'sandbox', payment_method: method.id });
    const got = await client.get(`/v1/payments/${later.json.id}`);
    expect(got.json.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox', outcome: 'succeeded' }]);
    expect(double.paymentsMade()).toBe(before);
  });
});
