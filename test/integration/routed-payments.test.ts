import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * A tenant's routing decides where its payments go: the real stack with two sandbox PSPs
 * (`sandbox`, configured first, and `sandbox-b`), the first charge attempt's default planner
 * (activities/routing-decision.ts decideRoute), the routing set through the admin API. A PSP
 * out by the shared health is set in its row here (how it gets there:
 * test/integration/routing-health.test.ts).
 */

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {} });
}, 60_000);
afterAll(async () => stack?.stop());

async function tenantWith(routing: unknown): Promise<Tenant> {
  const tenant = await stack.createTenant('routed');
  if (routing !== null) {
    const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ routing }),
    });
    expect(response.status, await response.clone().text()).toBe(200);
  }
  return tenant;
}

async function pay(tenant: Tenant, currency = 'EUR', status = 201) {
  const api = apiClient(stack.apiUrl, tenant.apiKey);
  const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1200, currency, payment_method: 'pm_card_visa' }, uniqueKey('pay'));
  expect(created.status, created.text).toBe(status);
  // A 402 carries the declined payment in its error body.
  const id = created.json.id ?? created.json.error?.payment?.id;
  expect(id, created.text).toMatch(/^pay_/);
  const payment = (await api.get(`/v1/payments/${id}`)).json;
  // The memo's last upsert reaches Temporal with the workflow task that ran the outcome's local
  // activity, after the API's answer: read it once the run (automatic capture) has closed.
  const handle = stack.temporal.workflow.getHandle(payment.workflow_id);
  await handle.result();
  const memo = (await handle.describe()).memo as Record<string, unknown>;
  return { payment, memo };
}

async function chargesAt(paymentId: string) {
  return { sandbox: (await stack.provider.listChargesByReference(paymentId)).length, 'sandbox-b': (await stack.secondSandbox!.provider.listChargesByReference(paymentId)).length };
}

describe('payments follow their tenant routing', () => {
  it('no routing: the first configured PSP', async () => {
    const { payment, memo } = await pay(await tenantWith(null));
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    expect(memo.route).toEqual(['sandbox', 'sandbox-b']);
    expect(await chargesAt(payment.id)).toEqual({ sandbox: 1, 'sandbox-b': 0 });
  });

  it('a matching rule sends the payment to its list; another currency follows the fallback', async () => {
    const tenant = await tenantWith({ fallback: ['sandbox', 'sandbox-b'], rules: [{ when: { currency: ['USD'] }, fallback: ['sandbox-b'] }] });
    const usd = await pay(tenant, 'USD');
    expect(usd.payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(usd.memo.route).toEqual(['sandbox-b']);
    expect(await chargesAt(usd.payment.id)).toEqual({ sandbox: 0, 'sandbox-b': 1 });
    const eur = await pay(tenant, 'EUR');
    expect(eur.payment.provider).toBe('sandbox');
    expect(eur.memo.route).toEqual(['sandbox', 'sandbox-b']);
  });

  it('the split picks the first PSP (all weight on sandbox-b), the fallback orders the rest', async () => {
    const tenant = await tenantWith({ fallback: ['sandbox', 'sandbox-b'], split: [{ provider: 'sandbox', weight: 0 }, { provider: 'sandbox-b', weight: 1 }] });
    const { payment, memo } = await pay(tenant);
    expect(payment.provider).toBe('sandbox-b');
    expect(memo.route).toEqual(['sandbox-b', 'sandbox']);
  });

  it("a PSP out by the shared health is moved last for new payments, and back once it is in", async () => {
    const tenant = await tenantWith(null);
    await stack.sql`INSERT INTO routing_health (provider, calls, errors, eliminated_until, eliminated_reason) VALUES ('sandbox', 0, 0, now() + interval '1 hour', 'set by the test')
                    ON CONFLICT (provider) DO UPDATE SET eliminated_until = excluded.eliminated_until, eliminated_reason = excluded.eliminated_reason`;
    try {
      const { payment, memo } = await pay(tenant);
      expect(payment.provider).toBe('sandbox-b');
      expect(memo.route).toEqual(['sandbox-b', 'sandbox']);
    } finally {
      await stack.sql`DELETE FROM routing_health WHERE provider = 'sandbox'`;
    }
    expect((await pay(tenant)).payment.provider).toBe('sandbox');
  });

  it("the routing's retryable decline codes decide whether a decline moves on", async () => {
    const outage = async (mode: string) => {
      const response = await fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
      expect(response.status).toBe(200);
    };
    await outage('declining'); // sandbox declines every new charge with processing_error
    try {
      // By default processing_error moves on to sandbox-b…
      const moved = await pay(await tenantWith(null));
      expect(moved.payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
      // …not when the tenant's routing says no decline does.
      const kept = await pay(await tenantWith({ retryable_decline_codes: [] }), 'EUR', 402);
      expect(kept.payment).toMatchObject({ status: 'declined', provider: 'sandbox' });
      expect(kept.payment.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox', outcome: 'declined', error_code: 'processing_error' }]);
      expect(await chargesAt(kept.payment.id)).toEqual({ sandbox: 1, 'sandbox-b': 0 });
    } finally {
      await outage('none');
    }
  });
});
