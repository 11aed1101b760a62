import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { StripeProvider } from '../../provider/stripe/client';
import { apiClient, captureLogs, eventually, decidedPayment, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * Customers, saved payment methods and off-session payments, end to end through the API on the
 * real stack: Temporal, PostgreSQL, the worker and two sandbox PSPs with their own databases
 * (`sandbox` first, `sandbox-b` second), which share only the simulated card network's key.
 * docs/CONTRACT.md §3.9.
 */

let stack: TestStack;
let tenant: Tenant;
let other: Tenant;
let api: ReturnType<typeof apiClient>;
let otherApi: ReturnType<typeof apiClient>;
/** Payments of this amount are routed to `stripe` first, a kind that takes no network transaction id. */
const STRIPE_FIRST_AMOUNT = 7777;
const route: RoutePlanner = async (request) =>
  request.amountMinor === STRIPE_FIRST_AMOUNT
    ? { providers: ['stripe', 'sandbox-b'], reason: 'test route: stripe then sandbox-b' }
    : { providers: ['sandbox', 'sandbox-b'], reason: 'test route: sandbox then sandbox-b' };

beforeAll(async () => {
  // Stripe at an address nobody listens on: a payment that reached it could not succeed there.
  const stripe = new StripeProvider({ apiKey: 'sk_test_unreachable', host: '127.0.0.1', port: 9, protocol: 'http', timeoutMs: 2_000 });
  stack = await startStack({ secondSandbox: {}, route, extraProviders: { stripe }, api: { IDEMPOTENCY_WAIT_MS: 3000 } });
  tenant = await stack.createTenant('saved-methods');
  other = await stack.createTenant('saved-methods-other');
  api = apiClient(stack.apiUrl, tenant.apiKey);
  otherApi = apiClient(stack.apiUrl, other.apiKey);
});
afterEach(async () => {
  await outage('none');
  await expectLedgerConsistent(stack.sql);
});
afterAll(async () => stack?.stop());

async function outage(mode: 'none' | 'unavailable') {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}
const returnUrl = 'http://127.0.0.1:9/return';
const payment = (extra: Record<string, unknown>) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', ...extra });
const approve = (url: string) => fetch(url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });

async function newCustomer(client = api) {
  const created = await client.post('/v1/customers', { email: 'jane@example.com', name: 'Jane' }, uniqueKey('cus'));
  expect(created.status).toBe(201);
  return created.json.id as string;
}
/** Pays with the card, saving it for the customer; answers the saved method as the API lists it. */
async function savedCard(customer: string, card = 'pm_card_visa', client = api) {
  const created = await client.post('/v1/payments', payment({ payment_method: card, customer, setup_future_usage: 'off_session', return_url: returnUrl }), uniqueKey('pay'));
  expect([201, 202], created.text).toContain(created.status);
  if (created.json.status === 'requires_action') expect((await approve(created.json.next_action.redirect_to_url.url)).status).toBe(303);
  expect(await decidedPayment(client, created.json.id)).toMatchObject({ status: 'succeeded' });
  return eventually(async () => {
    const listed = await client.get(`/v1/customers/${customer}/payment_methods`);
    return listed.json.data.find((m: { id: string }) => m.id !== undefined) ?? null;
  });
}
/** The rows the product keeps of a saved method (the API never shows tokens or the network transaction id). */
async function storedMethod(id: string) {
  const [row] = await stack.sql<{ provider_tokens: Record<string, string>; network_transaction_id: string; source_payment_id: string }[]>`
    SELECT provider_tokens, network_transaction_id, source_payment_id FROM payment_methods WHERE id = ${id}`;
  return row!;
}
/** The charges each PSP holds for a payment, as their own tables record them. */
async function chargesAt(paymentId: string) {
  const a = await stack.sql<{ status: string; off_session: boolean; saved_card: string | null; network_transaction_id: string | null }[]>`
    SELECT status, off_session, saved_card, network_transaction_id FROM sandbox.charges WHERE reference = ${paymentId}`;
  return { a, b: await stack.secondSandbox!.provider.listChargesByReference(paymentId) };
}
async function eventCount(type: string, objectId: string): Promise<number> {
  const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM outbox_events WHERE type = ${type} AND payload->'data'->'object'->>'id' = ${objectId}`;
  return row!.n;
}

describe('customers', () => {
  it('POST answers 201 cus_…, a retry replays it; GET reads it; another tenant gets 404', async () => {
    const key = uniqueKey('cus');
    const created = await api.post('/v1/customers', { email: 'a@example.com', name: 'A', metadata: { crm: '42' } }, key);
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ object: 'customer', email: 'a@example.com', name: 'A', metadata: { crm: '42' } });
    expect(created.json.id).toMatch(/^cus_[0-9a-z]{26}$/);
    const again = await api.post('/v1/customers', { email: 'a@example.com', name: 'A', metadata: { crm: '42' } }, key);
    expect(again.text).toBe(created.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((await api.post('/v1/customers', { email: 'b@example.com' }, key)).status).toBe(422);
    expect((await api.get(`/v1/customers/${created.json.id}`)).json).toEqual(created.json);
    expect((await otherApi.get(`/v1/customers/${created.json.id}`)).status).toBe(404);
    expect((await otherApi.get(`/v1/customers/${created.json.id}/payment_methods`)).status).toBe(404);
    expect((await api.get(`/v1/customers/${created.json.id}/payment_methods`)).json).toEqual({ object: 'list', data: [], has_more: false });
    expect((await api.post('/v1/customers', { email: 'x', extra: 1 }, uniqueKey('cus'))).status).toBe(400);
  });
});

describe('saving a card: a successful payment with customer and setup_future_usage', () => {
  it('saves our own pm_… with brand, last4 and expiry; the PSP token and network transaction id are kept but never shown', async () => {
    const customer = await newCustomer();
    const logs = captureLogs();
    const method = await savedCard(customer);
    logs.stop();
    expect(method).toEqual({
      id: expect.stringMatching(/^pm_[0-9a-z]{26}$/),
      object: 'payment_method',
      customer,
      card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2034 },
      detached_at: null,
      off_session_unusable: null,
      created_at: expect.any(String),
    });
    const stored = await storedMethod(method.id);
    expect(stored.provider_tokens).toEqual({ sandbox: expect.stringMatching(/^card_/) });
    expect(stored.network_transaction_id).toMatch(/^ntx_/);
    // The saved card's secrets appear in no API answer, event or log line.
    const listed = await api.get(`/v1/customers/${customer}/payment_methods`);
    const events = await api.get('/v1/events?type=payment_method.attached&limit=100');
    for (const text of [listed.text, events.text, logs.text()]) {
      expect(text).not.toContain(stored.provider_tokens.sandbox);
      expect(text).not.toContain(stored.network_transaction_id);
    }
    expect(await eventCount('payment_method.attached', method.id)).toBe(1);
    expect(events.json.data.find((e: { data: { object: { id: string } } }) => e.data.object.id === method.id)).toMatchObject({ type: 'payment_method.attached', data: { object: method } });
  });

  it('after 3-D Secure: the card is saved once the customer approved', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer, 'pm_card_threeDSecureRequired');
    expect(method).toMatchObject({ customer, card: { last4: '3220' } });
  });

  it('a declined payment saves nothing; a payment without setup_future_usage saves nothing', async () => {
    const customer = await newCustomer();
    const declined = await api.post('/v1/payments', payment({ payment_method: 'pm_card_declined', customer, setup_future_usage: 'off_session' }), uniqueKey('pay'));
    expect(declined.status).toBe(402);
    const plain = await api.post('/v1/payments', payment({ payment_method: 'pm_card_visa', customer }), uniqueKey('pay'));
    expect(plain.status).toBe(201);
    expect((await api.get(`/v1/customers/${customer}/payment_methods`)).json.data).toEqual([]);
  });
});

describe('charging a saved method off-session', () => {
  it('charges the PSP that saved it by its token, without the customer; the ledger and events as any payment', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const key = uniqueKey('pay');
    const request = payment({ payment_method: method.id, customer, off_session: true });
    const logs = captureLogs();
    const created = await api.post('/v1/payments', request, key);
    logs.stop();
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ status: 'succeeded', payment_method: method.id, provider: 'sandbox' });
    const again = await api.post('/v1/payments', request, key);
    expect(again.text).toBe(created.text);
    const { a, b } = await chargesAt(created.json.id);
    const stored = await storedMethod(method.id);
    expect(a).toEqual([{ status: 'succeeded', off_session: true, saved_card: stored.provider_tokens.sandbox, network_transaction_id: stored.network_transaction_id }]);
    // What charged the card is in no API answer and no log line of the API or the worker.
    for (const text of [created.text, logs.text()]) {
      expect(text).not.toContain(stored.provider_tokens.sandbox);
      expect(text).not.toContain(stored.network_transaction_id);
    }
    expect(b).toEqual([]);
    expect(await eventCount('payment.succeeded', created.json.id)).toBe(1);
  });

  it('a card that asks for authentication on every payment: failed, 402 authentication_required, payment.failed, no money moved, no wait', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer, 'pm_card_authenticationRequired');
    expect(method.card.last4).toBe('3184');
    const created = await api.post('/v1/payments', payment({ payment_method: method.id, customer, off_session: true }), uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    expect(created.json.error).toMatchObject({ type: 'authentication_required', payment: { status: 'failed', failure: { code: 'authentication_required' }, next_action: null } });
    const id = created.json.error.payment.id;
    expect((await api.get(`/v1/payments/${id}`)).json).toMatchObject({ status: 'failed', amount_captured_minor: 0, attempts: [{ provider: 'sandbox', outcome: 'declined', error_code: 'authentication_required' }] });
    expect(await eventCount('payment.failed', id)).toBe(1);
    const { a, b } = await chargesAt(id);
    expect(a.map((c) => [c.status, c.off_session])).toEqual([['declined', true]]);
    expect(b).toEqual([]);
  });

  it('while the PSP that saved the card is down, the payment fails over and succeeds at the other by the network transaction id', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const stored = await storedMethod(method.id);
    await outage('unavailable');
    const created = await api.post('/v1/payments', payment({ payment_method: method.id, customer, off_session: true }), uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    const paid = await decidedPayment(api, created.json.id);
    expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(paid.attempts).toMatchObject([
      { attempt: 1, provider: 'sandbox', outcome: 'not_charged' },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
    ]);
    const { a, b } = await chargesAt(paid.id);
    expect(a).toEqual([]);
    expect(b).toHaveLength(1);
    // B never saw the card before: it charged the network transaction id of the first payment.
    expect(b[0]!.savedCard).toEqual({ token: null, networkTransactionId: stored.network_transaction_id, card: { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 }, fingerprint: expect.any(String) });
    const [atB] = await stack.secondSandbox!.provider.listChargesByReference(paid.id);
    expect(atB!.status).toBe('succeeded');
  });
});

describe('refusals: 4xx, and nothing is charged', () => {
  async function refused(client: ReturnType<typeof apiClient>, request: Record<string, unknown>, field: string) {
    const answer = await client.post('/v1/payments', request, uniqueKey('pay'));
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json.error).toMatchObject({ type: 'invalid_request', issues: [{ path: field }] });
    const [row] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id = ${request.order_id as string}`;
    expect(row!.n).toBe(0);
  }

  it('a detached method, another customer\'s, another tenant\'s method or customer, off_session without a saved method', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const stranger = await newCustomer();
    await refused(api, payment({ payment_method: method.id, customer: stranger, off_session: true }), 'payment_method');
    await refused(api, payment({ payment_method: method.id, off_session: true }), 'customer');
    await refused(api, payment({ payment_method: 'pm_card_visa', customer, off_session: true }), 'payment_method');
    const theirs = await newCustomer(otherApi);
    await refused(otherApi, payment({ payment_method: method.id, customer: theirs, off_session: true }), 'payment_method');
    await refused(otherApi, payment({ payment_method: 'pm_card_visa', customer, setup_future_usage: 'off_session' }), 'customer');
    await refused(api, payment({ payment_method: 'pm_card_visa', setup_future_usage: 'off_session' }), 'customer');

    const detached = await api.post(`/v1/payment_methods/${method.id}/detach`, {}, uniqueKey('det'));
    expect(detached.status).toBe(200);
    await refused(api, payment({ payment_method: method.id, customer, off_session: true }), 'payment_method');
  });
});

describe('a route whose PSPs cannot all charge the saved card', () => {
  it('routing skips a PSP that holds no token of the card and takes no network transaction id: the next one charges it by the network transaction id', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const paid = await api.post('/v1/payments', payment({ amount_minor: STRIPE_FIRST_AMOUNT, payment_method: method.id, customer, off_session: true }), uniqueKey('pay'));
    expect(paid.status, paid.text).toBe(201);
    expect(paid.json).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    const got = await api.get(`/v1/payments/${paid.json.id}`);
    expect(got.json.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox-b', outcome: 'succeeded' }]);
    expect((await chargesAt(paid.json.id)).b).toMatchObject([{ status: 'succeeded' }]);
  });

  it('the API refuses a saved card no PSP of the route can charge (400 naming them); a card saved there, or a route with a PSP that can, is taken', async () => {
    const sandbox = { name: 'sandbox', kind: 'sandbox', settings: { url: stack.sandboxUrl } };
    const stripe = { name: 'stripe-eu', kind: 'stripe', settings: { url: 'http://127.0.0.1:9' } };
    const withStripe = await stack.startApi({ PROVIDERS: [sandbox, stripe] });
    try {
      const customer = await newCustomer();
      const method = await savedCard(customer);
      const stripeOnly = await stack.createTenant('saved-methods-stripe-only');
      await stack.sql`UPDATE tenants SET routing = ${stack.sql.json({ fallback: ['stripe-eu'] })} WHERE id = ${stripeOnly.id}`;
      // The card is the tenant's own: move it to the Stripe-only tenant, as saved at `sandbox`.
      await stack.sql`UPDATE customers SET tenant_id = ${stripeOnly.id} WHERE id = ${customer}`;
      await stack.sql`UPDATE payment_methods SET tenant_id = ${stripeOnly.id} WHERE id = ${method.id}`;
      const client = apiClient(withStripe.url, stripeOnly.apiKey);
      const refused = await client.post('/v1/payments', payment({ payment_method: method.id, customer, off_session: true }), uniqueKey('pay'));
      expect(refused.status, refused.text).toBe(400);
      expect(refused.json.error).toMatchObject({ type: 'invalid_request', issues: [{ path: 'payment_method', message: expect.stringContaining('stripe-eu (stripe)') }] });

      // A token of stripe-eu (the card saved there too): taken (this stack's worker routes it to its sandboxes).
      await stack.sql`UPDATE payment_methods SET provider_tokens = provider_tokens || ${stack.sql.json({ 'stripe-eu': 'cus_1/pm_1' })} WHERE id = ${method.id}`;
      const taken = await client.post('/v1/payments', payment({ payment_method: method.id, customer, off_session: true }), uniqueKey('pay'));
      expect(taken.status, taken.text).toBe(201);

      // The default route reaches `sandbox` too, and Stripe saves cards: setup_future_usage is taken.
      const saving = await apiClient(withStripe.url, tenant.apiKey).post('/v1/payments', payment({ payment_method: 'pm_card_visa', customer: await newCustomer(), setup_future_usage: 'off_session' }), uniqueKey('pay'));
      expect(saving.status, saving.text).toBe(201);
    } finally {
      await withStripe.close();
    }
  });
});

describe('detach', () => {
  it('answers 200 with the method detached, replays, leaves the list, emits payment_method.detached once; unknown or another tenant\'s: 404', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const key = uniqueKey('det');
    const detached = await api.post(`/v1/payment_methods/${method.id}/detach`, undefined, key);
    expect(detached.status).toBe(200);
    expect(detached.json).toMatchObject({ ...method, detached_at: expect.any(String) });
    const again = await api.post(`/v1/payment_methods/${method.id}/detach`, undefined, key);
    expect(again.text).toBe(detached.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // Another key: the method as it is, no second event.
    expect((await api.post(`/v1/payment_methods/${method.id}/detach`, {}, uniqueKey('det'))).json.detached_at).toBe(detached.json.detached_at);
    expect(await eventCount('payment_method.detached', method.id)).toBe(1);
    expect((await api.get(`/v1/customers/${customer}/payment_methods`)).json.data).toEqual([]);
    expect((await otherApi.post(`/v1/payment_methods/${method.id}/detach`, {}, uniqueKey('det'))).status).toBe(404);
    expect((await api.post('/v1/payment_methods/pm_01jd6w8b3m4x0c2q7yk5h9t1ve/detach', {}, uniqueKey('det'))).status).toBe(404);
  });
});

describe('the sandbox: saved cards and the shared card network', () => {
  const charge = (url: string, body: Record<string, unknown>) =>
    fetch(`${url}/v1/charges`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': uniqueKey('sb') }, body: JSON.stringify({ amount_minor: 100, currency: 'EUR', capture: true, reference: uniqueKey('ref'), ...body }) });

  it('refuses a saved card token it does not hold, and a network transaction id the network never issued', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer);
    const stored = await storedMethod(method.id);
    // A's token means nothing at B.
    const atB = await charge(stack.secondSandbox!.url, { payment_method: stored.provider_tokens.sandbox, off_session: true });
    expect(atB.status).toBe(400);
    expect(((await atB.json()) as { error: { code: string } }).error.code).toBe('invalid_payment_method');
    const forged = stored.network_transaction_id.replace(/\.[0-9a-f]{4}/, '.0000');
    const card = { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2034 };
    const refusedId = await charge(stack.secondSandbox!.url, { network_transaction_id: forged, card, off_session: true });
    expect(refusedId.status).toBe(400);
    expect(((await refusedId.json()) as { error: { code: string } }).error.code).toBe('invalid_network_transaction_id');
    const accepted = await charge(stack.secondSandbox!.url, { network_transaction_id: stored.network_transaction_id, card, off_session: true });
    expect(accepted.status).toBe(200);
  });
});

describe('a card the issuer called dead is not charged off-session again (docs/recovery.md)', () => {
  /** The saved method as the API lists it for its customer. */
  const listed = async (customer: string, id: string) => (await api.get(`/v1/customers/${customer}/payment_methods`)).json.data.find((m: { id: string }) => m.id === id);
  const offSession = (customer: string, method: string) => api.post('/v1/payments', payment({ payment_method: method, customer, off_session: true }), uniqueKey('pay'));
  const excessiveFees = async () => (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM sandbox.balance_transactions WHERE type = 'excessive_retry'`)[0]!.n;

  it('authentication_required: the next off-session payment of the card (either copy) fails 402 authentication_required at once, no PSP asked; the methods say why; an on-session success clears it', async () => {
    // Two copies of one card (a variant of pm_card_authenticationRequired: a card no other test charges), saved before the decline.
    const card = 'pm_card_authenticationRequired__held';
    const customer = await newCustomer();
    const method = await savedCard(customer, card);
    const otherCustomer = await newCustomer();
    const copy = await savedCard(otherCustomer, card);
    const declined = await offSession(customer, method.id);
    expect(declined.status, declined.text).toBe(402);
    const declinedId = declined.json.error.payment.id as string;
    expect((await chargesAt(declinedId)).a).toHaveLength(1);
    for (const [owner, id] of [[customer, method.id], [otherCustomer, copy.id]] as const) {
      expect((await listed(owner, id)).off_session_unusable).toMatchObject({ decline_code: 'authentication_required', action: 'authenticate_on_session', payment: declinedId, message: expect.stringContaining('on-session') });
    }
    const feesBefore = await excessiveFees();

    for (const [owner, id] of [[customer, method.id], [otherCustomer, copy.id]] as const) {
      const refused = await offSession(owner, id);
      expect(refused.status, refused.text).toBe(402);
      expect(refused.json.error).toMatchObject({ type: 'authentication_required', payment: { status: 'failed', amount_captured_minor: 0, failure: { code: 'authentication_required', message: expect.stringContaining('No charge was made') } } });
      const refusedId = refused.json.error.payment.id as string;
      expect(await chargesAt(refusedId)).toEqual({ a: [], b: [] });
      expect((await api.get(`/v1/payments/${refusedId}`)).json).toMatchObject({ status: 'failed', provider_charge_id: null, attempts: [] });
      expect(await eventCount('payment.failed', refusedId)).toBe(1);
    }
    expect(await excessiveFees()).toBe(feesBefore);

    // The customer pays with the method on-session (the challenge answered): the card may be charged off-session again.
    const onSession = await api.post('/v1/payments', payment({ payment_method: method.id, customer, return_url: returnUrl }), uniqueKey('pay'));
    expect(onSession.json.status, onSession.text).toBe('requires_action');
    expect((await approve(onSession.json.next_action.redirect_to_url.url)).status).toBe(303);
    expect(await decidedPayment(api, onSession.json.id)).toMatchObject({ status: 'succeeded' });
    expect((await listed(customer, method.id)).off_session_unusable).toBeNull();
    expect((await listed(otherCustomer, copy.id)).off_session_unusable).toBeNull();
  });

  it('a category-1 decline (stolen_card): the next off-session payment is declined at once with its code, 402 card_declined, no PSP asked, no excessive_retry fee; the method asks for a new card', async () => {
    const customer = await newCustomer();
    const method = await savedCard(customer, 'pm_card_stolen__held');
    const declined = await offSession(customer, method.id);
    expect(declined.json.error, declined.text).toMatchObject({ type: 'card_declined', decline_code: 'stolen_card' });
    expect((await listed(customer, method.id)).off_session_unusable).toMatchObject({ decline_code: 'stolen_card', action: 'new_card', message: expect.stringContaining('another card') });
    const feesBefore = await excessiveFees();
    const refused = await offSession(customer, method.id);
    expect(refused.status, refused.text).toBe(402);
    expect(refused.json.error).toMatchObject({ type: 'card_declined', decline_code: 'stolen_card', payment: { status: 'declined', failure: { code: 'stolen_card' } } });
    const refusedId = refused.json.error.payment.id as string;
    expect(await chargesAt(refusedId)).toEqual({ a: [], b: [] });
    expect(await eventCount('payment.declined', refusedId)).toBe(1);
    expect(await excessiveFees()).toBe(feesBefore);
  });
});
