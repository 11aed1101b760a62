import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CardDeclinedError,
  IdempotencyKeyReusedError,
  InvalidRequestError,
  NotFoundError,
  OrderAlreadyPaidError,
  PaymentsClient,
  PaymentStateError,
  RateLimitedError,
  RefundExceedsCapturedError,
  verifyWebhook,
  type Event,
} from '../../client';
import { effectsOf } from '../helpers/effects';
import { startLossyProxy } from '../helpers/lossy-proxy';
import { eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';

/** The typed client against the real stack: API, Temporal, PostgreSQL, sandbox provider, relay. */

let stack: TestStack;
let tenant: Tenant;
let client: PaymentsClient;
beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('client');
  client = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: stack.apiUrl, baseDelayMs: 50 });
});
afterAll(async () => stack?.stop());

const order = (paymentMethod = 'pm_card_visa', captureMethod: 'automatic' | 'manual' = 'automatic') => ({
  order_id: uniqueKey('ord'),
  amount_minor: 2500,
  currency: 'EUR',
  payment_method: paymentMethod,
  capture_method: captureMethod,
});

describe('normal flows', () => {
  it('creates, retrieves, lists page by page, refunds, and reads the balance', async () => {
    const payments = [];
    for (let i = 0; i < 5; i++) payments.unshift(await client.payments.create(order()));
    expect(payments.every((p) => p.status === 'succeeded')).toBe(true);
    // Retrieve shows the same payment, plus its attempts at the PSPs (GET /v1/payments/{id} only).
    const { attempts, ...retrieved } = await client.payments.retrieve(payments[0]!.id);
    expect(retrieved).toEqual(payments[0]);
    expect(attempts).toMatchObject([{ attempt: 1, provider: payments[0]!.provider, outcome: 'succeeded' }]);

    const listed: string[] = [];
    for await (const payment of client.payments.listAll({ limit: 2 })) listed.push(payment.id);
    expect(listed).toEqual(payments.map((p) => p.id));
    expect((await client.payments.list({ limit: 2, ending_before: payments[2]!.id })).data.map((p) => p.id)).toEqual(payments.slice(0, 2).map((p) => p.id));

    const refund = await client.refunds.create(payments[0]!.id, { amount_minor: 1000 });
    expect(refund).toMatchObject({ object: 'refund', status: 'succeeded', amount_minor: 1000, payment_id: payments[0]!.id });
    expect(await client.refunds.retrieve(refund.id)).toEqual(refund);
    expect((await client.refunds.list(payments[0]!.id)).data.map((r) => r.id)).toEqual([refund.id]);
    const balance = await client.balance.retrieve();
    expect(balance.accounts).toContainEqual({ account: 'merchant_balance', currency: 'EUR', balance_minor: 5 * 2500 - 1000 });
  });

  it('captures and cancels manual-capture payments', async () => {
    const authorized = await client.payments.create(order('pm_card_visa', 'manual'));
    expect(authorized.status).toBe('requires_capture');
    const captured = await client.payments.capture(authorized.id, { amount_minor: 2000 });
    expect(captured).toMatchObject({ status: 'succeeded', amount_captured_minor: 2000 });
    const voidable = await client.payments.create(order('pm_card_visa', 'manual'));
    expect((await client.payments.cancel(voidable.id)).status).toBe('canceled');
    expect(await client.payments.cancel(voidable.id).catch((e: unknown) => e)).toBeInstanceOf(PaymentStateError);
  });

  it('saves a card for a customer, charges it off-session, lists and detaches it; the payment shows its customer and off_session', async () => {
    const customer = await client.customers.create({ email: 'ada@example.com', name: 'Ada' });
    expect(await client.customers.retrieve(customer.id)).toEqual(customer);
    const saving = await client.payments.create({ ...order(), customer: customer.id, setup_future_usage: 'off_session' });
    expect(saving).toMatchObject({ status: 'succeeded', customer: customer.id, setup_future_usage: 'off_session', off_session: false });
    const methods = await client.customers.listPaymentMethods(customer.id);
    expect(methods.data).toHaveLength(1);
    const saved = methods.data[0]!;
    expect(saved).toMatchObject({ object: 'payment_method', customer: customer.id, detached_at: null });
    const all = [];
    for await (const method of client.customers.listAllPaymentMethods(customer.id, { limit: 1 })) all.push(method.id);
    expect(all).toEqual([saved.id]);

    const offSession = await client.payments.create({ ...order(saved.id), customer: customer.id, off_session: true });
    expect(offSession).toMatchObject({ status: 'succeeded', customer: customer.id, setup_future_usage: null, off_session: true, payment_method: saved.id });
    expect(await client.payments.retrieve(offSession.id)).toMatchObject({ customer: customer.id, off_session: true });

    const detached = await client.paymentMethods.detach(saved.id);
    expect(detached).toMatchObject({ id: saved.id, detached_at: expect.any(String) });
    expect((await client.customers.listPaymentMethods(customer.id)).data).toEqual([]);
    await expect(client.payments.create({ ...order(saved.id), customer: customer.id, off_session: true })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(client.customers.retrieve('cus_missing')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('answers refusals with typed errors, each from one request', async () => {
    const declined = await client.payments.create(order('pm_card_declined')).catch((e: unknown) => e);
    expect(declined).toBeInstanceOf(CardDeclinedError);
    expect((declined as CardDeclinedError).payment).toMatchObject({ status: 'declined' });

    const first = order();
    const paid = await client.payments.create(first);
    const again = await client.payments.create({ ...first }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(OrderAlreadyPaidError);
    expect((again as OrderAlreadyPaidError).paymentId).toBe(paid.id);

    expect(await client.refunds.create(paid.id, { amount_minor: 2501 }).catch((e: unknown) => e)).toBeInstanceOf(RefundExceedsCapturedError);
    const key = uniqueKey('op');
    await client.payments.create(order(), { idempotencyKey: key });
    expect(await client.payments.create(order(), { idempotencyKey: key }).catch((e: unknown) => e)).toBeInstanceOf(IdempotencyKeyReusedError);
    expect(await client.payments.retrieve('pay_doesnotexist').catch((e: unknown) => e)).toBeInstanceOf(NotFoundError);
    const invalid = await client.payments.create({ ...order(), amount_minor: -1 }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidRequestError);
    expect((invalid as InvalidRequestError).issues[0]?.path).toBe('amount_minor');
  });

  it('follows a 202 to the final payment', async () => {
    // An API that stops waiting after 50 ms answers the slow card with 202 first.
    const impatient = await stack.startApi({ IDEMPOTENCY_WAIT_MS: 50 });
    try {
      const seen: string[] = [];
      const recordingFetch: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        seen.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname} ${response.status}`);
        return response;
      };
      const slowClient = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: impatient.url, fetch: recordingFetch });
      const payment = await slowClient.payments.create(order('pm_card_slow'));
      expect(payment.status).toBe('succeeded');
      expect(seen[0]).toBe('POST /v1/payments 202');
      expect(seen).toContain(`GET /v1/payments/${payment.id} 200`);
      expect(seen.at(-1)).toBe('POST /v1/payments 201');
      expect((await effectsOf(stack.sql, stack.sandboxUrl, payment.id)).charges).toBe(1);
    } finally {
      await impatient.close();
    }
  });
});

describe('a connection cut after the server committed', () => {
  it("the client's retry under the same key returns the original payment; the provider charged once", async () => {
    const proxy = await startLossyProxy(stack.apiUrl, ({ method, index }) => (method === 'POST' && index < 2 ? 'lose_answer' : 'forward'));
    try {
      const lossy = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: proxy.url, baseDelayMs: 50 });
      const payment = await lossy.payments.create(order());
      expect(proxy.lost).toEqual([
        { method: 'POST', path: '/v1/payments', status: 201 },
        { method: 'POST', path: '/v1/payments', status: 201 },
      ]);
      expect(payment.status).toBe('succeeded');
      const [count] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id = ${payment.order_id}`;
      expect(count!.n).toBe(1);
      const effects = await effectsOf(stack.sql, stack.sandboxUrl, payment.id);
      expect(effects).toMatchObject({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
    } finally {
      await proxy.close();
    }
  });
});

describe('a 429 storm in front of the stack', () => {
  it('waits each one out under the same key, then pays once', async () => {
    // Stands in for the API's rate limiter: the first five tries are refused before reaching it.
    const limiter = await startLossyProxy(stack.apiUrl, ({ index }) =>
      index < 5 ? { status: 429, headers: { 'retry-after': '0' }, body: { error: { type: 'rate_limited', message: 'slow down' } } } : 'forward',
    );
    const keys: string[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      keys.push(new Headers(init?.headers).get('idempotency-key') ?? '');
      return fetch(input, init);
    };
    try {
      const patient = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: limiter.url, baseDelayMs: 20, maxRetries: 6, fetch: recordingFetch });
      const payment = await patient.payments.create(order());
      expect(payment.status).toBe('succeeded');
      expect(limiter.answeredByProxy.map((a) => a.status)).toEqual([429, 429, 429, 429, 429]);
      expect(keys).toHaveLength(6);
      expect(new Set(keys).size).toBe(1);
      expect((await effectsOf(stack.sql, stack.sandboxUrl, payment.id)).charges).toBe(1);

      // A storm that outlasts the retries: a typed error, and the API never saw the request.
      const storm = await startLossyProxy(stack.apiUrl, () => ({ status: 429, headers: { 'retry-after': '0' }, body: { error: { type: 'rate_limited', message: 'slow down' } } }));
      try {
        const refused = await new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: storm.url, baseDelayMs: 20, maxRetries: 2 }).payments.create(order()).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(RateLimitedError);
        expect(storm.answeredByProxy).toHaveLength(3);
      } finally {
        await storm.close();
      }
    } finally {
      await limiter.close();
    }
  });
});

describe('webhooks and events through the client', () => {
  it('verifies the relay’s deliveries, and resends one that the merchant wants again', async () => {
    const receiver = await startWebhookReceiver();
    const hooked = await stack.createTenant('client-webhooks');
    const response = await fetch(`${stack.apiUrl}/admin/tenants/${hooked.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhook_url: receiver.url }),
    });
    expect(response.status).toBe(200);
    const merchant = new PaymentsClient({ apiKey: hooked.apiKey, baseUrl: stack.apiUrl });
    const payment = await merchant.payments.create(order());
    const delivery = await eventually(async () => receiver.deliveries[0]);
    const event: Event = verifyWebhook(hooked.webhookSecret, delivery.body, delivery.headers as Record<string, string>);
    expect(event).toMatchObject({ type: 'payment.succeeded', data: { object: { id: payment.id } } });
    expect(await merchant.events.retrieve(event.id)).toEqual(event);

    await eventually(async () => (await merchant.events.deliveries(event.id)).data.length === 1);
    const resent = await merchant.events.resend(event.id);
    expect(resent).toMatchObject({ event_id: event.id, delivery_status: 'pending' });
    await eventually(async () => receiver.of(event.id).length === 2);
    const attempts = await eventually(async () => {
      const page = await merchant.events.deliveries(event.id);
      return page.data.length === 2 && page.data;
    });
    expect(attempts.map((a) => a.response_status)).toEqual([200, 200]);
    expect(verifyWebhook(hooked.webhookSecret, receiver.of(event.id)[1]!.body, receiver.of(event.id)[1]!.headers as Record<string, string>).id).toBe(event.id);
    expect((await merchant.events.recover(new Date(Date.now() - 60_000))).resent).toBe(0);
    await receiver.close();
  });
});
