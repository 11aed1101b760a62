import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StripeProvider } from '../../provider/stripe/client';
import { ProviderRejectedError, ProviderUnavailableError, ProviderWebhookError } from '../../provider/types';

/**
 * StripeProvider against a local HTTP server posing as api.stripe.com: it records every
 * request and answers what the test scripted, so the wire format (idempotency keys,
 * parameters) and the mapping of Stripe's answers are checked without the network.
 */

interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  form: URLSearchParams;
}

type Answer = { status: number; body: unknown };

let server: Server;
let port: number;
let recorded: RecordedRequest[] = [];
let answer: (request: RecordedRequest) => Answer = () => ({ status: 500, body: {} });

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const request: RecordedRequest = {
        method: req.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        form: new URLSearchParams(Buffer.concat(chunks).toString('utf8')),
      };
      recorded.push(request);
      const { status, body } = answer(request);
      res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': `req_${recorded.length}` });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  recorded = [];
});

const provider = () =>
  new StripeProvider({ apiKey: 'sk_test_fake', host: '127.0.0.1', port, protocol: 'http', timeoutMs: 2_000 });

function paymentIntent(overrides: Record<string, unknown> = {}) {
  return {
    id: 'pi_123',
    object: 'payment_intent',
    amount: 2_500,
    amount_received: 2_500,
    currency: 'eur',
    status: 'succeeded',
    capture_method: 'automatic',
    last_payment_error: null,
    latest_charge: { id: 'ch_123', object: 'charge', amount_refunded: 0 },
    metadata: { reference: 'pay_1', idempotency_key: 'key_charge_1' },
    ...overrides,
  };
}

function refund(overrides: Record<string, unknown> = {}) {
  return {
    id: 're_123',
    object: 'refund',
    amount: 1_000,
    payment_intent: 'pi_123',
    status: 'succeeded',
    failure_reason: null,
    metadata: { reference: 'refund_1', idempotency_key: 'key_refund_1' },
    ...overrides,
  };
}

const chargeRequest = {
  idempotencyKey: 'key_charge_1',
  amountMinor: 2_500,
  currency: 'EUR',
  paymentMethod: 'pm_card_visa',
  capture: true,
  reference: 'pay_1',
};

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

describe('every mutating call carries our idempotency key', () => {
  it('createCharge confirms a PaymentIntent under our key and stores the key in metadata', async () => {
    answer = () => ({ status: 200, body: paymentIntent() });
    const charge = await provider().createCharge(chargeRequest);

    expect(recorded).toHaveLength(1);
    const [request] = recorded;
    expect(request!.method).toBe('POST');
    expect(request!.path).toBe('/v1/payment_intents');
    expect(request!.headers['idempotency-key']).toBe('key_charge_1');
    expect(request!.headers['authorization']).toBe('Bearer sk_test_fake');
    expect(Object.fromEntries(request!.form)).toMatchObject({
      amount: '2500',
      currency: 'eur',
      payment_method: 'pm_card_visa',
      confirm: 'true',
      capture_method: 'automatic',
      'metadata[reference]': 'pay_1',
      'metadata[idempotency_key]': 'key_charge_1',
    });
    expect(charge).toEqual({
      id: 'pi_123',
      status: 'succeeded',
      amountMinor: 2_500,
      amountCapturedMinor: 2_500,
      amountRefundedMinor: 0,
      currency: 'EUR',
      declineCode: null,
      declineMessage: null,
      nextAction: null,
      reference: 'pay_1',
      // The fixture's charge says neither its method nor when it was made: no timestamp claimed.
      authorizedAt: null,
      succeededAt: null,
    });
  });

  it('a card charge\'s creation time is when it was authorized and, captured automatically, succeeded; a manual one has not succeeded by it', async () => {
    const created = 1_767_225_600; // 2026-01-01T00:00:00Z
    const card = { id: 'ch_123', object: 'charge', amount_refunded: 0, created, status: 'succeeded', payment_method_details: { type: 'card' } };
    answer = () => ({ status: 200, body: paymentIntent({ latest_charge: card }) });
    expect(await provider().createCharge(chargeRequest)).toMatchObject({ authorizedAt: '2026-01-01T00:00:00.000Z', succeededAt: '2026-01-01T00:00:00.000Z' });
    answer = () => ({ status: 200, body: paymentIntent({ status: 'requires_capture', amount_received: 0, capture_method: 'manual', latest_charge: card }) });
    expect(await provider().createCharge({ ...chargeRequest, capture: false })).toMatchObject({ authorizedAt: '2026-01-01T00:00:00.000Z', succeededAt: null });
    const debit = { ...card, payment_method_details: { type: 'sepa_debit' } };
    answer = () => ({ status: 200, body: paymentIntent({ latest_charge: debit }) });
    expect(await provider().createCharge(chargeRequest)).toMatchObject({ authorizedAt: null, succeededAt: null });
  });

  it('an authorize-only charge asks for manual capture and maps requires_capture', async () => {
    answer = () => ({ status: 200, body: paymentIntent({ status: 'requires_capture', amount_received: 0, capture_method: 'manual' }) });
    const charge = await provider().createCharge({ ...chargeRequest, capture: false, idempotencyKey: 'key_auth_1' });
    expect(recorded[0]!.form.get('capture_method')).toBe('manual');
    expect(recorded[0]!.headers['idempotency-key']).toBe('key_auth_1');
    expect(charge).toMatchObject({ status: 'requires_capture', amountCapturedMinor: 0 });
  });

  it('captureCharge, voidCharge and createRefund send their own keys', async () => {
    answer = (request) => {
      if (request.path === '/v1/payment_intents/pi_123/capture') {
        return { status: 200, body: paymentIntent({ amount_received: 1_500 }) };
      }
      if (request.path === '/v1/payment_intents/pi_123/cancel') {
        return { status: 200, body: paymentIntent({ status: 'canceled', amount_received: 0 }) };
      }
      if (request.path === '/v1/refunds') return { status: 200, body: refund() };
      return { status: 404, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: 'no' } } };
    };
    const stripe = provider();

    const captured = await stripe.captureCharge({ idempotencyKey: 'key_capture_1', chargeId: 'pi_123', amountMinor: 1_500 });
    const voided = await stripe.voidCharge({ idempotencyKey: 'key_void_1', chargeId: 'pi_123' });
    const refunded = await stripe.createRefund({
      idempotencyKey: 'key_refund_1',
      chargeId: 'pi_123',
      amountMinor: 1_000,
      reference: 'refund_1',
    });

    expect(recorded.map((r) => [r.method, r.path, r.headers['idempotency-key']])).toEqual([
      ['POST', '/v1/payment_intents/pi_123/capture', 'key_capture_1'],
      ['POST', '/v1/payment_intents/pi_123/cancel', 'key_void_1'],
      ['POST', '/v1/refunds', 'key_refund_1'],
    ]);
    expect(recorded[0]!.form.get('amount_to_capture')).toBe('1500');
    expect(Object.fromEntries(recorded[2]!.form)).toMatchObject({
      payment_intent: 'pi_123',
      amount: '1000',
      'metadata[reference]': 'refund_1',
      'metadata[idempotency_key]': 'key_refund_1',
    });
    expect(captured).toMatchObject({ status: 'succeeded', amountMinor: 2_500, amountCapturedMinor: 1_500 });
    expect(voided).toMatchObject({ status: 'canceled' });
    expect(refunded).toEqual({
      id: 're_123',
      chargeId: 'pi_123',
      status: 'succeeded',
      amountMinor: 1_000,
      failureCode: null,
      failureMessage: null,
    });
  });

  it('a full capture sends no amount, so Stripe captures the whole authorization', async () => {
    answer = () => ({ status: 200, body: paymentIntent() });
    await provider().captureCharge({ idempotencyKey: 'key_capture_2', chargeId: 'pi_123' });
    expect(recorded[0]!.form.has('amount_to_capture')).toBe(false);
    expect(recorded[0]!.headers['idempotency-key']).toBe('key_capture_2');
  });
});

describe('saved cards', () => {
  const card = { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2034, network_transaction_id: '123456789012345' };
  const authorized = (overrides: Record<string, unknown> = {}) =>
    paymentIntent({
      customer: 'cus_9',
      payment_method: 'pm_9',
      setup_future_usage: 'off_session',
      latest_charge: { id: 'ch_9', object: 'charge', amount_refunded: 0, created: 1_767_225_600, status: 'succeeded', payment_method_details: { type: 'card', card } },
      ...overrides,
    });

  it('a charge that saved the card answers it as our token (its Customer and PaymentMethod), the network transaction id and the card', async () => {
    answer = (request) => (request.path === '/v1/customers' ? { status: 200, body: { id: 'cus_9', object: 'customer' } } : { status: 200, body: authorized() });
    const charge = await provider().createCharge({ ...chargeRequest, setupFutureUsage: 'off_session' });
    expect(recorded.map((r) => r.path)).toEqual(['/v1/customers', '/v1/payment_intents']);
    expect(recorded[1]!.form.get('customer')).toBe('cus_9');
    expect(charge.savedCard).toEqual({ token: 'cus_9/pm_9', networkTransactionId: '123456789012345', card: { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 }, fingerprint: null });
  });

  it('a charge that did not save the card has the network transaction id but no token; without one Stripe reported, nothing is saved', async () => {
    answer = () => ({ status: 200, body: authorized({ setup_future_usage: null }) });
    expect((await provider().createCharge(chargeRequest)).savedCard).toMatchObject({ token: null, networkTransactionId: '123456789012345' });
    answer = () => ({ status: 200, body: authorized({ latest_charge: { id: 'ch_9', object: 'charge', amount_refunded: 0, created: 1, status: 'succeeded', payment_method_details: { type: 'card', card: { ...card, network_transaction_id: null } } } }) });
    expect((await provider().createCharge(chargeRequest)).savedCard).toBeUndefined();
  });

  it('a card saved elsewhere (no token here, only a network transaction id) is refused before anything is sent, as is a token Stripe did not make', async () => {
    const cardDetails = { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 };
    const byNetworkId = await rejection(provider().createCharge({ ...chargeRequest, offSession: true, savedMethod: { token: null, networkTransactionId: 'ntid', card: cardDetails } }));
    expect(byNetworkId).toBeInstanceOf(ProviderRejectedError);
    expect(byNetworkId).toMatchObject({ code: 'network_transaction_id_unsupported' });
    const foreign = await rejection(provider().createCharge({ ...chargeRequest, offSession: true, savedMethod: { token: 'card_sandbox_1', networkTransactionId: 'ntid', card: cardDetails } }));
    expect(foreign).toMatchObject({ code: 'invalid_saved_card_token' });
    expect(recorded).toEqual([]);
  });

  it('an off-session charge the issuer wants authenticated is declined authentication_required', async () => {
    answer = () => ({
      status: 402,
      body: { error: { type: 'card_error', code: 'authentication_required', decline_code: 'authentication_required', message: 'This payment requires authentication.', payment_intent: authorized({ status: 'requires_payment_method', amount_received: 0, last_payment_error: { code: 'authentication_required', decline_code: 'authentication_required', message: 'This payment requires authentication.' } }) } },
    });
    const cardDetails = { brand: 'visa', last4: '4242', expMonth: 12, expYear: 2034 };
    const charge = await provider().createCharge({ ...chargeRequest, offSession: true, savedMethod: { token: 'cus_9/pm_9', networkTransactionId: 'ntid', card: cardDetails } });
    expect(recorded[0]!.form.get('off_session')).toBe('true');
    expect(charge).toMatchObject({ status: 'declined', declineCode: 'authentication_required' });
    expect(charge.savedCard).toBeUndefined();
  });
});

describe('lookups by idempotency key', () => {
  it('findChargeByIdempotencyKey searches PaymentIntents by the metadata key', async () => {
    answer = () => ({
      status: 200,
      body: { object: 'search_result', data: [paymentIntent({ latest_charge: { id: 'ch_1', object: 'charge', amount_refunded: 700 } })], has_more: false, url: '/v1/payment_intents/search' },
    });
    const found = await provider().findChargeByIdempotencyKey("key_'quoted'");
    expect(recorded[0]!.method).toBe('GET');
    expect(recorded[0]!.path).toBe('/v1/payment_intents/search');
    expect(recorded[0]!.query.get('query')).toBe("metadata['idempotency_key']:'key_\\'quoted\\''");
    expect(found).toMatchObject({ id: 'pi_123', status: 'succeeded', amountRefundedMinor: 700 });
  });

  it('findChargeByIdempotencyKey is null when nothing matches', async () => {
    answer = () => ({ status: 200, body: { object: 'search_result', data: [], has_more: false, url: '/v1/payment_intents/search' } });
    expect(await provider().findChargeByIdempotencyKey('key_none')).toBeNull();
  });

  it('findRefundByIdempotencyKey picks the refund whose metadata holds the key', async () => {
    answer = () => ({
      status: 200,
      body: {
        object: 'list',
        data: [refund({ id: 're_other', metadata: { idempotency_key: 'key_other' } }), refund({ id: 're_mine', metadata: { idempotency_key: 'key_mine' } })],
        has_more: false,
        url: '/v1/refunds',
      },
    });
    const found = await provider().findRefundByIdempotencyKey('key_mine');
    expect(recorded[0]!.path).toBe('/v1/refunds');
    expect(recorded[0]!.query.get('created[gte]')).toMatch(/^\d+$/);
    expect(found).toMatchObject({ id: 're_mine', status: 'succeeded' });
    expect(await provider().findRefundByIdempotencyKey('key_absent')).toBeNull();
  });
});

describe('mapping of Stripe results and errors', () => {
  it('a card error is a declined charge, not an error', async () => {
    answer = () => ({
      status: 402,
      body: {
        error: {
          type: 'card_error',
          code: 'card_declined',
          decline_code: 'insufficient_funds',
          message: 'Your card has insufficient funds.',
          payment_intent: paymentIntent({
            id: 'pi_declined',
            status: 'requires_payment_method',
            amount_received: 0,
            latest_charge: null,
            last_payment_error: {
              type: 'card_error',
              code: 'card_declined',
              decline_code: 'insufficient_funds',
              message: 'Your card has insufficient funds.',
            },
          }),
        },
      },
    });
    const charge = await provider().createCharge({ ...chargeRequest, idempotencyKey: 'key_declined_1' });
    expect(recorded[0]!.headers['idempotency-key']).toBe('key_declined_1');
    expect(charge).toEqual({
      id: 'pi_declined',
      status: 'declined',
      amountMinor: 2_500,
      amountCapturedMinor: 0,
      amountRefundedMinor: 0,
      currency: 'EUR',
      declineCode: 'insufficient_funds',
      declineMessage: 'Your card has insufficient funds.',
      nextAction: null,
      reference: 'pay_1',
      authorizedAt: null,
      succeededAt: null,
    });
  });

  it('a 500 is an unknown outcome: ProviderUnavailableError', async () => {
    answer = () => ({ status: 500, body: { error: { type: 'api_error', message: 'Something went wrong on our end.' } } });
    const error = await rejection(provider().createCharge(chargeRequest));
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).status).toBe(500);
    // No hidden SDK retries: the orchestrator owns retrying.
    expect(recorded).toHaveLength(1);
  });

  it('a 429 and a 409 (same key still in flight) are unknown outcomes too', async () => {
    for (const status of [429, 409]) {
      answer = () => ({ status, body: { error: { type: status === 429 ? 'invalid_request_error' : 'idempotency_error', code: status === 429 ? 'rate_limit' : undefined, message: 'later' } } });
      const error = await rejection(provider().captureCharge({ idempotencyKey: 'key_capture_3', chargeId: 'pi_123' }));
      expect(error).toBeInstanceOf(ProviderUnavailableError);
    }
  });

  it('a 400 is a refusal: ProviderRejectedError with the Stripe code', async () => {
    answer = () => ({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'amount_too_large', message: 'Refund amount is greater than unrefunded amount.' } },
    });
    const error = await rejection(
      provider().createRefund({ idempotencyKey: 'key_refund_2', chargeId: 'pi_123', amountMinor: 99_999, reference: 'refund_2' }),
    );
    expect(error).toBeInstanceOf(ProviderRejectedError);
    expect(error).toMatchObject({ status: 400, code: 'amount_too_large' });
  });

  it('a key reused with other parameters is a refusal', async () => {
    answer = () => ({
      status: 400,
      body: { error: { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.' } },
    });
    const error = await rejection(provider().createCharge(chargeRequest));
    expect(error).toBeInstanceOf(ProviderRejectedError);
    expect(error).toMatchObject({ status: 400, code: 'idempotency_key_reused' });
  });

  it('a refund Stripe reports failed is a normal result', async () => {
    answer = () => ({ status: 200, body: refund({ status: 'failed', failure_reason: 'expired_or_canceled_card' }) });
    const result = await provider().createRefund({ idempotencyKey: 'key_refund_3', chargeId: 'pi_123', amountMinor: 1_000, reference: 'refund_3' });
    expect(result).toMatchObject({ status: 'failed', failureCode: 'expired_or_canceled_card' });
  });

  it('a refund still pending has no outcome yet: ProviderUnavailableError', async () => {
    answer = () => ({ status: 200, body: refund({ status: 'pending' }) });
    const error = await rejection(
      provider().createRefund({ idempotencyKey: 'key_refund_4', chargeId: 'pi_123', amountMinor: 1_000, reference: 'refund_4' }),
    );
    expect(error).toBeInstanceOf(ProviderUnavailableError);
  });

  it('a connection failure is ProviderUnavailableError', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const unreachable = new StripeProvider({ apiKey: 'sk_test_fake', host: '127.0.0.1', port: deadPort, protocol: 'http' });
    expect(await rejection(unreachable.createCharge(chargeRequest))).toBeInstanceOf(ProviderUnavailableError);
  });

  it("the caller's abort signal gives up on the call as an unknown outcome", async () => {
    answer = () => ({ status: 200, body: paymentIntent() });
    const error = await rejection(provider().createCharge(chargeRequest, { signal: AbortSignal.abort() }));
    expect(error).toBeInstanceOf(ProviderUnavailableError);
  });
});

describe('payments that wait: requires_action, processing and a decline after authentication', () => {
  it('requires_action with a redirect is requires_action with the next action, and the return_url is sent', async () => {
    answer = () => ({
      status: 200,
      body: paymentIntent({
        status: 'requires_action',
        amount_received: 0,
        next_action: { type: 'redirect_to_url', redirect_to_url: { url: 'https://hooks.stripe.com/3d_secure/x', return_url: 'https://shop.example/back' } },
      }),
    });
    const charge = await provider().createCharge({ ...chargeRequest, idempotencyKey: 'key_3ds', returnUrl: 'https://shop.example/back' });
    expect(recorded[0]!.form.get('return_url')).toBe('https://shop.example/back');
    // With a return_url, redirects are allowed (3-D Secure comes back there).
    expect(recorded[0]!.form.has('automatic_payment_methods[allow_redirects]')).toBe(false);
    expect(charge).toMatchObject({
      status: 'requires_action',
      nextAction: { type: 'redirect_to_url', url: 'https://hooks.stripe.com/3d_secure/x', returnUrl: 'https://shop.example/back' },
      reference: 'pay_1',
    });
  });

  it('without a return_url no redirect is allowed, and an action without a redirect is declined', async () => {
    answer = () => ({ status: 200, body: paymentIntent({ status: 'requires_action', amount_received: 0, next_action: { type: 'use_stripe_sdk', use_stripe_sdk: {} } }) });
    const charge = await provider().createCharge({ ...chargeRequest, idempotencyKey: 'key_sdk' });
    expect(recorded[0]!.form.get('automatic_payment_methods[allow_redirects]')).toBe('never');
    expect(recorded[0]!.form.has('return_url')).toBe(false);
    expect(charge).toMatchObject({ status: 'declined', declineCode: 'authentication_required', nextAction: null });
  });

  it('processing is processing (the outcome comes later)', async () => {
    answer = () => ({ status: 200, body: paymentIntent({ status: 'processing', amount_received: 0 }) });
    expect(await provider().createCharge({ ...chargeRequest, idempotencyKey: 'key_sepa' })).toMatchObject({ status: 'processing', nextAction: null });
  });

  it('requires_payment_method after a challenge is a decline with the last payment error code', async () => {
    answer = () => ({
      status: 200,
      body: paymentIntent({
        status: 'requires_payment_method',
        amount_received: 0,
        last_payment_error: { type: 'card_error', code: 'payment_intent_authentication_failure', message: 'The provided PaymentMethod has failed authentication.' },
      }),
    });
    const charge = await provider().retrieveCharge('pi_123');
    expect(recorded[0]!.method).toBe('GET');
    expect(recorded[0]!.path).toBe('/v1/payment_intents/pi_123');
    expect(recorded[0]!.query.get('expand[0]')).toBe('latest_charge');
    expect(charge).toMatchObject({ status: 'declined', declineCode: 'payment_intent_authentication_failure', declineMessage: expect.stringContaining('authentication') });
  });

  it('retrieveCharge of an unknown id is a refusal', async () => {
    answer = () => ({ status: 404, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: 'No such payment_intent' } } });
    expect(await rejection(provider().retrieveCharge('pi_none'))).toMatchObject({ status: 404, code: 'resource_missing' });
  });
});

describe("webhooks, verified by the Stripe library's own verification", () => {
  const secret = 'whsec_test_secret';
  const withSecret = () =>
    new StripeProvider({ apiKey: 'sk_test_fake', host: '127.0.0.1', port, protocol: 'http', webhookSecret: secret });
  const signer = new Stripe('sk_test_fake');
  const event = (type: string, object: unknown) => JSON.stringify({ id: 'evt_1', object: 'event', type, created: 1_700_000_000, data: { object } });
  const sign = (payload: string, timestamp = Math.floor(Date.now() / 1000), key = secret) =>
    signer.webhooks.generateTestHeaderString({ payload, secret: key, timestamp });

  it('a signed payment_intent event becomes our charge event', async () => {
    const body = event('payment_intent.succeeded', paymentIntent());
    const verified = withSecret().verifyWebhook(body, { 'Stripe-Signature': sign(body) });
    expect(verified).toMatchObject({ id: 'evt_1', type: 'charge.succeeded', refund: null, charge: { id: 'pi_123', status: 'succeeded', reference: 'pay_1' } });
    expect(verified.createdAt.toISOString()).toBe('2023-11-14T22:13:20.000Z');

    const action = event('payment_intent.requires_action', paymentIntent({ status: 'requires_action', next_action: { type: 'redirect_to_url', redirect_to_url: { url: 'https://x/3ds', return_url: null } } }));
    expect(withSecret().verifyWebhook(action, { 'stripe-signature': sign(action) })).toMatchObject({ type: 'charge.requires_action', charge: { nextAction: { url: 'https://x/3ds' } } });
    const failed = event('payment_intent.payment_failed', paymentIntent({ status: 'requires_payment_method', last_payment_error: { code: 'card_declined', message: 'no' } }));
    expect(withSecret().verifyWebhook(failed, { 'stripe-signature': sign(failed) })).toMatchObject({ type: 'charge.declined', charge: { declineCode: 'card_declined' } });
  });

  it('refund events carry the refund; unrelated events pass through under their own name', async () => {
    const body = event('refund.updated', refund({ status: 'failed', failure_reason: 'expired_or_canceled_card' }));
    expect(withSecret().verifyWebhook(body, { 'stripe-signature': sign(body) })).toMatchObject({ type: 'refund.failed', charge: null, refund: { id: 're_123', status: 'failed' } });
    const other = event('customer.created', { id: 'cus_1', object: 'customer' });
    expect(withSecret().verifyWebhook(other, { 'stripe-signature': sign(other) })).toMatchObject({ type: 'stripe.customer.created', charge: null, refund: null });
  });

  it('a missing, wrong or stale signature, a changed body, or no secret is a ProviderWebhookError', async () => {
    const body = event('payment_intent.succeeded', paymentIntent());
    const refuse = (fn: () => unknown) => expect(fn).toThrow(ProviderWebhookError);
    refuse(() => withSecret().verifyWebhook(body, {}));
    refuse(() => withSecret().verifyWebhook(body, { 'stripe-signature': sign(body, undefined, 'whsec_other') }));
    refuse(() => withSecret().verifyWebhook(body.replace('2500', '2501'), { 'stripe-signature': sign(body) }));
    refuse(() => withSecret().verifyWebhook(body, { 'stripe-signature': sign(body, Math.floor(Date.now() / 1000) - 3600) }));
    refuse(() => provider().verifyWebhook(body, { 'stripe-signature': sign(body) }));
    // `now` decides staleness: an old delivery verified as of its own time passes.
    const old = Math.floor(Date.now() / 1000) - 3600;
    expect(withSecret().verifyWebhook(body, { 'stripe-signature': sign(body, old) }, new Date(old * 1000 + 10_000)).type).toBe('charge.succeeded');
  });
});

describe('balance transactions', () => {
  it('lists a window with the sources expanded and maps charges and refunds to our lines', async () => {
    answer = () => ({
      status: 200,
      body: {
        object: 'list',
        has_more: true,
        url: '/v1/balance_transactions',
        data: [
          { id: 'txn_1', object: 'balance_transaction', type: 'charge', amount: 2500, fee: 60, currency: 'eur', status: 'pending', created: 1_700_000_000,
            source: { id: 'ch_1', object: 'charge', payment_intent: { id: 'pi_123', object: 'payment_intent', metadata: { reference: 'pay_1' } }, metadata: {} } },
          { id: 'txn_2', object: 'balance_transaction', type: 'refund', amount: -1000, fee: 0, currency: 'eur', status: 'available', created: 1_700_000_100,
            source: { id: 're_1', object: 'refund', payment_intent: 'pi_123', metadata: { reference: 'refund_1' } } },
          { id: 'txn_3', object: 'balance_transaction', type: 'payout', amount: -9000, fee: 0, currency: 'eur', status: 'available', created: 1_700_000_200, source: 'po_1' },
        ],
      },
    });
    const page = await provider().listBalanceTransactions({ from: new Date('2023-11-14T00:00:00Z'), to: new Date('2023-11-15T00:00:00Z'), startingAfter: 'txn_0', limit: 50 });
    const query = recorded[0]!.query;
    expect(recorded[0]!.path).toBe('/v1/balance_transactions');
    expect(query.get('created[gte]')).toBe(String(Date.parse('2023-11-14T00:00:00Z') / 1000));
    expect(query.get('created[lt]')).toBe(String(Date.parse('2023-11-15T00:00:00Z') / 1000));
    expect(query.get('starting_after')).toBe('txn_0');
    expect(query.get('limit')).toBe('50');
    expect(page.hasMore).toBe(true);
    expect(page.data).toEqual([
      { id: 'txn_1', type: 'charge', source: 'ch_1', chargeId: 'pi_123', reference: 'pay_1', amountMinor: 2500, feeMinor: 60, currency: 'EUR', status: 'pending', createdAt: new Date(1_700_000_000_000) },
      { id: 'txn_2', type: 'refund', source: 're_1', chargeId: 'pi_123', reference: 'refund_1', amountMinor: -1000, feeMinor: 0, currency: 'EUR', status: 'available', createdAt: new Date(1_700_000_100_000) },
    ]);
  });
});

describe('disputes', () => {
  const created = 1_767_225_600; // 2026-01-01T00:00:00Z
  const dispute = (overrides: Record<string, unknown> = {}) => ({
    id: 'dp_1', object: 'dispute', amount: 2_500, currency: 'eur', reason: 'fraudulent', status: 'needs_response', created, charge: 'ch_1',
    payment_intent: { id: 'pi_123', object: 'payment_intent', metadata: { reference: 'pay_1' } },
    evidence: { uncategorized_text: null, refund_policy: 'https://shop.example/refunds', receipt: null },
    evidence_details: { due_by: created + 7 * 86_400, has_evidence: false, past_due: false, submission_count: 0 },
    balance_transactions: [{ id: 'txn_9', object: 'balance_transaction', amount: -2_500, fee: 1_500 }],
    metadata: {},
    ...overrides,
  });

  it('retrieves a dispute with its PaymentIntent expanded: our charge id and reference, the stage and status, the deadline and the withdrawal\'s fee', async () => {
    answer = () => ({ status: 200, body: dispute() });
    const got = await provider().disputes.retrieveDispute('dp_1');
    expect(recorded[0]!.path).toBe('/v1/disputes/dp_1');
    expect(recorded[0]!.query.get('expand[0]')).toBe('payment_intent');
    expect(got).toEqual({
      id: 'dp_1', chargeId: 'pi_123', reference: 'pay_1', amountMinor: 2_500, currency: 'EUR', reason: 'fraudulent', stage: 'chargeback', status: 'needs_response',
      evidenceDueBy: '2026-01-08T00:00:00.000Z', evidenceSubmittedAt: null, createdAt: '2026-01-01T00:00:00.000Z', feeMinor: 1_500,
    });
    expect(await provider().disputes.retrieveEvidence('dp_1')).toEqual({ refund_policy: 'https://shop.example/refunds' });
  });

  it("Stripe's statuses as our stages and statuses; a status it does not know is an unknown outcome", async () => {
    const cases: [string, string, string][] = [
      ['warning_needs_response', 'inquiry', 'needs_response'],
      ['warning_under_review', 'inquiry', 'under_review'],
      ['warning_closed', 'inquiry', 'won'],
      ['under_review', 'chargeback', 'under_review'],
      ['won', 'chargeback', 'won'],
      ['lost', 'chargeback', 'lost'],
    ];
    for (const [status, stage, ours] of cases) {
      answer = () => ({ status: 200, body: dispute({ status }) });
      expect(await provider().disputes.retrieveDispute('dp_1')).toMatchObject({ stage, status: ours, feeMinor: stage === 'inquiry' ? 0 : 1_500 });
    }
    answer = () => ({ status: 200, body: dispute({ status: 'something_new' }) });
    expect(await rejection(provider().disputes.retrieveDispute('dp_1'))).toBeInstanceOf(ProviderUnavailableError);
  });

  it('evidence is staged or submitted by updating the dispute under our key; a submitted one says so; conceding closes it', async () => {
    answer = (request) =>
      request.path.endsWith('/close')
        ? { status: 200, body: dispute({ status: 'lost' }) }
        : { status: 200, body: dispute({ status: 'under_review', evidence_details: { due_by: null, has_evidence: true, past_due: false, submission_count: 1 } }) };
    const before = Date.now();
    const submitted = await provider().disputes.updateDispute({ idempotencyKey: 'key_ev_1', disputeId: 'dp_1', evidence: { uncategorized_text: 'delivered' }, submit: true });
    expect(recorded[0]!.path).toBe('/v1/disputes/dp_1');
    expect(recorded[0]!.headers['idempotency-key']).toBe('key_ev_1');
    expect(recorded[0]!.form.get('evidence[uncategorized_text]')).toBe('delivered');
    expect(recorded[0]!.form.get('submit')).toBe('true');
    expect(submitted).toMatchObject({ status: 'under_review', evidenceDueBy: '2026-01-01T00:00:00.000Z' });
    expect(Date.parse(submitted.evidenceSubmittedAt!)).toBeGreaterThanOrEqual(before - 1_000);
    const closed = await provider().disputes.closeDispute({ idempotencyKey: 'key_close_1', disputeId: 'dp_1' });
    expect(recorded[1]!.path).toBe('/v1/disputes/dp_1/close');
    expect(recorded[1]!.headers['idempotency-key']).toBe('key_close_1');
    expect(closed).toMatchObject({ status: 'lost' });
  });

  it('a dispute no longer open refuses evidence: a rejection, nothing changed', async () => {
    answer = () => ({ status: 400, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: 'This dispute is already closed' } } });
    expect(await rejection(provider().disputes.updateDispute({ idempotencyKey: 'key_ev_2', disputeId: 'dp_1', evidence: {}, submit: true }))).toBeInstanceOf(ProviderRejectedError);
  });

  it('lists disputes a page at a time, of a creation window, with their PaymentIntents expanded', async () => {
    answer = () => ({ status: 200, body: { object: 'list', url: '/v1/disputes', has_more: true, data: [dispute(), dispute({ id: 'dp_2', payment_intent: 'pi_9' })] } });
    const page = await provider().disputes.listDisputes({ limit: 2, startingAfter: 'dp_0', created: { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-01-01T01:00:00Z') } });
    expect(recorded[0]!.query.get('starting_after')).toBe('dp_0');
    expect(recorded[0]!.query.get('created[gte]')).toBe(String(created));
    expect(recorded[0]!.query.get('created[lt]')).toBe(String(created + 3_600));
    expect(recorded[0]!.query.get('limit')).toBe('2');
    expect(page).toMatchObject({ hasMore: true, data: [{ id: 'dp_1', chargeId: 'pi_123', reference: 'pay_1' }, { id: 'dp_2', chargeId: 'pi_9', reference: null }] });
  });

  it("a dispute's withdrawal and reinstatement in the balance report are dispute lines of its PaymentIntent", async () => {
    const source = { id: 'dp_1', object: 'dispute', payment_intent: { id: 'pi_123', object: 'payment_intent', metadata: { reference: 'pay_1' } } };
    answer = () => ({
      status: 200,
      body: {
        object: 'list', has_more: false, url: '/v1/balance_transactions',
        data: [
          { id: 'txn_4', object: 'balance_transaction', type: 'adjustment', reporting_category: 'dispute', amount: -2_500, fee: 1_500, currency: 'eur', status: 'available', created: 1_700_000_000, source },
          { id: 'txn_5', object: 'balance_transaction', type: 'adjustment', reporting_category: 'dispute_reversal', amount: 2_500, fee: 0, currency: 'eur', status: 'pending', created: 1_700_000_100, source },
          { id: 'txn_6', object: 'balance_transaction', type: 'adjustment', reporting_category: 'other_adjustment', amount: -10, fee: 0, currency: 'eur', status: 'available', created: 1_700_000_200, source: 'adj_1' },
        ],
      },
    });
    const page = await provider().listBalanceTransactions({ from: new Date('2023-11-14T00:00:00Z'), to: new Date('2023-11-15T00:00:00Z') });
    expect(page.data).toEqual([
      { id: 'txn_4', type: 'dispute', source: 'dp_1', chargeId: 'pi_123', reference: 'pay_1', amountMinor: -2_500, feeMinor: 1_500, currency: 'EUR', status: 'available', createdAt: new Date(1_700_000_000_000) },
      { id: 'txn_5', type: 'dispute_reversal', source: 'dp_1', chargeId: 'pi_123', reference: 'pay_1', amountMinor: 2_500, feeMinor: 0, currency: 'EUR', status: 'pending', createdAt: new Date(1_700_000_100_000) },
    ]);
  });
});
