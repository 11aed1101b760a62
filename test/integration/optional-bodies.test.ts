import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * Routes whose body is optional (docs/CONTRACT.md §3.4): no body, an empty body and `{}` are
 * the same request, the schema's defaults apply to each, and none of them is ever a 5xx.
 * The routes come from the OpenAPI document, so a new optional-body route is covered (or
 * this file fails until it is). E.g. the webhook secret rotation without a body must not
 * answer 500: the route validates `{}` like any body and never sends `undefined` to PostgreSQL.
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('optional-bodies');
});
afterAll(async () => stack?.stop());

type Variant = 'none' | 'empty json' | '{}' | 'empty, no type';
const variants: Variant[] = ['none', 'empty json', '{}', 'empty, no type'];

async function send(path: string, variant: Variant, token: string, key?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (key) headers['idempotency-key'] = key;
  let body: string | undefined;
  if (variant === 'empty json') {
    headers['content-type'] = 'application/json';
    body = '';
  } else if (variant === '{}') {
    headers['content-type'] = 'application/json';
    body = '{}';
  } else if (variant === 'empty, no type') {
    body = '';
  }
  const response = await fetch(`${stack.apiUrl}${path}`, { method: 'POST', headers, body });
  const text = await response.text();
  return { status: response.status, text, json: JSON.parse(text) };
}

async function manualPayment(): Promise<string> {
  const answer = await apiClient(stack.apiUrl, tenant.apiKey).post(
    '/v1/payments',
    { order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' },
    uniqueKey(),
  );
  expect(answer.json.status, answer.text).toBe('requires_capture');
  return answer.json.id as string;
}

/** A card saved for a new customer by a payment made with setup_future_usage: its pm_… id. */
async function savedMethod(): Promise<string> {
  const api = apiClient(stack.apiUrl, tenant.apiKey);
  const customer = await api.post('/v1/customers', { email: 'saved@example.com' }, uniqueKey());
  expect(customer.status, customer.text).toBe(201);
  const paid = await api.post(
    '/v1/payments',
    { order_id: uniqueKey('ord'), amount_minor: 900, currency: 'EUR', payment_method: 'pm_card_visa', customer: customer.json.id, setup_future_usage: 'off_session' },
    uniqueKey(),
  );
  expect(paid.status, paid.text).toBe(201);
  return eventually(async () => ((await api.get(`/v1/customers/${customer.json.id}/payment_methods`)).json.data[0]?.id as string | undefined) ?? null, 30_000);
}

async function anEvent(): Promise<string> {
  const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 700, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey());
  expect(paid.status, paid.text).toBe(201);
  return eventually(async () => {
    const [row] = await stack.sql<{ id: string }[]>`SELECT id FROM outbox_events WHERE tenant_id = ${tenant.id} AND payload->'data'->'object'->>'id' = ${paid.json.id as string} LIMIT 1`;
    return row?.id;
  });
}

/** Each optional-body route: how to make the path for one call, and what a success looks like. */
const routes: Record<string, { admin: boolean; path: () => Promise<string>; status: number; check?: (json: any) => void }> = {
  'POST /admin/tenants/{id}/webhook_secret/rotate': {
    admin: true,
    path: async () => `/admin/tenants/${tenant.id}/webhook_secret/rotate`,
    status: 200,
    check: (json) => {
      // The documented default overlap: 24 h.
      const overlap = Date.parse(json.previous_secret_valid_until) - Date.now();
      expect(overlap).toBeGreaterThan(24 * 3600_000 - 60_000);
      expect(overlap).toBeLessThanOrEqual(24 * 3600_000);
    },
  },
  'POST /admin/tenants/{id}/api_keys': { admin: true, path: async () => `/admin/tenants/${tenant.id}/api_keys`, status: 201, check: (json) => expect(json.api_key).toMatch(/^sk_/) },
  'POST /v1/payments/{id}/capture': {
    admin: false,
    path: async () => `/v1/payments/${await manualPayment()}/capture`,
    status: 200,
    check: (json) => expect(json).toMatchObject({ status: 'succeeded', amount_captured_minor: 1200 }),
  },
  'POST /v1/payments/{id}/cancel': { admin: false, path: async () => `/v1/payments/${await manualPayment()}/cancel`, status: 200, check: (json) => expect(json.status).toBe('canceled') },
  'POST /v1/payment_methods/{id}/detach': {
    admin: false,
    path: async () => `/v1/payment_methods/${await savedMethod()}/detach`,
    status: 200,
    check: (json) => expect(json).toMatchObject({ object: 'payment_method', detached_at: expect.any(String) }),
  },
  'POST /v1/events/{id}/resend': { admin: false, path: async () => `/v1/events/${await anEvent()}/resend`, status: 200, check: (json) => expect(json.object).toBe('event_delivery') },
};

describe('optional request bodies', () => {
  it('the OpenAPI document lists exactly the optional-body routes tested here', async () => {
    const doc = (await (await fetch(`${stack.apiUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, { requestBody?: { required?: boolean } }>> };
    const optional: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (operation.requestBody && !operation.requestBody.required) optional.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(optional.sort()).toEqual(Object.keys(routes).sort());
  });

  for (const [route, spec] of Object.entries(routes)) {
    for (const variant of variants) {
      it(`${route} with ${variant === 'none' ? 'no body' : variant === '{}' ? 'the body {}' : `an ${variant} body`}: ${spec.status}, the defaults applied`, async () => {
        const path = await spec.path();
        const answer = await send(path, variant, spec.admin ? ADMIN_TOKEN : tenant.apiKey, spec.admin ? undefined : uniqueKey());
        expect(answer.status, answer.text).toBe(spec.status);
        spec.check?.(answer.json);
      });
    }
  }

  it('a body of another type is 415 unsupported_media_type on every optional-body route, never a 5xx', async () => {
    for (const [route, spec] of Object.entries(routes)) {
      const path = await spec.path();
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx']) {
        const headers: Record<string, string> = { authorization: `Bearer ${spec.admin ? ADMIN_TOKEN : tenant.apiKey}`, 'content-type': type };
        if (!spec.admin) headers['idempotency-key'] = uniqueKey();
        const response = await fetch(`${stack.apiUrl}${path}`, { method: 'POST', headers, body: '{}' });
        expect(response.status, `${route} ${type}`).toBe(415);
        expect(((await response.json()) as any).error.type).toBe('unsupported_media_type');
      }
    }
  });

  it('a body that is not an object, or has an unknown field, is still a 400 with the field path', async () => {
    const path = `/admin/tenants/${tenant.id}/webhook_secret/rotate`;
    for (const body of ['[]', 'null', '"x"', '{"overlap_seconds":-1}', '{"overlap":5}']) {
      const response = await fetch(`${stack.apiUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body });
      expect(response.status, body).toBe(400);
      expect(((await response.json()) as any).error.type).toBe('invalid_request');
    }
  });

  it('the same Idempotency-Key with no body and with {} is one operation (same fingerprint): replayed, not 422', async () => {
    const path = `/v1/payments/${await manualPayment()}/cancel`;
    const key = uniqueKey();
    const first = await send(path, 'none', tenant.apiKey, key);
    expect(first.status, first.text).toBe(200);
    const again = await send(path, '{}', tenant.apiKey, key);
    expect(again.status, again.text).toBe(200);
    expect(again.text).toBe(first.text);
  });
});
