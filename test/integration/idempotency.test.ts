import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { apiClient, isolatedApi, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { chargesAtProvider, effectsOf, expectLedgerConsistent } from '../helpers/effects';
import { testDataConverter } from '../../testkit/payload-keys';

/** The idempotency contract (docs/CONTRACT.md §3.1), on the real dev server and real PostgreSQL. */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant();
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => {
  await expectLedgerConsistent(stack.sql);
  await stack?.stop();
});

const paymentBody = (overrides: Record<string, unknown> = {}) => ({
  order_id: uniqueKey('ord'),
  amount_minor: 4999,
  currency: 'EUR',
  payment_method: 'pm_card_visa',
  ...overrides,
});

describe('a repeated request replays the first final response', () => {
  it('returns the same status and the same bytes, marked Idempotent-Replayed, and charges once', async () => {
    const key = uniqueKey();
    const body = paymentBody({ metadata: { cart: 'c_1', note: 'ünïcødé ✓' }, description: 'two mugs' });
    const first = await api.post('/v1/payments', body, key);
    expect(first.status).toBe(201);
    expect(first.json.status).toBe('succeeded');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('location')).toBe(`/v1/payments/${first.json.id}`);
    expect(Number(first.headers.get('idempotency-retention-seconds'))).toBeGreaterThanOrEqual(72 * 3600);

    for (let i = 0; i < 3; i++) {
      const again = await api.post('/v1/payments', body, key);
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
    }
    expect(await effectsOf(stack.sql, stack.sandboxUrl, first.json.id)).toEqual({
      charges: 1,
      ledgerTransactions: 1,
      events: { 'payment.succeeded': 1 },
    });
  });

  it('treats reordered keys and other whitespace as the same request (canonical fingerprint)', async () => {
    const key = uniqueKey();
    const first = await api.request('POST', '/v1/payments', {
      key,
      rawBody: `{"order_id":"${uniqueKey('ord')}","amount_minor":1000,"currency":"EUR","payment_method":"pm_card_visa","metadata":{"a":"1","b":"2"}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(first.status).toBe(201);
    const reordered = `{ "metadata": {"b":"2", "a":"1"}, "payment_method": "pm_card_visa",\n "currency": "EUR", "amount_minor": 1000.0, "order_id": "${first.json.order_id}" }`;
    const again = await api.request('POST', '/v1/payments', { key, rawBody: reordered, headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
  });

  it('serves a finished operation from PostgreSQL alone, with Temporal unreachable', async () => {
    const key = uniqueKey();
    const body = paymentBody();
    const first = await api.post('/v1/payments', body, key);
    expect(first.status).toBe(201);

    // A second API process sharing the database, whose Temporal address answers nothing.
    const isolated = await isolatedApi(stack, new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }), dataConverter: testDataConverter }), {
      TEMPORAL_RPC_TIMEOUT_MS: 1000,
    });
    try {
      const isolatedClient = apiClient(isolated.url, tenant.apiKey);
      const replay = await isolatedClient.post('/v1/payments', body, key);
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      // ...while a new operation through that process fails closed.
      expect((await isolatedClient.post('/v1/payments', paymentBody(), uniqueKey())).status).toBe(503);
    } finally {
      await isolated.close();
    }
  });
});

describe('a byte-identical retry is matched by its bytes, before its body is parsed (db/migrations/011)', () => {
  const recordOf = async (key: string) =>
    (
      await stack.sql<{ fingerprint: string; request_hash: string | null; state: string; response_body: string | null }[]>`
        SELECT fingerprint, request_hash, state, response_body FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`
    )[0]!;
  const postRaw = (key: string, rawBody: string, client = api) =>
    client.request('POST', '/v1/payments', { key, rawBody, headers: { 'content-type': 'application/json' } });
  const rawPayment = (orderId: string) => `{"order_id":"${orderId}","amount_minor":1200,"currency":"EUR","payment_method":"pm_card_visa","metadata":{"a":"1","b":"2"}}`;
  const reorderedPayment = (orderId: string) =>
    `{ "metadata": {"b":"2", "a":"1"}, "payment_method": "pm_card_visa", "currency": "EUR", "amount_minor": 1200.0, "order_id": "${orderId}" }`;
  /** A new payment sent as raw bytes, answered 201. */
  const firstPayment = async () => {
    const key = uniqueKey();
    const orderId = uniqueKey('ord');
    const first = await postRaw(key, rawPayment(orderId));
    expect(first.status).toBe(201);
    return { key, orderId, first };
  };
  /** What a replay answers besides its body, without the per-request headers. */
  const answerHeaders = (headers: Headers) => [...headers.entries()].filter(([name]) => !['date', 'x-request-id', 'ratelimit'].includes(name));

  it('answers it from the stored response with the headers of a fingerprint-matched replay, whatever the fingerprint now says', async () => {
    const { key, orderId, first } = await firstPayment();
    const claimed = await recordOf(key);
    expect(claimed.request_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(claimed.request_hash).not.toBe(claimed.fingerprint);

    // An equivalent body in other bytes is decided by the fingerprint, as before.
    const byFingerprint = await postRaw(key, reorderedPayment(orderId));
    expect(byFingerprint.status).toBe(201);
    expect(byFingerprint.text).toBe(first.text);
    expect(byFingerprint.headers.get('idempotent-replayed')).toBe('true');

    // Which path answers: with the stored fingerprint spoiled, the byte-identical retry still
    // replays (matched by its bytes alone, never parsed) while the reordered body no longer does.
    // Spoiled only once the run has closed: a step of the run repeated on a loaded machine
    // checks the fingerprint when it records the answer again, and would retry for good.
    await stack.temporal.workflow.getHandle(first.json.workflow_id).result();
    await stack.sql`UPDATE idempotency_records SET fingerprint = ${'0'.repeat(64)} WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    const byBytes = await postRaw(key, rawPayment(orderId));
    expect(byBytes.status).toBe(201);
    expect(byBytes.text).toBe(first.text);
    expect(answerHeaders(byBytes.headers)).toEqual(answerHeaders(byFingerprint.headers));
    expect((await postRaw(key, reorderedPayment(orderId))).status).toBe(422);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, first.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  });

  it('keeps the first bytes\' hash through an equivalent retry and a refused different body', async () => {
    const { key, orderId, first } = await firstPayment();
    const claimed = await recordOf(key);
    expect((await postRaw(key, reorderedPayment(orderId))).text).toBe(first.text);
    const other = await postRaw(key, rawPayment(orderId).replace('1200', '1300'));
    expect(other.status).toBe(422);
    expect(other.json.error.type).toBe('idempotency_key_reused');
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    expect(await recordOf(key)).toEqual(claimed);
    expect((await postRaw(key, rawPayment(orderId))).text).toBe(first.text);
  });

  it('replays a key claimed before the hash was stored through its fingerprint, and leaves it without one', async () => {
    const { key, orderId, first } = await firstPayment();
    await stack.sql`UPDATE idempotency_records SET request_hash = NULL WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    for (const raw of [rawPayment(orderId), reorderedPayment(orderId)]) {
      const again = await postRaw(key, raw);
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    }
    expect((await postRaw(key, rawPayment(orderId).replace('1200', '1300'))).status).toBe(422);
    expect((await recordOf(key)).request_hash).toBeNull();
  });

  it('never answers a stored response to a request that fails authentication, nor to another tenant', async () => {
    const { key, orderId, first } = await firstPayment();
    const stranger = await postRaw(key, rawPayment(orderId), apiClient(stack.apiUrl, 'sk_not_a_key'));
    expect(stranger.status).toBe(401);
    expect(stranger.text).not.toBe(first.text);
    expect(stranger.headers.get('idempotent-replayed')).toBeNull();
    // Another tenant's same key and same bytes are its own operation (the order id is per tenant).
    const other = await stack.createTenant('byte-identical other tenant');
    const theirs = await postRaw(key, rawPayment(orderId), apiClient(stack.apiUrl, other.apiKey));
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.json.id).not.toBe(first.json.id);
  });
});

describe('after a key has expired', () => {
  it('answers from the closed run while Temporal still has it: the original bytes, replayed, nothing charged again', async () => {
    const key = uniqueKey();
    const body = paymentBody();
    const first = await api.post('/v1/payments', body, key);
    expect(first.status).toBe(201);
    // The first response is recorded (and answered) just before the run closes; a key expires
    // 72 h later, when the run is long closed. Wait for that, or under load the late request
    // can still attach to the run in its last milliseconds and wait for a record it never makes.
    await stack.temporal.workflow.getHandle(first.json.workflow_id).result();
    // The retention job deleted the record (the window passed); the run's history remains.
    await stack.sql`DELETE FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    const late = await api.post('/v1/payments', body, key);
    expect(late.status).toBe(201);
    expect(late.text).toBe(first.text);
    expect(late.headers.get('idempotent-replayed')).toBe('true');
    expect(await chargesAtProvider(stack.sandboxUrl, first.json.id)).toHaveLength(1);
    // A different request under the expired key is still told apart (the run's memo keeps the fingerprint).
    await stack.sql`DELETE FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
    const other = await api.post('/v1/payments', { ...body, amount_minor: 1 }, key);
    expect(other.status).toBe(422);
  });
});

describe('a reused key with a different request is refused', () => {
  it('answers 422 idempotency_key_reused and executes nothing', async () => {
    const key = uniqueKey();
    const original = paymentBody();
    const first = await api.post('/v1/payments', original, key);
    expect(first.status).toBe(201);
    const otherOrder = uniqueKey('ord');
    for (const changed of [{ ...original, order_id: otherOrder }, { ...original, amount_minor: 1 }, { ...original, metadata: { x: 'y' } }]) {
      const reused = await api.post('/v1/payments', changed, key);
      expect(reused.status).toBe(422);
      expect(reused.json.error.type).toBe('idempotency_key_reused');
      expect(reused.headers.get('idempotent-replayed')).toBeNull();
    }
    const { n } = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id = ${otherOrder}`)[0]!;
    expect(n).toBe(0);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, first.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
    // The original request still replays its own response.
    const replay = await api.post('/v1/payments', original, key);
    expect(replay.text).toBe(first.text);
  });

  it('refuses concurrent requests that race with one key and different bodies: one runs, the rest get 422', async () => {
    const key = uniqueKey();
    const bodies = Array.from({ length: 8 }, () => paymentBody());
    const results = await Promise.all(bodies.map((body) => api.post('/v1/payments', body, key)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 422)).toHaveLength(7);
    const orders = bodies.map((b) => b.order_id);
    const { n } = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id IN ${stack.sql(orders)}`)[0]!;
    expect(n).toBe(1);
  });
});

describe('keys are scoped to the tenant and the route', () => {
  it('runs the same key for two tenants as two payments, each invisible to the other', async () => {
    const other = await stack.createTenant('other tenant');
    const otherApi = apiClient(stack.apiUrl, other.apiKey);
    const key = uniqueKey();
    const body = paymentBody();
    const mine = await api.post('/v1/payments', body, key);
    const theirs = await otherApi.post('/v1/payments', body, key);
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.json.id).not.toBe(mine.json.id);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.json.workflow_id).not.toBe(mine.json.workflow_id);
    expect((await otherApi.get(`/v1/payments/${mine.json.id}`)).status).toBe(404);
    expect((await api.get(`/v1/payments/${theirs.json.id}`)).status).toBe(404);
    expect((await otherApi.get(`/v1/payments?order_id=${body.order_id}`)).json.data.map((p: { id: string }) => p.id)).toEqual([theirs.json.id]);
  });

  it('treats the same key on another route as another operation', async () => {
    const key = uniqueKey();
    const payment = await api.post('/v1/payments', paymentBody(), key);
    expect(payment.status).toBe(201);
    const refund = await api.post(`/v1/payments/${payment.json.id}/refunds`, { amount_minor: 100 }, key);
    expect(refund.status).toBe(201);
    expect(refund.json.object).toBe('refund');
  });
});

describe('a duplicate storm produces one payment', () => {
  it('50 concurrent identical requests: one payment, one charge, one ledger transaction, one event', async () => {
    const key = uniqueKey();
    const body = paymentBody({ payment_method: 'pm_card_slow' });
    const responses = await Promise.all(Array.from({ length: 50 }, () => api.post('/v1/payments', body, key)));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(201));
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    const paymentId = responses[0]!.json.id;
    const { n } = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id = ${body.order_id}`)[0]!;
    expect(n).toBe(1);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, paymentId)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
    const executions = stack.temporal.workflow.list({ query: `WorkflowId = '${responses[0]!.json.workflow_id}'` });
    let runs = 0;
    for await (const _ of executions) runs++;
    expect(runs).toBe(1);
  });
});

describe('the order guard holds whatever the key', () => {
  it('refuses a second payment for a paid order with 409 order_already_paid and no charge', async () => {
    const body = paymentBody();
    const paid = await api.post('/v1/payments', body, uniqueKey());
    expect(paid.status).toBe(201);
    const key = uniqueKey();
    const second = await api.post('/v1/payments', { ...body, amount_minor: 123 }, key);
    expect(second.status).toBe(409);
    expect(second.json.error).toMatchObject({ type: 'order_already_paid', payment_id: paid.json.id });
    // The refused operation's payment id never reached the provider, and its replay is the same 409.
    const [record] = await stack.sql<{ resource_id: string }[]>`SELECT resource_id FROM idempotency_records WHERE idempotency_key = ${key}`;
    expect(await chargesAtProvider(stack.sandboxUrl, record!.resource_id)).toHaveLength(0);
    const replay = await api.post('/v1/payments', { ...body, amount_minor: 123 }, key);
    expect(replay.status).toBe(409);
    expect(replay.text).toBe(second.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

  it('lets a declined order be paid with a new key', async () => {
    const body = paymentBody({ payment_method: 'pm_card_declined' });
    const declined = await api.post('/v1/payments', body, uniqueKey());
    expect(declined.status).toBe(402);
    const retried = await api.post('/v1/payments', { ...body, payment_method: 'pm_card_visa' }, uniqueKey());
    expect(retried.status).toBe(201);
    expect(retried.json.status).toBe('succeeded');
  });

  it('lets exactly one of many concurrent keys for one order be charged', async () => {
    const body = paymentBody({ payment_method: 'pm_card_slow' });
    const responses = await Promise.all(Array.from({ length: 6 }, () => api.post('/v1/payments', body, uniqueKey())));
    expect(responses.filter((r) => r.status === 201)).toHaveLength(1);
    expect(responses.filter((r) => r.status === 409)).toHaveLength(5);
    const { n } = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id = ${body.order_id}`)[0]!;
    expect(n).toBe(1);
  });
});

describe('a decline is a definitive outcome', () => {
  it('answers 402 card_declined with the declined payment, and replays the same 402', async () => {
    for (const [method, code] of [['pm_card_declined', 'card_declined'], ['pm_card_insufficient_funds', 'insufficient_funds']] as const) {
      const key = uniqueKey();
      const body = paymentBody({ payment_method: method });
      const first = await api.post('/v1/payments', body, key);
      expect(first.status).toBe(402);
      expect(first.json.error.type).toBe('card_declined');
      expect(first.json.error.decline_code).toBe(code);
      expect(first.json.error.payment).toMatchObject({ status: 'declined', failure: { code } });
      const replay = await api.post('/v1/payments', body, key);
      expect(replay.status).toBe(402);
      expect(replay.text).toBe(first.text);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await effectsOf(stack.sql, stack.sandboxUrl, first.json.error.payment.id)).toEqual({ charges: 1, ledgerTransactions: 0, events: { 'payment.declined': 1 } });
    }
  });
});

describe('the provider failing in the middle resolves to one charge', () => {
  it('lost response (provider commits, never answers): the retry looks the charge up, exactly one charge', async () => {
    const response = await api.post('/v1/payments', paymentBody({ payment_method: 'pm_card_timeout_after_charge' }), uniqueKey());
    expect(response.status).toBe(201);
    expect(response.json.status).toBe('succeeded');
    expect(await effectsOf(stack.sql, stack.sandboxUrl, response.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  });

  it('flaky provider (503 on the first attempts): retried with the same sub-key, one charge', async () => {
    const response = await api.post('/v1/payments', paymentBody({ payment_method: 'pm_card_flaky' }), uniqueKey());
    expect(response.status).toBe(201);
    expect((await chargesAtProvider(stack.sandboxUrl, response.json.id)).length).toBe(1);
  });
});

describe('reads are scoped and paginated', () => {
  it('lists payments newest first with a cursor, and shows balances and events', async () => {
    const reader = await stack.createTenant('reader');
    const readerApi = apiClient(stack.apiUrl, reader.apiKey);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await readerApi.post('/v1/payments', paymentBody({ amount_minor: 100 * (i + 1) }), uniqueKey())).json.id);
    const page1 = await readerApi.get('/v1/payments?limit=2');
    expect(page1.json.data.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    expect(page1.json.has_more).toBe(true);
    const page2 = await readerApi.get(`/v1/payments?limit=2&starting_after=${ids[1]}`);
    expect(page2.json.data.map((p: { id: string }) => p.id)).toEqual([ids[0]]);
    expect(page2.json.has_more).toBe(false);
    const balance = await readerApi.get('/v1/balance');
    expect(balance.json.accounts).toEqual([
      { account: 'merchant_balance', currency: 'EUR', balance_minor: 600 },
      { account: 'provider_receivable', currency: 'EUR', balance_minor: 600 },
    ]);
    const events = await readerApi.get('/v1/events?type=payment.succeeded&limit=10');
    expect(events.json.data.map((e: { data: { object: { id: string } } }) => e.data.object.id)).toEqual([ids[2], ids[1], ids[0]]);
    const older = await readerApi.get(`/v1/events?limit=1&starting_after=${events.json.data[0].id}`);
    expect(older.json.data[0].id).toBe(events.json.data[1].id);
  });
});

describe('a duplicate that arrives while the first is running waits, boundedly', () => {
  let slowStack: TestStack;
  beforeAll(async () => {
    slowStack = await startStack({ api: { IDEMPOTENCY_WAIT_MS: 300 }, sandbox: { slowMs: 2500 } });
  });
  afterAll(async () => slowStack?.stop());

  it('answers 202 with Location, Retry-After and the processing payment, then the stored response once known', async () => {
    const slowTenant = await slowStack.createTenant();
    const slowApi = apiClient(slowStack.apiUrl, slowTenant.apiKey);
    const key = uniqueKey();
    const body = paymentBody({ payment_method: 'pm_card_slow' });
    const [first, duplicate] = await Promise.all([slowApi.post('/v1/payments', body, key), slowApi.post('/v1/payments', body, key)]);
    for (const pending of [first, duplicate]) {
      expect(pending.status).toBe(202);
      expect(pending.json).toMatchObject({ object: 'payment', status: 'processing', order_id: body.order_id });
      expect(pending.headers.get('location')).toBe(`/v1/payments/${pending.json.id}`);
      expect(pending.headers.get('retry-after')).toBe('1');
    }
    expect(duplicate.json.id).toBe(first.json.id);
    // The claim stored its bytes' hash; a byte-identical retry of a running operation still waits.
    const [claimed] = await slowStack.sql<{ request_hash: string | null; state: string }[]>`SELECT request_hash, state FROM idempotency_records WHERE idempotency_key = ${key}`;
    expect(claimed!.request_hash).toMatch(/^[0-9a-f]{64}$/);
    // 202 is never stored: a later retry gets the final response.
    let final = await slowApi.post('/v1/payments', body, key);
    for (let i = 0; final.status === 202 && i < 30; i++) {
      await new Promise((r) => setTimeout(r, 300));
      final = await slowApi.post('/v1/payments', body, key);
    }
    expect(final.status).toBe(201);
    expect(final.json.id).toBe(first.json.id);
    expect(final.headers.get('idempotent-replayed')).toBe('true');
    expect(await chargesAtProvider(slowStack.sandboxUrl, first.json.id)).toHaveLength(1);
  });
});
