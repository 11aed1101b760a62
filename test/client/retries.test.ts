import { afterEach, describe, expect, it } from 'vitest';
import {
  backoffMs,
  CardDeclinedError,
  ConnectionError,
  IdempotencyKeyReusedError,
  InvalidRequestError,
  OrderAlreadyPaidError,
  PaymentsClient,
  RateLimitedError,
  RefundExceedsCapturedError,
  ServiceUnavailableError,
} from '../../client';
import { startScriptedServer, type ScriptedAnswer, type ScriptedRequest } from '../helpers/scripted-server';

/**
 * The client's retry rules, against a loopback server that answers as scripted (the real
 * API's behaviour under these answers is covered in client-stack.test.ts).
 */

const payment = { id: 'pay_1', object: 'payment', status: 'succeeded' };
const body = { order_id: 'ord_1', amount_minor: 500, currency: 'EUR', payment_method: 'pm_card_visa' };
const apiError = (status: number, type: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): ScriptedAnswer => ({
  status,
  headers,
  body: { error: { type, message: `a ${type}`, ...extra } },
});

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((close) => close()));
  closers = [];
});

/** A client on a scripted server; its waits are recorded instead of slept. */
async function scripted(answer: (request: ScriptedRequest, index: number) => ScriptedAnswer, options: { maxRetries?: number } = {}) {
  const server = await startScriptedServer(answer);
  closers.push(server.close);
  const waits: number[] = [];
  const client = new PaymentsClient({
    apiKey: 'sk_test',
    baseUrl: server.url,
    maxRetries: options.maxRetries ?? 4,
    sleep: async (ms) => void waits.push(ms),
    random: () => 0.5,
  });
  return { client, requests: server.requests, waits };
}

describe('one idempotency key per operation, reused by every retry', () => {
  it('rides out a 429 storm with one key, waiting at least Retry-After each time', async () => {
    const { client, requests, waits } = await scripted((_, i) => (i < 4 ? apiError(429, 'rate_limited', {}, { 'retry-after': '2' }) : { status: 201, body: payment }));
    expect(await client.payments.create(body)).toEqual(payment);
    expect(requests).toHaveLength(5);
    const keys = new Set(requests.map((r) => r.headers['idempotency-key']));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(requests.every((r) => r.body === JSON.stringify(body))).toBe(true);
    expect(waits).toHaveLength(4);
    for (const wait of waits) expect(wait).toBeGreaterThanOrEqual(2000);
  });

  it('gives up on a storm that outlasts its retries with a RateLimitedError carrying Retry-After', async () => {
    const { client, requests } = await scripted(() => apiError(429, 'rate_limited', {}, { 'retry-after': '7' }), { maxRetries: 3 });
    const error = await client.payments.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).retryAfterSeconds).toBe(7);
    expect(requests).toHaveLength(4);
    expect(new Set(requests.map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it('does not wait out a Retry-After beyond its patience: the error carries it at once', async () => {
    const { client, requests, waits } = await scripted(() => apiError(429, 'rate_limited', {}, { 'retry-after': '3600' }));
    const error = await client.payments.create(body).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).retryAfterSeconds).toBe(3600);
    expect(requests).toHaveLength(1);
    expect(waits).toEqual([]);
  });

  it('retries cut connections and 5xx with the same key, with growing jittered backoff', async () => {
    const { client, requests, waits } = await scripted((_, i) => (i === 0 ? 'cut' : i === 1 ? apiError(503, 'service_unavailable') : i === 2 ? { status: 502, body: 'bad gateway' } : { status: 201, body: payment }));
    expect(await client.payments.create(body, { idempotencyKey: 'order-ord_1-attempt-1' })).toEqual(payment);
    expect(requests.map((r) => r.headers['idempotency-key'])).toEqual(Array(4).fill('order-ord_1-attempt-1'));
    // random() = 0.5: half of 250, 500, 1000 ms.
    expect(waits).toEqual([125, 250, 500]);
  });

  it('never retries a 4xx refusal: each is one request and a typed error', async () => {
    const cases: [ScriptedAnswer, new (...args: never[]) => Error][] = [
      [apiError(402, 'card_declined', { payment: { ...payment, status: 'declined' } }), CardDeclinedError],
      [apiError(409, 'order_already_paid', { payment_id: 'pay_0' }), OrderAlreadyPaidError],
      [apiError(409, 'refund_exceeds_captured'), RefundExceedsCapturedError],
      [apiError(422, 'idempotency_key_reused'), IdempotencyKeyReusedError],
      [apiError(400, 'invalid_request', { issues: [{ path: 'amount_minor', code: 'too_small', message: 'must be greater than zero' }] }), InvalidRequestError],
    ];
    for (const [answer, ErrorClass] of cases) {
      const { client, requests } = await scripted(() => answer);
      const error = await client.payments.create(body).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ErrorClass);
      expect(requests).toHaveLength(1);
    }
    const { client } = await scripted(() => apiError(402, 'card_declined', { payment: { ...payment, status: 'declined' } }));
    expect(((await client.payments.create(body).catch((e: unknown) => e)) as CardDeclinedError).payment?.status).toBe('declined');
  });

  it('gives each logical operation its own key', async () => {
    const { client, requests } = await scripted(() => ({ status: 201, body: payment }));
    await client.payments.create(body);
    await client.payments.create(body);
    expect(new Set(requests.map((r) => r.headers['idempotency-key'])).size).toBe(2);
  });

  it('reports an endpoint that never answers as a ConnectionError, and a 5xx that persists as ServiceUnavailableError', async () => {
    const cut = await scripted(() => 'cut', { maxRetries: 2 });
    expect(await cut.client.balance.retrieve().catch((e: unknown) => e)).toBeInstanceOf(ConnectionError);
    expect(cut.requests).toHaveLength(3);
    const down = await scripted(() => apiError(503, 'service_unavailable', {}, { 'retry-after': '1' }), { maxRetries: 1 });
    expect(await down.client.payments.retrieve('pay_1').catch((e: unknown) => e)).toBeInstanceOf(ServiceUnavailableError);
    expect(down.requests).toHaveLength(2);
  });

  it('follows a 202 through Location to the final answer, under the same key', async () => {
    const processing = { ...payment, status: 'processing' };
    const { client, requests } = await scripted((request, i) => {
      if (request.method === 'GET') return { status: 200, body: i < 3 ? processing : payment };
      return i === 0 ? { status: 202, headers: { location: '/v1/payments/pay_1', 'retry-after': '1' }, body: processing } : { status: 201, body: payment };
    });
    expect(await client.payments.create(body)).toEqual(payment);
    expect(requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/payments', 'GET /v1/payments/pay_1', 'GET /v1/payments/pay_1', 'GET /v1/payments/pay_1', 'POST /v1/payments']);
    expect(requests[0]!.headers['idempotency-key']).toBe(requests[4]!.headers['idempotency-key']);
  });

  it('pages through a list until has_more is false', async () => {
    const { client, requests } = await scripted((request) => {
      const after = new URL(request.path, 'http://x').searchParams.get('starting_after');
      const data = after === null ? [{ id: 'pay_3' }, { id: 'pay_2' }] : after === 'pay_2' ? [{ id: 'pay_1' }] : [];
      return { status: 200, body: { object: 'list', data, has_more: after === null } };
    });
    const ids: string[] = [];
    for await (const p of client.payments.listAll({ limit: 2 })) ids.push(p.id);
    expect(ids).toEqual(['pay_3', 'pay_2', 'pay_1']);
    expect(requests.map((r) => r.path)).toEqual(['/v1/payments?limit=2', '/v1/payments?limit=2&starting_after=pay_2']);
  });
});

describe('backoff', () => {
  it('is full jitter under an exponential cap, and never below what the server asked', () => {
    const options = { baseDelayMs: 100, maxDelayMs: 1000 };
    expect(backoffMs(0, null, options, () => 0.999)).toBe(99);
    expect(backoffMs(3, null, options, () => 0.999)).toBe(799);
    expect(backoffMs(10, null, options, () => 0.999)).toBe(999);
    expect(backoffMs(10, null, options, () => 0)).toBe(0);
    expect(backoffMs(0, 3000, options, () => 0.5)).toBe(3000);
  });
});
