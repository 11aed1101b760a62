import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * A tenant whose routing decides by success rate, end to end on the real stack: its payment's
 * first charge step decides the route once over the shared counts (activities/routing-decision.ts
 * decideRoute), records the decision with the payment (GET shows it as `routing`; a retried
 * request answers the same), and the payment's first attempt is counted where the tenant's
 * scope says. A static tenant's payments carry no decision. Two sandbox PSPs.
 */

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {}, api: { IDEMPOTENCY_WAIT_MS: 8000 } });
});
afterAll(async () => stack?.stop());

async function tenantWith(routing: unknown): Promise<{ tenant: Tenant; api: ReturnType<typeof apiClient> }> {
  const tenant = await stack.createTenant(uniqueKey('success-rate'));
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ routing }),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return { tenant, api: apiClient(stack.apiUrl, tenant.apiKey) };
}

const body = () => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' });

describe('success-rate routing', () => {
  it('decides once, records the decision with the payment (candidates, probabilities adding to 1, chosen, explored, reason), and answers a retry the same', async () => {
    const { api } = await tenantWith({ strategy: 'success_rate', fallback: ['sandbox', 'sandbox-b'], scope: 'tenant' });
    const key = uniqueKey();
    const request = body();
    const paid = await api.post('/v1/payments', request, key);
    expect(paid.status, paid.text).toBe(201);
    const routing = paid.json.routing;
    expect(routing).toMatchObject({ strategy: 'success_rate', chosen: paid.json.provider, explored: expect.any(Boolean), reason: expect.any(String) });
    expect(routing.candidates.map((c: { provider: string }) => c.provider).sort()).toEqual(['sandbox', 'sandbox-b']);
    const total = routing.candidates.reduce((sum: number, c: { selection_probability: number }) => sum + c.selection_probability, 0);
    expect(total).toBeCloseTo(1, 6);
    for (const c of routing.candidates) expect(c.approval_estimate).toBeGreaterThan(0);
    // The decision is the payment's: GET and the retried request show the one recorded.
    expect((await api.get(`/v1/payments/${paid.json.id}`)).json.routing).toEqual(routing);
    expect((await api.post('/v1/payments', request, key)).json.routing).toEqual(routing);
    expect(paid.json.attempts?.[0]?.provider ?? paid.json.provider).toBe(routing.chosen);
  });

  it("counts the payment's first attempt in the tenant's own scope, where GET /admin/routing?tenant= reads it", async () => {
    const { tenant, api } = await tenantWith({ strategy: 'success_rate', fallback: ['sandbox', 'sandbox-b'], scope: 'tenant' });
    const paid = await api.post('/v1/payments', body(), uniqueKey());
    expect(paid.status, paid.text).toBe(201);
    const chosen = paid.json.routing.chosen as string;
    const counted = await eventually(async () => {
      const response = await fetch(`${stack.apiUrl}/admin/routing?tenant=${tenant.id}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      const json = (await response.json()) as { segments: { segment: string; providers: { provider: string; approvals: number; declines: number }[] }[] };
      const finest = json.segments.find((s) => s.segment === 'visa:EUR:card');
      return finest?.providers.find((p) => p.provider === chosen && p.approvals > 0) ?? null;
    }, 10_000, 100, "the first attempt counted in the tenant's scope");
    expect(counted).toMatchObject({ provider: chosen, approvals: 1, declines: 0 });
  });

  it('a static tenant’s payment carries no decision', async () => {
    const { api } = await tenantWith({ fallback: ['sandbox', 'sandbox-b'] });
    const paid = await api.post('/v1/payments', body(), uniqueKey());
    expect(paid.status, paid.text).toBe(201);
    expect(paid.json.routing).toBeUndefined();
    expect(paid.json.provider).toBe('sandbox');
  });
});
