import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCall, startStack, type Tenant, type TestStack } from '../helpers/stack';

/**
 * A tenant's routing (docs/CONTRACT.md "Routing"): set with PATCH /admin/tenants/{id},
 * read back with GET, refused with the reason (400) when it names an unconfigured provider or
 * is malformed, and then nothing changes. Real PostgreSQL, the API over HTTP.
 */

let stack: TestStack;
let tenant: Tenant;

const example = {
  fallback: ['sandbox-a', 'sandbox-b'],
  split: [
    { provider: 'sandbox-a', weight: 70 },
    { provider: 'sandbox-b', weight: 30 },
  ],
  rules: [{ when: { currency: ['EUR'], payment_method_prefix: 'pm_sepa', amount_minor: { gte: 0, lt: 100000 } }, fallback: ['sandbox-b'] }],
};

beforeAll(async () => {
  stack = await startStack({ worker: false, providerNames: ['sandbox-a', 'sandbox-b'] });
  tenant = await stack.createTenant('routing');
}, 60_000);
afterAll(async () => stack?.stop());

const admin = (method: string, path: string, body?: unknown, token = stack.adminToken) => adminCall(stack, method, path, body, token);

const stored = async () => (await stack.sql<{ routing: unknown; name: string }[]>`SELECT routing, name FROM tenants WHERE id = ${tenant.id}`)[0]!;

describe('GET /admin/tenants/{id}', () => {
  it('shows a tenant with no routing as null', async () => {
    const response = await admin('GET', `/admin/tenants/${tenant.id}`);
    expect(response.status, response.text).toBe(200);
    expect(response.json).toMatchObject({ id: tenant.id, object: 'tenant', name: 'routing', routing: null, rate_limits: { read_per_second: expect.any(Number) } });
    expect(response.json).not.toHaveProperty('webhook_secret');
  });

  it('404 for an unknown tenant, 401 without the admin token', async () => {
    expect((await admin('GET', '/admin/tenants/ten_01jd6w8b3m4x0c2q7yk5h9t1ve')).json).toMatchObject({ error: { type: 'not_found' } });
    expect((await admin('GET', `/admin/tenants/${tenant.id}`, undefined, tenant.apiKey)).status).toBe(401);
  });
});

describe('PATCH /admin/tenants/{id} with routing', () => {
  it("sets the issue's example and reads it back", async () => {
    const response = await admin('PATCH', `/admin/tenants/${tenant.id}`, { routing: example });
    expect(response.status, response.text).toBe(200);
    expect(response.json.routing).toEqual(example);
    expect((await admin('GET', `/admin/tenants/${tenant.id}`)).json.routing).toEqual(example);
    expect((await stored()).routing).toEqual(example);
  });

  it('leaves the routing alone when other fields change', async () => {
    const response = await admin('PATCH', `/admin/tenants/${tenant.id}`, { name: 'routing' });
    expect(response.status, response.text).toBe(200);
    expect(response.json.routing).toEqual(example);
  });

  const refused: [string, unknown, string, RegExp][] = [
    ['an unknown provider', { fallback: ['sandbox-a', 'stripe'] }, 'routing.fallback.1', /unknown provider "stripe": the configured providers are "sandbox-a", "sandbox-b"/],
    ['an unknown provider in a rule', { rules: [{ when: { currency: ['EUR'] }, fallback: ['sandbox-c'] }] }, 'routing.rules.0.fallback.0', /unknown provider "sandbox-c"/],
    ['a duplicate', { fallback: ['sandbox-a', 'sandbox-a'] }, 'routing.fallback.1', /provider "sandbox-a" is listed twice/],
    ['all weights zero', { split: [{ provider: 'sandbox-a', weight: 0 }, { provider: 'sandbox-b', weight: 0 }] }, 'routing.split', /split weights are all zero/],
    ['a fractional weight', { split: [{ provider: 'sandbox-a', weight: 1.5 }] }, 'routing.split.0.weight', /a weight is an integer/],
    ['an empty list', { fallback: [] }, 'routing.fallback', /at least one provider/],
    ['an empty range', { rules: [{ when: { amount_minor: { gte: 5000, lt: 5000 } }, fallback: ['sandbox-b'] }] }, 'routing.rules.0.when.amount_minor', /gte \(5000\) must be below lt \(5000\)/],
    ['an unknown key', { fallback: ['sandbox-a'], priority: 1 }, 'routing', /Unrecognized key: "priority"/],
    ['an empty configuration', {}, 'routing', /routing needs fallback, split, rules, retryable_decline_codes or strategy/],
    ['a card decline made retryable elsewhere', { retryable_decline_codes: ['card_declined'] }, 'routing.retryable_decline_codes.0', /never retried at another PSP/],
    ['a list instead of an object', ['sandbox-a'], 'routing', /./],
  ];
  for (const [what, routing, path, reason] of refused) {
    it(`refuses ${what}: 400 with the reason, and nothing changes`, async () => {
      const before = await stored();
      const response = await admin('PATCH', `/admin/tenants/${tenant.id}`, { name: 'renamed', routing });
      expect(response.status, response.text).toBe(400);
      expect(response.json.error.type).toBe('invalid_request');
      const issue = (response.json.error.issues as { path: string; message: string }[]).find((i) => i.path === path);
      expect(issue, response.text).toBeDefined();
      expect(issue!.message).toMatch(reason);
      expect(await stored()).toEqual(before);
    });
  }

  it("names the refused routing's reason in the error message itself for unknown providers", async () => {
    const response = await admin('PATCH', `/admin/tenants/${tenant.id}`, { routing: { fallback: ['adyen'] } });
    expect(response.json.error.message).toBe('routing refused: routing.fallback.0: unknown provider "adyen": the configured providers are "sandbox-a", "sandbox-b".');
  });

  it('null clears it', async () => {
    const response = await admin('PATCH', `/admin/tenants/${tenant.id}`, { routing: null });
    expect(response.status, response.text).toBe(200);
    expect(response.json.routing).toBeNull();
    expect((await stored()).routing).toBeNull();
    expect((await admin('GET', `/admin/tenants/${tenant.id}`)).json.routing).toBeNull();
  });

  it('is in the OpenAPI document: GET /admin/tenants/{id}, the routing in the request and the tenant', async () => {
    const doc = (await (await fetch(`${stack.apiUrl}/openapi.json`)).json()) as any;
    expect(doc.paths['/admin/tenants/{id}'].get).toBeDefined();
    expect(doc.components.schemas.Routing).toBeDefined();
    for (const schema of [doc.components.schemas.UpdateTenantRequest, doc.components.schemas.Tenant]) {
      expect(Object.keys(schema.properties.routing.properties ?? doc.components.schemas.Routing.properties)).toEqual(['fallback', 'split', 'rules', 'retryable_decline_codes', 'strategy', 'scope', 'objective', 'exploration', 'fees']);
    }
  });
});
