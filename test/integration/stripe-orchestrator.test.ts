import Stripe from 'stripe';
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeWorkflowId, lateChargeWorkflowId } from '../../domain/ids';
import { StripeProvider } from '../../provider/stripe/client';
import { startRecordingHop, startStripeMock, type StripeExchange } from '../helpers/stripe-mock';
import { saveCard } from '../../db/customers-payment-methods';
import { newId } from '../../domain/ids';
import { apiClient, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * The Stripe adapter end to end through the orchestrator: the API, the payment
 * workflow on a real worker whose PSP is StripeProvider against stripe-mock (Stripe's own mock,
 * which validates every request against Stripe's OpenAPI definition), PostgreSQL, and Stripe's
 * webhooks to POST /provider_webhooks/stripe verified by the Stripe library.
 *
 * stripe-mock is stateless: every PaymentIntent it returns is its fixture, `requires_payment_method`
 * (what Stripe answers when confirmation fails), whatever was asked. So through the orchestrator a
 * payment is declined; what this proves is the wiring and the mapping (the request Stripe accepts,
 * its answer recorded as a decline with the PaymentIntent as the charge, the webhook verified and
 * stored once, a final status kept, a reported "success" checked at the PSP before anything is applied or given back).
 * A recording hop in front of stripe-mock shows what the worker asked of Stripe through the whole
 * stack: our test payment methods as Stripe's, a saving charge's Customer and setup_future_usage,
 * an off-session charge of a card saved there; dispute events go to their dispute workflow.
 * The adapter's other outcomes are tested against a scripted Stripe in test/unit/stripe-provider.test.ts.
 */

const WEBHOOK_SECRET = 'whsec_test_orchestrator_0123456789';
let mock: Awaited<ReturnType<typeof startStripeMock>>;
let hop: Awaited<ReturnType<typeof startRecordingHop>>;
/** What the worker's Stripe client sent, through a recording hop in front of stripe-mock. */
let exchanges: StripeExchange[] = [];
let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;
const stripe = new Stripe('sk_test_123');

beforeAll(async () => {
  mock = await startStripeMock();
  hop = await startRecordingHop(mock.port, (exchange) => exchanges.push(exchange));
  const client = new StripeProvider({ apiKey: 'sk_test_123', host: '127.0.0.1', port: hop.port, protocol: 'http', timeoutMs: 5_000, webhookSecret: WEBHOOK_SECRET });
  // Stripe beside the stack's sandbox in the worker's registry, every payment routed to it.
  stack = await startStack({ extraProviders: { stripe: client }, route: async () => ({ providers: ['stripe'], reason: 'test route: stripe (stripe-mock)' }) });
  tenant = await stack.createTenant('stripe-e2e');
  api = apiClient(stack.apiUrl, tenant.apiKey);
}, 300_000);
afterAll(async () => {
  await stack?.stop();
  await hop?.close();
  await mock?.stop();
});

/** A Stripe event as Stripe sends it, signed with the endpoint's secret (Stripe's own test helper). */
function stripeEvent(type: string, intent: Record<string, unknown>) {
  const payload = JSON.stringify({ id: `evt_${uniqueKey('e').replace(/-/g, '')}`, object: 'event', api_version: '2024-06-20', type, created: Math.floor(Date.now() / 1000), data: { object: intent }, livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null } });
  return { payload, signature: stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }) };
}
const postWebhook = (payload: string, headers: Record<string, string>) =>
  fetch(`${stack.apiUrl}/provider_webhooks/stripe`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload });

describe('Stripe through the orchestrator (stripe-mock)', () => {
  it('a payment: the PaymentIntent Stripe accepted, its answer recorded as a decline with the PaymentIntent as the charge; the key replays it', async () => {
    const key = uniqueKey();
    const request = { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' };
    const first = await api.post('/v1/payments', request, key);
    expect(first.status, first.text).toBe(402);
    expect(first.json.error).toMatchObject({ type: 'card_declined', payment: { status: 'declined', amount_captured_minor: 0 } });
    expect(first.json.error.payment.provider_charge_id).toMatch(/^pi_/);
    const replay = await api.post('/v1/payments', request, key);
    expect(replay.text).toBe(first.text);
    const events = await stack.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE tenant_id = ${tenant.id} AND event_key LIKE ${`payment:${first.json.error.payment.id}:%`}`;
    expect(events.map((e) => e.type)).toEqual(['payment.declined']);
  });

  it('a 3-D Secure payment with a return_url: the request with return_url is one Stripe accepts', async () => {
    // Our 3-D Secure test method (the kind's declared name for it; a test-method name the kind does not declare is refused 400).
    const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example/return' }, uniqueKey());
    // stripe-mock's fixture again (no challenge to show): recorded as its decline, not a 5xx or a provider_rejected failure.
    expect(created.status, created.text).toBe(402);
    expect(created.json.error.type).toBe('card_declined');
  });

  it('Stripe’s webhooks: verified by the Stripe library (unsigned or tampered: 400), stored once, a final status kept; a reported success for the declined payment is checked at Stripe and nothing is given back', async () => {
    const paid = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 4100, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey());
    const payment = paid.json.error.payment as { id: string; provider_charge_id: string };
    const intent = { id: payment.provider_charge_id, object: 'payment_intent', amount: 4100, amount_received: 4100, currency: 'eur', status: 'succeeded', metadata: { reference: payment.id }, latest_charge: null, next_action: null, last_payment_error: null };
    const { payload, signature } = stripeEvent('payment_intent.succeeded', intent);

    expect((await postWebhook(payload, {})).status).toBe(400);
    expect((await postWebhook(payload.replace('4100', '4200'), { 'stripe-signature': signature })).status).toBe(400);
    const first = await postWebhook(payload, { 'stripe-signature': signature });
    expect(first.status).toBe(200);
    // The event is a hint: the route retrieves the PaymentIntent from Stripe, and stripe-mock's
    // fixture (another amount and currency, no money) disagrees with the payment: nothing is applied.
    expect(await first.json()).toMatchObject({ received: true, duplicate: false, disposition: 'held_for_operator' });
    const again = await postWebhook(payload, { 'stripe-signature': signature });
    expect(await again.json()).toMatchObject({ duplicate: true });
    const stored = await stack.sql`SELECT type, charge_status, payment_id FROM provider_events WHERE provider = 'stripe' AND payment_id = ${payment.id}`;
    expect(stored).toEqual([{ type: 'charge.succeeded', charge_status: 'succeeded', payment_id: payment.id }]);

    // The payment is final (declined): the event moves nothing. Its reported success was checked
    // at Stripe, which holds no money for it: no late-charge run gives anything back.
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'declined', amount_captured_minor: 0 });
    const late = stack.temporal.workflow.getHandle(lateChargeWorkflowId('stripe', payment.provider_charge_id));
    await expect(late.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'declined', failure: { code: expect.not.stringMatching(/late_/) } });
  });

  it("Stripe's dispute events: verified, stored once under their own names, the dispute re-read from Stripe and handed to its dispute workflow", async () => {
    const dispute = { id: 'dp_from_event', object: 'dispute', amount: 4100, currency: 'eur', reason: 'fraudulent', status: 'needs_response', created: Math.floor(Date.now() / 1000), charge: 'ch_1', payment_intent: 'pi_1', evidence_details: { due_by: null, submission_count: 0 }, balance_transactions: [] };
    const { payload, signature } = stripeEvent('charge.dispute.created', dispute);
    const first = await postWebhook(payload, { 'stripe-signature': signature });
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ received: true, duplicate: false, disposition: 'dispute' });
    const again = await postWebhook(payload, { 'stripe-signature': signature });
    expect(await again.json()).toMatchObject({ duplicate: true, disposition: 'dispute' });
    const eventId = (JSON.parse(payload) as { id: string }).id;
    expect(await stack.sql`SELECT type FROM provider_events WHERE provider = 'stripe' AND event_id = ${eventId}`).toEqual([{ type: 'charge.dispute.created' }]);
    // The dispute as stripe-mock holds it (its fixture, for no payment here) went to its run.
    const run = stack.temporal.workflow.getHandle(disputeWorkflowId('stripe', 'dp_from_event'));
    expect((await run.describe()).type).toBe('disputeWorkflow');
  });

  /** The PaymentIntents the worker created for a payment (its reference in their metadata). */
  const intentsFor = (paymentId: string) => exchanges.filter((e) => e.method === 'POST' && e.path === '/v1/payment_intents' && e.form.get('metadata[reference]') === paymentId);

  it("our test payment methods reach Stripe as its own test PaymentMethods; a merchant's own token as given", async () => {
    const declined = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_declined' }, uniqueKey());
    expect(declined.status, declined.text).toBe(402);
    expect(intentsFor(declined.json.error.payment.id).map((e) => e.form.get('payment_method'))).toEqual(['pm_card_chargeDeclined']);
    const own = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_1QmerchantsOwn' }, uniqueKey());
    expect(intentsFor(own.json.error.payment.id).map((e) => e.form.get('payment_method'))).toEqual(['pm_1QmerchantsOwn']);
  });

  it('saved cards at Stripe: the saving charge makes a Customer and confirms with it and setup_future_usage; an off-session charge of a card saved there names its Customer and PaymentMethod', async () => {
    const customer = (await api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'))).json.id as string;
    const saving = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2000, currency: 'EUR', payment_method: 'pm_card_visa', customer, setup_future_usage: 'off_session' }, uniqueKey());
    // stripe-mock's fixture declines it (so nothing is saved): what Stripe was asked is the point.
    expect(saving.status, saving.text).toBe(402);
    const paymentId = saving.json.error.payment.id as string;
    const [intent] = intentsFor(paymentId);
    expect(intent!.form.get('setup_future_usage')).toBe('off_session');
    expect(intent!.form.get('customer')).toMatch(/^cus_/);
    const made = exchanges.filter((e) => e.path === '/v1/customers' && e.form.get('metadata[reference]') === paymentId);
    expect(made.map((e) => [e.status, e.headers['idempotency-key']])).toEqual([[200, `${intent!.headers['idempotency-key']}:customer`]]);

    // A card saved at this connection (as a successful saving charge at Stripe records it).
    const method = await saveCard(stack.sql, {
      id: newId('pm'), tenantId: tenant.id, customerId: customer, card: { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 }, fingerprint: null,
      networkTransactionId: '123456789012345', provider: 'stripe', token: 'cus_saved1/pm_saved1', sourcePaymentId: paymentId,
    });
    const offSession = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2000, currency: 'EUR', payment_method: method!.id, customer, off_session: true }, uniqueKey());
    expect(offSession.status, offSession.text).toBe(402);
    const [charged] = intentsFor(offSession.json.error.payment.id);
    expect([charged!.form.get('customer'), charged!.form.get('payment_method'), charged!.form.get('off_session'), charged!.form.get('confirm')]).toEqual(['cus_saved1', 'pm_saved1', 'true', 'true']);
    // A request Stripe's definition accepts (stripe-mock answers its fixture, recorded as a decline).
    expect(charged!.status).toBe(200);
  });
});

