import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, apiClient, captureLogs, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * The edge's second line of checks, each test failing on the fault it names: the
 * failed-authentication limit allows no try too many under concurrency; dates PostgreSQL
 * cannot store are refused by validation (a 400 naming the field); the PSP's own error text
 * never reaches clients; bidi and other format characters are refused in identifiers.
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('second-pass');
});
afterAll(async () => stack?.stop());

const payment = (extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 900, currency: 'EUR', payment_method: 'pm_card_visa', ...extra });

describe('the failed-authentication limit under concurrency', () => {
  it('400 concurrent bad keys from one address: exactly 30 are answered 401, the other 370 are 429', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 30 });
    try {
      const statuses = await Promise.all(Array.from({ length: 400 }, (_, i) => apiClient(api.url, `sk_bad_${i}_${uniqueKey()}`).get('/v1/payments').then((a) => a.status)));
      const count = (status: number) => statuses.filter((s) => s === status).length;
      console.log(`400 concurrent bad keys: ${count(401)} × 401, ${count(429)} × 429`);
      expect(count(401)).toBe(30);
      expect(count(429)).toBe(370);
    } finally {
      await api.close();
    }
  });
});

describe('dates are validated into what PostgreSQL stores', () => {
  it('recover `since` outside timestamptz (year 0, a negative year, an impossible day) is 400 with the field path, and nothing runs', async () => {
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    for (const since of ['0000-01-01T00:00:00Z', '0001-01-01T00:00:00+01:00', '-000001-01-01T00:00:00Z', '2026-02-30T00:00:00Z', '+275760-09-13T00:00:01Z']) {
      const key = uniqueKey('since');
      const answer = await api.post('/v1/webhook_endpoint/recover', { since }, key);
      expect(answer.status, `${since}: ${answer.text}`).toBe(400);
      expect(answer.json.error.type).toBe('invalid_request');
      expect(answer.json.error.issues.map((i: { path: string }) => i.path), since).toEqual(['since']);
      const records = await stack.sql`SELECT 1 FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${key}`;
      expect(records).toHaveLength(0);
    }
    expect((await api.post('/v1/webhook_endpoint/recover', { since: '0001-01-01T00:00:00Z' }, uniqueKey())).status).toBe(200);
  });
});

describe("the PSP's own words stay in the logs", () => {
  it('a request the PSP refuses answers a stable code and message; the raw text is logged, not returned', async () => {
    const logs = captureLogs();
    try {
      // A method every PSP of the route takes (a SEPA debit), asked of the sandbox in a way it refuses
      // (saved for later charges: the sandbox saves only cards), so the request reaches the PSP.
      const client = apiClient(stack.apiUrl, tenant.apiKey);
      const customer = await client.post('/v1/customers', { email: 'words@example.com' }, uniqueKey());
      expect(customer.status, customer.text).toBe(201);
      const answer = await client.post('/v1/payments', payment({ payment_method: 'pm_sepa_debit', customer: customer.json.id, setup_future_usage: 'off_session' }), uniqueKey());
      const failure = answer.json.failure ?? answer.json.error?.payment?.failure;
      expect(failure, answer.text).toMatchObject({ code: 'provider_rejected' });
      // The payment names its PSP ("provider":"sandbox"); the PSP's own words never appear.
      expect(answer.text).not.toMatch(/sandbox[^"]|Only a card can be saved|\/v1\/charges/);
      expect(failure.message).toBe('The payment provider refused the request; nothing was charged or refunded.');
      const read = await client.get(`/v1/payments/${answer.json.id ?? answer.json.error.payment.id}`);
      expect(read.text).not.toMatch(/sandbox[^"]|Only a card can be saved/);
      expect(logs.text()).toMatch(/Only a card can be saved/);
    } finally {
      logs.stop();
    }
  });
});

describe('identifiers refuse bidi and other invisible format characters', () => {
  const invisible = ['\u202e', '\u202d', '\u2066', '\u200b', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u061c', '\u2028', '\u2029'];

  it('order_id (create and the list filter), tenant names (create and patch): 400 with the field path, nothing stored', async () => {
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
    for (const char of invisible) {
      const label = `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
      const orderId = `order-${char}1001`;
      const created = await api.post('/v1/payments', payment({ order_id: orderId }), uniqueKey());
      expect(created.status, `${label} ${created.text}`).toBe(400);
      expect(created.json.error.issues.map((i: { path: string }) => i.path)).toEqual(['order_id']);
      const listed = await api.get(`/v1/payments?order_id=${encodeURIComponent(orderId)}`);
      expect(listed.status, label).toBe(400);
      const named = await admin.request('POST', '/admin/tenants', { body: { name: `Acme${char}Shop` } });
      expect(named.status, label).toBe(400);
      expect(named.json.error.issues.map((i: { path: string }) => i.path)).toEqual(['name']);
      const renamed = await admin.request('PATCH', `/admin/tenants/${tenant.id}`, { body: { name: `gnp.exe${char}` } });
      expect(renamed.status, label).toBe(400);
    }
    const [stored] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM payments WHERE order_id ~ '[\u202a-\u202e\u2066-\u2069\u200b-\u200f]'`;
    expect(stored!.n).toBe(0);
  });

  it('visible text stays welcome: accents, scripts, emoji without joiners', async () => {
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    for (const orderId of ['commande-été-1', 'заказ-7', '注文-42', 'طلب-9', 'order-🎉']) {
      const created = await api.post('/v1/payments', payment({ order_id: `${orderId}-${uniqueKey()}` }), uniqueKey());
      expect(created.status, `${orderId}: ${created.text}`).toBe(201);
    }
  });
});
