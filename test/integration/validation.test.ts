import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { apiClient, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/** Bad input always gets a clear 4xx in the contract's error shape (docs/CONTRACT.md §3), and changes nothing. */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('validation');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => stack?.stop());

const valid = () => ({ order_id: uniqueKey('ord'), amount_minor: 1000, currency: 'EUR', payment_method: 'pm_card_visa' });

function expectError(response: { status: number; json: any; text: string }, status: number, type: string) {
  expect(response.status, response.text).toBe(status);
  expect(response.json).toMatchObject({ error: { type, message: expect.any(String) } });
  expect(response.text).not.toMatch(/at .+\.(ts|js):\d+/); // never a stack trace
}

async function nothingCreated() {
  const [counts] = await stack.sql<{ payments: number; records: number }[]>`
    SELECT (SELECT count(*)::int FROM payments WHERE tenant_id = ${tenant.id}) AS payments,
           (SELECT count(*)::int FROM idempotency_records WHERE tenant_id = ${tenant.id}) AS records`;
  expect(counts).toEqual({ payments: 0, records: 0 });
}

describe('the request body is validated before anything runs', () => {
  const cases: [string, Record<string, unknown>][] = [
    ['amount as a string', { amount_minor: '1000' }],
    ['negative amount', { amount_minor: -5 }],
    ['zero amount', { amount_minor: 0 }],
    ['fractional amount', { amount_minor: 10.5 }],
    ['huge amount', { amount_minor: 1e12 }],
    ['amount beyond 2^53', { amount_minor: 9007199254740993 }],
    ['missing amount', { amount_minor: undefined }],
    ['unknown currency', { currency: 'XYZ' }],
    ['lower-case currency', { currency: 'eur' }],
    ['four-letter currency', { currency: 'EURO' }],
    ['currency as a number', { currency: 978 }],
    ['malformed payment method', { payment_method: 'card 4242' }],
    ['empty order id', { order_id: '' }],
    ['order id with a control character', { order_id: 'ord\u0000x' }],
    ['unknown field', { amount: 1000 }],
    ['bad capture method', { capture_method: 'later' }],
    ['metadata not strings', { metadata: { a: 1 } }],
    ['too many metadata keys', { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }],
    ['description not a string', { description: 42 }],
  ];
  for (const [name, change] of cases) {
    it(`400 invalid_request: ${name}`, async () => {
      const response = await api.post('/v1/payments', { ...valid(), ...change }, uniqueKey());
      expectError(response, 400, 'invalid_request');
      expect(response.json.error.issues.length).toBeGreaterThan(0);
    });
  }

  it('400 for a body that is JSON but not an object', async () => {
    for (const raw of ['[]', '"pay"', '42', 'null']) {
      const response = await api.request('POST', '/v1/payments', { key: uniqueKey(), rawBody: raw, headers: { 'content-type': 'application/json' } });
      expectError(response, 400, 'invalid_request');
    }
  });

  it('400 for malformed JSON', async () => {
    const response = await api.request('POST', '/v1/payments', { key: uniqueKey(), rawBody: '{"order_id": "x",', headers: { 'content-type': 'application/json' } });
    expectError(response, 400, 'invalid_request');
  });

  it('415 for a body that is not JSON', async () => {
    const response = await api.request('POST', '/v1/payments', { key: uniqueKey(), rawBody: 'order_id=x&amount_minor=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expectError(response, 415, 'unsupported_media_type');
  });

  it('413 for an oversized body', async () => {
    const response = await api.request('POST', '/v1/payments', {
      key: uniqueKey(),
      rawBody: JSON.stringify({ ...valid(), description: 'x'.repeat(100_000) }),
      headers: { 'content-type': 'application/json' },
    });
    expectError(response, 413, 'payload_too_large');
  });
});

describe('the Idempotency-Key header is required and well-formed', () => {
  it('400 idempotency_key_missing without it', async () => {
    expectError(await api.request('POST', '/v1/payments', { body: valid() }), 400, 'idempotency_key_missing');
  });
  for (const [name, key] of [
    ['too short', 'abc'],
    ['too long', 'k'.repeat(256)],
    ['with a space', 'has a space'],
    ['non-ASCII', 'cl\u00e9-\u00fcn\u00efc\u00f8d\u00e9-1234'],
  ] as const) {
    it(`400 idempotency_key_invalid: ${name}`, async () => {
      // node:http sends the header bytes as given (latin1), unlike fetch, which refuses non-ASCII.
      const { status, body } = await rawPost(`${stack.apiUrl}/v1/payments`, {
        authorization: `Bearer ${tenant.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      }, JSON.stringify(valid()));
      expect(status).toBe(400);
      expect(JSON.parse(body).error.type).toBe('idempotency_key_invalid');
    });
  }
});

function rawPost(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('authentication and tenant scope', () => {
  it('401 without an API key, with a wrong one, and with a malformed header', async () => {
    for (const authorization of [undefined, 'Bearer sk_wrong', 'Basic abc', 'Bearer']) {
      const response = await fetch(`${stack.apiUrl}/v1/payments`, { headers: authorization ? { authorization } : {} });
      expect(response.status).toBe(401);
      expect(((await response.json()) as any).error.type).toBe('unauthorized');
    }
  });

  it('401 on admin endpoints without the admin token, even with a tenant key', async () => {
    const response = await fetch(`${stack.apiUrl}/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'x' }),
    });
    expect(response.status).toBe(401);
  });

  it('404 for junk and unknown ids, on reads and writes alike', async () => {
    for (const id of ['junk', 'pay_', 'pay_0000000000000000000000000z', "pay_' OR 1=1 --", '..%2F..%2Fetc']) {
      expectError(await api.get(`/v1/payments/${encodeURIComponent(id)}`), 404, 'not_found');
      expectError(await api.post(`/v1/payments/${encodeURIComponent(id)}/refunds`, { amount_minor: 1 }, uniqueKey()), 404, 'not_found');
      expectError(await api.post(`/v1/payments/${encodeURIComponent(id)}/capture`, {}, uniqueKey()), 404, 'not_found');
    }
    expectError(await api.get('/v1/refunds/re_nope'), 404, 'not_found');
    expectError(await api.get('/v1/nothing-here'), 404, 'not_found');
  });

  it('400 for bad list parameters', async () => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'bogus=1', 'type=payment.exploded']) {
      const path = query.startsWith('type') ? `/v1/events?${query}` : `/v1/payments?${query}`;
      expectError(await api.get(path), 400, 'invalid_request');
    }
  });

  it('400 for a bad admin request, 404 for an unknown tenant', async () => {
    const admin = (method: string, path: string, body: unknown) =>
      fetch(`${stack.apiUrl}${path}`, { method, headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await admin('POST', '/admin/tenants', { name: '' })).status).toBe(400);
    expect((await admin('PATCH', `/admin/tenants/${tenant.id}`, { webhook_url: 'ftp://example.com' })).status).toBe(400);
    expect((await admin('PATCH', '/admin/tenants/ten_missing', { webhook_url: 'https://example.com/h' })).status).toBe(404);
  });
});

describe('none of the above changed anything', () => {
  it('left no payment and no idempotency record behind', async () => {
    await nothingCreated();
  });
});
