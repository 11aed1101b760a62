import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StripeProvider } from '../../provider/stripe/client';
import { ProviderRejectedError, ProviderUnavailableError } from '../../provider/types';
import { freePort } from '../../devstack/ports';
import { startRecordingHop, startStripeMock, type StripeExchange } from '../helpers/stripe-mock';

/**
 * StripeProvider against stripe-mock, Stripe's own mock server, which validates every
 * request against Stripe's OpenAPI definition: the parameters the adapter sends are ones
 * Stripe accepts, each mutating call carries its Idempotency-Key, search queries are in
 * Stripe's syntax, and Stripe's refusals map to our errors. stripe-mock is stateless (it
 * answers fixtures), so outcomes that need state (declines, replays, conflicts, 5xx) stay
 * with the scripted fake in stripe-provider.test.ts.
 */

type Exchange = StripeExchange;

let mock: Awaited<ReturnType<typeof startStripeMock>>;
let recorder: Awaited<ReturnType<typeof startRecordingHop>>;
let recorderPort: number;
let exchanges: Exchange[] = [];

beforeAll(async () => {
  mock = await startStripeMock();
  // A recording hop in front of stripe-mock: what went over the wire, and how stripe-mock judged it.
  recorder = await startRecordingHop(mock.port, (exchange) => exchanges.push(exchange));
  recorderPort = recorder.port;
}, 300_000);

afterAll(async () => {
  await recorder?.close();
  await mock?.stop();
});

beforeEach(() => {
  exchanges = [];
});

const provider = (apiKey = 'sk_test_123', port = () => recorderPort) => new StripeProvider({ apiKey, host: '127.0.0.1', port: port(), protocol: 'http', timeoutMs: 5_000 });

/** The one exchange of the last call; stripe-mock accepted it and echoed the key it was sent. */
function accepted(method: string, path: string): Exchange {
  expect(exchanges.map((e) => `${e.method} ${e.path} ${e.status}`)).toEqual([`${method} ${path} 200`]);
  return exchanges[0]!;
}

describe('every request the adapter sends is one Stripe accepts', () => {
  it('creates a PaymentIntent with valid parameters and the idempotency key', async () => {
    for (const capture of [true, false]) {
      exchanges = [];
      const charge = await provider().createCharge({
        amountMinor: 2500,
        currency: 'EUR',
        paymentMethod: 'pm_card_visa',
        capture,
        description: 'order 1001',
        reference: 'pay_1',
        idempotencyKey: `charge-key-${capture}`,
      });
      // stripe-mock reflects what it was sent into its fixture.
      expect(charge).toMatchObject({ amountMinor: 2500, currency: 'EUR' });
      const exchange = accepted('POST', '/v1/payment_intents');
      expect(exchange.headers['idempotency-key']).toBe(`charge-key-${capture}`);
      expect(exchange.responseHeaders.get('idempotency-key')).toBe(`charge-key-${capture}`);
      expect(exchange.form.get('capture_method')).toBe(capture ? 'automatic' : 'manual');
      expect(exchange.form.get('confirm')).toBe('true');
      expect(exchange.form.get('metadata[idempotency_key]')).toBe(`charge-key-${capture}`);
      expect(exchange.form.get('metadata[reference]')).toBe('pay_1');
    }
  });

  it('captures, voids and refunds with valid parameters, each under its own key', async () => {
    await provider().captureCharge({ chargeId: 'pi_123', amountMinor: 1200, idempotencyKey: 'capture-key' });
    expect(accepted('POST', '/v1/payment_intents/pi_123/capture').headers['idempotency-key']).toBe('capture-key');
    expect(exchanges[0]!.form.get('amount_to_capture')).toBe('1200');

    exchanges = [];
    await provider().captureCharge({ chargeId: 'pi_123', idempotencyKey: 'capture-all-key' });
    expect(accepted('POST', '/v1/payment_intents/pi_123/capture').form.has('amount_to_capture')).toBe(false);

    exchanges = [];
    await provider().voidCharge({ chargeId: 'pi_123', idempotencyKey: 'void-key' });
    expect(accepted('POST', '/v1/payment_intents/pi_123/cancel').headers['idempotency-key']).toBe('void-key');

    exchanges = [];
    const refund = await provider().createRefund({ chargeId: 'pi_123', amountMinor: 300, reference: 're_1', idempotencyKey: 'refund-key' });
    expect(refund).toMatchObject({ chargeId: 'pi_123', amountMinor: 300 });
    const exchange = accepted('POST', '/v1/refunds');
    expect(exchange.headers['idempotency-key']).toBe('refund-key');
    expect(exchange.form.get('metadata[idempotency_key]')).toBe('refund-key');
  });

  it('looks refunds up by listing the idempotency window', async () => {
    await provider().findRefundByIdempotencyKey('refund-key');
    const exchange = exchanges[0]!;
    expect(`${exchange.method} ${exchange.path} ${exchange.status}`).toBe('GET /v1/refunds 200');
    expect(Number(exchange.query.get('created[gte]'))).toBeGreaterThan(Date.now() / 1000 - 49 * 3600);
    expect(exchange.query.get('limit')).toBe('100');
  });

  it("searches in Stripe's query syntax, quoting and escaping any key", async () => {
    // Stripe search: field:'value', metadata['key']:'value'; a quote or backslash in a value is backslash-escaped.
    const clause = /^metadata\['(idempotency_key|reference)'\]:'((?:[^'\\]|\\['\\])*)'$/;
    const unescape = (value: string) => value.replace(/\\(['\\])/g, '$1');
    for (const key of ['plain-key', "it's", 'back\\slash', "both\\'"]) {
      exchanges = [];
      await provider().findChargeByIdempotencyKey(key);
      const search = accepted('GET', '/v1/payment_intents/search');
      const [, field, value] = clause.exec(search.query.get('query') ?? '') ?? [];
      expect(field).toBe('idempotency_key');
      expect(unescape(value!)).toBe(key);
      expect(search.query.get('expand[0]')).toBe('data.latest_charge');
    }
    exchanges = [];
    await provider().listChargesByReference('pay_1');
    expect(clause.exec(accepted('GET', '/v1/payment_intents/search').query.get('query') ?? '')?.[1]).toBe('reference');
  });
});

describe('payments that wait and the report: requests Stripe accepts', () => {
  it('a charge with a return_url allows redirects and sends the return_url', async () => {
    await provider().createCharge({
      amountMinor: 2500,
      currency: 'EUR',
      paymentMethod: 'pm_card_threeDSecure2Required',
      capture: true,
      reference: 'pay_3ds',
      idempotencyKey: 'charge-3ds',
      returnUrl: 'https://shop.example/return',
    }).catch(() => undefined); // stripe-mock's fixture status is not what this is about
    const exchange = accepted('POST', '/v1/payment_intents');
    expect(exchange.form.get('return_url')).toBe('https://shop.example/return');
    expect(exchange.form.get('automatic_payment_methods[enabled]')).toBe('true');
    expect(exchange.form.has('automatic_payment_methods[allow_redirects]')).toBe(false);
  });

  it('retrieves a PaymentIntent (the status poll) with its latest charge expanded', async () => {
    const charge = await provider().retrieveCharge('pi_123').catch((e: unknown) => e);
    const exchange = accepted('GET', '/v1/payment_intents/pi_123');
    expect(exchange.query.get('expand[0]')).toBe('latest_charge');
    // Whatever stripe-mock's fixture status, it maps to one of ours or to an unknown outcome.
    if (!(charge instanceof ProviderUnavailableError)) expect(charge).toMatchObject({ id: expect.any(String), currency: expect.any(String) });
  });

  it('lists balance transactions for a window, a page at a time, with the sources expanded', async () => {
    const page = await provider().listBalanceTransactions({
      from: new Date('2026-11-30T00:00:00Z'),
      to: new Date('2026-12-01T00:00:00Z'),
      startingAfter: 'txn_123',
      limit: 25,
    });
    const exchange = accepted('GET', '/v1/balance_transactions');
    expect(exchange.query.get('created[gte]')).toBe(String(Date.parse('2026-11-30T00:00:00Z') / 1000));
    expect(exchange.query.get('created[lt]')).toBe(String(Date.parse('2026-12-01T00:00:00Z') / 1000));
    expect(exchange.query.get('limit')).toBe('25');
    expect(exchange.query.get('starting_after')).toBe('txn_123');
    expect(exchange.query.getAll('expand[]').length + exchange.query.getAll('expand[0]').length).toBeGreaterThan(0);
    expect(typeof page.hasMore).toBe('boolean');
    for (const line of page.data) expect(['charge', 'refund']).toContain(line.type);
  });
});

describe('saved cards: requests Stripe accepts', () => {
  const saving = { amountMinor: 2500, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: 'pay_save', idempotencyKey: 'charge-save' } as const;

  it('a charge that saves the card makes a Customer under a key of its own, then confirms the PaymentIntent with it and setup_future_usage', async () => {
    await provider().createCharge({ ...saving, setupFutureUsage: 'off_session' }).catch(() => undefined); // the fixture's status is not what this is about
    expect(exchanges.map((e) => `${e.method} ${e.path} ${e.status}`)).toEqual(['POST /v1/customers 200', 'POST /v1/payment_intents 200']);
    const [customer, intent] = exchanges as [Exchange, Exchange];
    expect(customer.headers['idempotency-key']).toBe('charge-save:customer');
    expect(customer.form.get('metadata[reference]')).toBe('pay_save');
    expect(intent.headers['idempotency-key']).toBe('charge-save');
    expect(intent.form.get('customer')).toMatch(/^cus_/);
    expect(intent.form.get('payment_method')).toBe('pm_card_visa');
    expect(intent.form.get('setup_future_usage')).toBe('off_session');
    expect(intent.form.has('off_session')).toBe(false);
  });

  it('an off-session charge of a card saved at Stripe names its Customer and PaymentMethod with off_session and confirm', async () => {
    const card = { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 };
    await provider()
      .createCharge({ ...saving, idempotencyKey: 'charge-mit', offSession: true, savedMethod: { token: 'cus_123/pm_456', networkTransactionId: 'ntid_1', card } })
      .catch(() => undefined);
    const exchange = accepted('POST', '/v1/payment_intents');
    expect(exchange.form.get('customer')).toBe('cus_123');
    expect(exchange.form.get('payment_method')).toBe('pm_456');
    expect(exchange.form.get('off_session')).toBe('true');
    expect(exchange.form.get('confirm')).toBe('true');
    expect(exchange.form.has('setup_future_usage')).toBe(false);
  });
});

describe('disputes: requests Stripe accepts', () => {
  it('retrieves and lists disputes with their PaymentIntents expanded, and maps its fixture', async () => {
    const got = await provider().disputes.retrieveDispute('dp_123');
    expect(accepted('GET', '/v1/disputes/dp_123').query.get('expand[0]')).toBe('payment_intent');
    expect(got).toMatchObject({ id: expect.any(String), currency: expect.stringMatching(/^[A-Z]{3}$/), stage: expect.any(String), status: expect.any(String) });
    exchanges = [];
    const page = await provider().disputes.listDisputes({ limit: 10, startingAfter: 'dp_0', created: { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-01-02T00:00:00Z') } });
    const listed = accepted('GET', '/v1/disputes');
    expect(listed.query.get('starting_after')).toBe('dp_0');
    expect(listed.query.get('created[gte]')).toBe(String(Date.parse('2026-01-01T00:00:00Z') / 1000));
    expect(typeof page.hasMore).toBe('boolean');
  });

  it('submits evidence and closes a dispute, each under its own key', async () => {
    await provider().disputes.updateDispute({ idempotencyKey: 'evidence-key', disputeId: 'dp_123', evidence: { uncategorized_text: 'shipped, tracking 1Z' }, submit: true });
    const update = accepted('POST', '/v1/disputes/dp_123');
    expect(update.headers['idempotency-key']).toBe('evidence-key');
    expect(update.form.get('evidence[uncategorized_text]')).toBe('shipped, tracking 1Z');
    expect(update.form.get('submit')).toBe('true');
    exchanges = [];
    await provider().disputes.closeDispute({ idempotencyKey: 'close-key', disputeId: 'dp_123' });
    expect(accepted('POST', '/v1/disputes/dp_123/close').headers['idempotency-key']).toBe('close-key');
  });
});

describe("Stripe's refusals map to our errors", () => {
  it('a request Stripe refuses at validation is a rejection (nothing happened), not an unknown outcome', async () => {
    const error = await provider()
      .createCharge({ amountMinor: 12.5, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, description: null, reference: 'pay_2', idempotencyKey: 'bad-amount' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRejectedError);
    expect((error as ProviderRejectedError).status).toBe(400);
    expect(exchanges[0]!.status).toBe(400);
  });

  it('an invalid API key is a rejection', async () => {
    const error = await provider('not-a-key').captureCharge({ chargeId: 'pi_123', idempotencyKey: 'k-auth' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRejectedError);
    expect((error as ProviderRejectedError).status).toBe(401);
  });

  it('an unreachable Stripe is an unknown outcome', async () => {
    const closedPort = await freePort();
    const error = await provider('sk_test_123', () => closedPort).captureCharge({ chargeId: 'pi_123', idempotencyKey: 'k-down' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
  });
});
