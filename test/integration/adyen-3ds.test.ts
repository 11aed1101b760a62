import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { REDIRECT_RESULT_MAX_LENGTH } from '../../api/routes/payments-return';
import { apiClient, decidedPayment, eventually, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { startAdyenStack } from '../helpers/adyen';
import { lateChargeWorkflowId } from '../../domain/ids';

/**
 * 3-D Secure at Adyen end to end, on the real stack (Temporal dev server, PostgreSQL, the worker)
 * with the Adyen double as `adyen-test`: /payments answers RedirectShopper with the double's
 * challenge page; the shopper's decision there sends them (303) to our return route with
 * `redirectResult`; the route's update has the payment's run make the details call
 * (/payments/details) and sends the shopper on (303) to the merchant's return_url. The
 * AUTHORISATION notification decides the payment too, whichever comes first.
 */
const merchantReturn = 'https://shop.example/back?order=7';
let double: AdyenDouble;
let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

let stop: () => Promise<void>;

beforeAll(async () => {
  ({ double, stack, stop } = await startAdyenStack({
    route: async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' }),
    api: { IDEMPOTENCY_WAIT_MS: 3000, AUTHENTICATION_WINDOW_SECONDS: 600 },
  }));
  tenant = await stack.createTenant('adyen-3ds');
  api = apiClient(stack.apiUrl, tenant.apiKey);
}, 300_000);
afterAll(async () => stop?.());
afterEach(async () => {
  await faults({});
});

const faults = (body: Record<string, number>) =>
  fetch(`${double.url}/_sandbox/webhook_faults`, { method: 'POST', body: JSON.stringify(body) }).then((r) => expect(r.status).toBe(200));
const body = (payment_method = 'pm_card_threeDSecureRequired', extra: Record<string, unknown> = {}) => ({
  order_id: uniqueKey('ord'),
  amount_minor: 4200,
  currency: 'EUR',
  payment_method,
  return_url: merchantReturn,
  ...extra,
});

/** A 3-D Secure payment at adyen-test, waiting for its shopper: its id, charge and the challenge page's URL. */
async function challenged(paymentMethod = 'pm_card_threeDSecureRequired', api_ = api) {
  const created = await api_.post('/v1/payments', body(paymentMethod), uniqueKey('pay'));
  expect(created.status, created.text).toBe(202);
  expect(created.json).toMatchObject({ status: 'requires_action', provider: 'adyen-test' });
  const url: string = created.json.next_action.redirect_to_url.url;
  expect(url.startsWith(`${double.url}/challenge/`)).toBe(true);
  // Adyen answers a redirect without its pspReference: the charge is not named yet.
  expect(created.json.provider_charge_id).toBeNull();
  return { id: created.json.id as string, url };
}

/** The double's pspReference of the payment made under our reference (its census). */
async function pspReferenceOf(paymentId: string): Promise<string> {
  const listed = (await (await fetch(`${double.url}/_sandbox/payments?reference=${paymentId}`)).json()) as { data: { pspReference: string }[] };
  expect(listed.data).toHaveLength(1);
  return listed.data[0]!.pspReference;
}

/** The shopper's decision on the challenge page: the double sends them (303) to our return route with redirectResult. */
async function decide(url: string, result: 'approve' | 'deny'): Promise<string> {
  const response = await fetch(url, { method: 'POST', body: new URLSearchParams({ result }), redirect: 'manual' });
  expect(response.status).toBe(303);
  return response.headers.get('location')!;
}

/** The shopper's browser at our return route: where it is sent on. */
async function comeBack(location: string): Promise<{ status: number; location: string | null; text: string }> {
  const response = await fetch(location, { redirect: 'manual' });
  return { status: response.status, location: response.headers.get('location'), text: await response.text() };
}

const onToMerchant = (id: string) => `https://shop.example/back?order=7&payment_id=${id}`;
const eventsOf = async (id: string) =>
  Object.fromEntries((await stack.sql<{ type: string; n: number }[]>`SELECT type, count(*)::int AS n FROM outbox_events WHERE event_key LIKE ${`payment:${id}:%`} GROUP BY type`).map((r) => [r.type, r.n]));

describe('3-D Secure at Adyen: the challenge comes back to our return route', () => {
  it('approved: the double redirects to our return route, whose details call succeeds the payment; the shopper goes on to the merchant', async () => {
    const before = double.paymentsMade();
    const payment = await challenged();
    // The page shows Approve and Deny.
    const page = await (await fetch(payment.url)).text();
    expect(page).toContain('id="approve"');
    expect(page).toContain('id="deny"');
    const back = await decide(payment.url, 'approve');
    expect(back.startsWith(`${stack.apiUrl}/return/${payment.id}?redirectResult=`)).toBe(true);
    const onward = await comeBack(back);
    expect(onward.status).toBe(303);
    expect(onward.location).toBe(onToMerchant(payment.id));
    // Named by the details answer: the charge's id is Adyen's pspReference.
    expect(await decidedPayment(api, payment.id)).toMatchObject({ status: 'succeeded', amount_captured_minor: 4200, provider_charge_id: await pspReferenceOf(payment.id) });
    expect(double.paymentsMade()).toBe(before + 1);
    await eventually(async () => (await eventsOf(payment.id))['payment.succeeded'] === 1);
  });

  it('denied: the payment is declined authentication_failed, and the shopper goes on to the merchant', async () => {
    const payment = await challenged();
    const onward = await comeBack(await decide(payment.url, 'deny'));
    expect(onward).toMatchObject({ status: 303, location: onToMerchant(payment.id) });
    expect(await decidedPayment(api, payment.id)).toMatchObject({ status: 'declined', failure: { code: 'authentication_failed' }, amount_captured_minor: 0 });
  });

  it('notification lost: the details call alone decides it, once; the same return again changes nothing and makes no second call', async () => {
    await faults({ loss: 1 });
    const payment = await challenged();
    const back = await decide(payment.url, 'approve');
    const calls = double.detailsCalls();
    const first = await comeBack(back);
    expect(first).toMatchObject({ status: 303, location: onToMerchant(payment.id) });
    // The update answered once the run had applied the details call's answer: decided now, by it alone.
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'succeeded' });
    expect(double.detailsCalls()).toBe(calls + 1);
    const again = await comeBack(back);
    expect(again).toMatchObject({ status: 303, location: onToMerchant(payment.id) });
    expect(double.detailsCalls()).toBe(calls + 1);
    expect(await eventsOf(payment.id)).toMatchObject({ 'payment.succeeded': 1 });
    // Nothing but the details call decided it: the AUTHORISATION was kept back.
    const stored = await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND charge_id = ${await pspReferenceOf(payment.id)}`;
    expect(stored).toHaveLength(0);
  });

  it('the shopper never comes back (no details call): the AUTHORISATION decides it; a late return just sends them on', async () => {
    const payment = await challenged();
    const calls = double.detailsCalls();
    const back = await decide(payment.url, 'approve');
    // Named by the AUTHORISATION, which carries our reference.
    expect(await decidedPayment(api, payment.id)).toMatchObject({ status: 'succeeded', amount_captured_minor: 4200, provider_charge_id: await pspReferenceOf(payment.id) });
    expect(double.detailsCalls()).toBe(calls);
    const late = await comeBack(back);
    expect(late).toMatchObject({ status: 303, location: onToMerchant(payment.id) });
    expect(double.detailsCalls()).toBe(calls);
    expect(await eventsOf(payment.id)).toMatchObject({ 'payment.succeeded': 1 });
  });

  it('abandoned: the authentication window ends, the challenge is cancelled at the PSP and the payment expires; a late Approve changes nothing', async () => {
    const short = await stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 3, PROVIDER_POLL_FIRST_MS: 500 });
    const client = apiClient(short.url, tenant.apiKey);
    const payment = await challenged('pm_card_threeDSecureRequired', client);
    expect(await decidedPayment(client, payment.id)).toMatchObject({ status: 'expired', failure: { code: 'authentication_expired' }, amount_captured_minor: 0 });
    // The double received the cancel: its page says expired, and nothing can decide it.
    await eventually(async () => (await fetch(payment.url)).status === 410);
    const late = await fetch(payment.url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });
    expect(late.status).toBe(410);
    expect((await client.get(`/v1/payments/${payment.id}`)).json.status).toBe('expired');
    // Adyen had not named the charge: it was cancelled by our reference (/cancels), and TECHNICAL_CANCEL confirmed it.
    type Census = { state: string; modifications: { type: string; status: string }[]; notifications: { eventCode: string; success: boolean }[] };
    const census = async () => ((await (await fetch(`${double.url}/_sandbox/payments?reference=${payment.id}`)).json()) as { data: Census[] }).data;
    await eventually(async () => (await census())[0]?.modifications.some((m) => m.status === 'succeeded') === true);
    const [atAdyen] = await census();
    expect(atAdyen).toMatchObject({ state: 'cancelled', modifications: [{ type: 'cancel', status: 'succeeded' }] });
    expect(atAdyen!.notifications.map((n) => `${n.eventCode} ${n.success}`)).toEqual(['TECHNICAL_CANCEL true']);
  });

  it('approved as the window ends: the AUTHORISATION arrives while the run cancels at the deadline (no retrieval at Adyen to see it), the payment expires, and the money is given back once', async () => {
    const short = await stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 3, PROVIDER_POLL_FIRST_MS: 500 });
    const client = apiClient(short.url, tenant.apiKey);
    await faults({ loss: 1 });
    const payment = await challenged('pm_card_threeDSecureRequired', client);
    // The shopper approves (the double captures at once) and never comes back; the AUTHORISATION is held back.
    await decide(payment.url, 'approve');
    const charge = await pspReferenceOf(payment.id);
    // The double stops answering: the run's cancel at the window's end is retried while it waits.
    const outage = (mode: string) => fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode }) }).then((r) => expect(r.status).toBe(200));
    await outage('unavailable');
    const run = stack.temporal.workflow.getHandle((await client.get(`/v1/payments/${payment.id}`)).json.workflow_id as string);
    await eventually(async () => ((await run.describe()).raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'voidCharge' && (a.attempt ?? 0) > 1), 30_000, 200, 'the cancel at the deadline retried');
    // Now the AUTHORISATION comes: the payment still waits in requires_action, its run past its wait.
    const events = (await (await fetch(`${double.url}/_sandbox/events?charge=${charge}`)).json()) as { data: { id: string; type: string }[] };
    const authorisation = events.data.find((e) => e.type === 'AUTHORISATION')!;
    await faults({});
    expect((await fetch(`${double.url}/_sandbox/events/${encodeURIComponent(authorisation.id)}/redeliver`, { method: 'POST' })).status).toBe(200);
    await eventually(async () => (await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND event_id = ${authorisation.id}`).length === 1, 20_000, 100, 'the AUTHORISATION stored');
    expect((await client.get(`/v1/payments/${payment.id}`)).json.status).toBe('requires_action');
    await outage('none');
    expect(await decidedPayment(client, payment.id)).toMatchObject({ status: 'expired', amount_captured_minor: 0 });
    // The late-charge run gave the money back: one refund of all of it at Adyen.
    const ended = await eventually(async () => {
      const description = await stack.temporal.workflow.getHandle(lateChargeWorkflowId('adyen-test', charge)).describe().catch(() => null);
      return description && description.status.name !== 'RUNNING' ? description.status.name : null;
    }, 60_000, 200, 'the late-charge run to end');
    expect(ended).toBe('COMPLETED');
    type Census = { capturedMinor: number; refundedMinor: number; modifications: { type: string; status: string }[] };
    const [atAdyen] = ((await (await fetch(`${double.url}/_sandbox/payments?reference=${payment.id}`)).json()) as { data: Census[] }).data;
    expect(atAdyen).toMatchObject({ capturedMinor: 4200, refundedMinor: 4200 });
    expect(atAdyen!.modifications.filter((m) => m.type === 'refund')).toEqual([expect.objectContaining({ status: 'succeeded' })]);
    expect((await client.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'expired', failure: { code: 'late_success_refunded' } });
  });

  it('the merchant cancels while the shopper is at the challenge: Adyen cancels it by our reference, the payment is canceled, and a late Approve changes nothing', async () => {
    const payment = await challenged();
    const canceled = await api.post(`/v1/payments/${payment.id}/cancel`, {}, uniqueKey('cancel'));
    expect(canceled.status, canceled.text).toBeLessThan(300);
    expect(await decidedPayment(api, payment.id)).toMatchObject({ status: 'canceled', amount_captured_minor: 0 });
    await eventually(async () => (await fetch(payment.url)).status === 410);
    const late = await fetch(payment.url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });
    expect(late.status).toBe(410);
    const listed = (await (await fetch(`${double.url}/_sandbox/payments?reference=${payment.id}`)).json()) as { data: { capturedMinor: number; modifications: { type: string }[] }[] };
    expect(listed.data).toMatchObject([{ capturedMinor: 0, modifications: [{ type: 'cancel' }] }]);
    expect((await api.get(`/v1/payments/${payment.id}`)).json.status).toBe('canceled');
  });
});

describe('the return route refuses what it should, and changes nothing', () => {
  it('an unknown payment is a 404 page; a malformed id too', async () => {
    for (const path of ['/return/pay_01abcdefghjkmnpqrstvwxyz0?redirectResult=abc', '/return/..%2Fadmin?redirectResult=abc']) {
      const response = await fetch(`${stack.apiUrl}${path}`, { redirect: 'manual' });
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toContain('text/html');
    }
  });

  it('a hostile redirectResult (missing, too long, wrong characters) is 400 and the payment still waits; a result the PSP never issued is 400 too', async () => {
    const payment = await challenged();
    const calls = double.detailsCalls();
    const hostile = ['', '?redirectResult=', `?redirectResult=${'A'.repeat(REDIRECT_RESULT_MAX_LENGTH + 1)}`, '?redirectResult=%3Cscript%3E', '?redirectResult=abc%00def', '?redirectResult=a&redirectResult=%22'];
    for (const query of hostile) {
      const response = await fetch(`${stack.apiUrl}/return/${payment.id}${query}`, { redirect: 'manual' });
      expect(response.status, query.slice(0, 40)).toBe(400);
      expect(response.headers.get('location')).toBeNull();
    }
    expect(double.detailsCalls()).toBe(calls);
    // Well formed, but not one the PSP issued: its details call is refused, nothing changes.
    const unknown = await fetch(`${stack.apiUrl}/return/${payment.id}?redirectResult=bm90LWlzc3VlZA`, { redirect: 'manual' });
    expect(unknown.status).toBe(400);
    expect((await api.get(`/v1/payments/${payment.id}`)).json.status).toBe('requires_action');
    // The shopper's real return still completes it.
    const onward = await comeBack(await decide(payment.url, 'approve'));
    expect(onward).toMatchObject({ status: 303, location: onToMerchant(payment.id) });
    expect(await decidedPayment(api, payment.id)).toMatchObject({ status: 'succeeded' });
  });

  it('a payment not waiting for its customer is sent on without effect; an address in the query is never where the customer goes', async () => {
    const created = await api.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
    expect(created.status, created.text).toBe(201);
    const response = await fetch(`${stack.apiUrl}/return/${created.json.id}?redirectResult=abc&return_url=https%3A%2F%2Fevil.example`, { redirect: 'manual' });
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe(onToMerchant(created.json.id));
  });
});
