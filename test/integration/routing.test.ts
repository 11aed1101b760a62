import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listHealth, recordOutcome } from '../../db/routing';
import { createWorkerMetrics } from '../../lib/metrics';
import { showSharedHealth } from '../../worker/provider-health';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * A tenant's routing decides where its payments go, end to end: set with
 * PATCH /admin/tenants/{id}, read by the run's first charge attempt (domain/routing.ts
 * routeCandidates), and reordered by the worker's circuit breaker while a PSP fails
 * (the shared health, db/routing.ts routing_health). Two sandbox PSPs: `sandbox` (the default) and `sandbox-b`.
 */

let stack: TestStack;
const stateOf = async (provider: string) => (await listHealth(stack.sql)).find((row) => row.provider === provider)?.state ?? 'closed';
/** The elimination's time ends now (what 30 s of waiting would do): the PSP is half-open. */
const coolDownEnds = (provider: string) => stack.sql`UPDATE routing_health SET eliminated_until = now(), probe_until = NULL WHERE provider = ${provider}`;

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {}, api: { IDEMPOTENCY_WAIT_MS: 8000 } });
});
afterAll(async () => stack?.stop());

async function tenantWith(routing: unknown): Promise<{ tenant: Tenant; api: ReturnType<typeof apiClient> }> {
  const tenant = await stack.createTenant(uniqueKey('routing'));
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ routing }),
  });
  expect(response.status).toBe(200);
  return { tenant, api: apiClient(stack.apiUrl, tenant.apiKey) };
}

const pay = (api: ReturnType<typeof apiClient>, extra: Record<string, unknown> = {}) =>
  api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa', ...extra }, uniqueKey());

async function finalOf(api: ReturnType<typeof apiClient>, id: string) {
  return eventually(async () => {
    const { json } = await api.get(`/v1/payments/${id}`);
    return ['requires_action', 'processing'].includes(json.status) ? null : json;
  });
}

describe('a tenant\'s routing', () => {
  it('without routing, the first configured PSP takes the payment', async () => {
    const tenant = await stack.createTenant(uniqueKey('plain'));
    const paid = await pay(apiClient(stack.apiUrl, tenant.apiKey));
    expect(paid.status).toBe(201);
    expect(paid.json.provider).toBe('sandbox');
  });

  it('the first matching rule wins; otherwise the fallback order', async () => {
    const { api } = await tenantWith({
      fallback: ['sandbox', 'sandbox-b'],
      rules: [{ when: { currency: ['EUR'], amount_minor: { gte: 100_000 } }, fallback: ['sandbox-b', 'sandbox'] }],
    });
    const large = await pay(api, { amount_minor: 150_000 });
    expect(large.status).toBe(201);
    expect(large.json.provider).toBe('sandbox-b');
    const small = await pay(api, { amount_minor: 1_000 });
    expect(small.status).toBe(201);
    expect(small.json.provider).toBe('sandbox');
    // Each charge is where the payment says, and only there.
    expect(await stack.secondSandbox!.provider.listChargesByReference(large.json.id)).toHaveLength(1);
    expect(await stack.provider.listChargesByReference(large.json.id)).toHaveLength(0);
  });

  it('a split sends payments to both PSPs, each payment to one', async () => {
    const { api } = await tenantWith({ split: [{ provider: 'sandbox', weight: 50 }, { provider: 'sandbox-b', weight: 50 }] });
    const seen = new Set<string>();
    for (let i = 0; i < 12 && seen.size < 2; i++) {
      const paid = await pay(api);
      expect(paid.status).toBe(201);
      seen.add(paid.json.provider);
    }
    // 12 draws at 50/50 miss one side with probability 2 × 2^-12.
    expect([...seen].sort()).toEqual(['sandbox', 'sandbox-b']);
  });

  it('while the first PSP is out by the shared health, new payments start at the next one; once its probe succeeds, they go back', async () => {
    const { api } = await tenantWith({ fallback: ['sandbox', 'sandbox-b'] });
    // The earlier payments' answers count for it: errors (as any worker records them) until it is out.
    const segment = { network: 'visa', currency: 'EUR', methodType: 'card' };
    for (let i = 0; i < 50 && (await stateOf('sandbox')) !== 'open'; i++) await recordOutcome(stack.sql, { provider: 'sandbox', segment, outcome: 'error', firstAttempt: false });
    expect(await stateOf('sandbox')).toBe('open');
    // A worker's /metrics shows the shared state (read at the scrape).
    const metrics = createWorkerMetrics();
    await showSharedHealth(stack.sql, metrics, ['sandbox', 'sandbox-b']);
    const scraped = await metrics.registry.metrics();
    expect(scraped).toContain('provider_circuit_state{provider="sandbox"} 2');
    expect(scraped).toContain('provider_circuit_state{provider="sandbox-b"} 0');
    const moved = await pay(api);
    expect(moved.status).toBe(201);
    expect(moved.json.provider).toBe('sandbox-b');
    const { json: payment } = await api.get(`/v1/payments/${moved.json.id}`);
    expect(payment.provider).toBe('sandbox-b');
    expect(payment.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox-b', outcome: 'succeeded' }]);

    // The elimination ends: half-open, one probe payment goes to it, and its success closes it.
    await coolDownEnds('sandbox');
    expect(await stateOf('sandbox')).toBe('half_open');
    const probe = await pay(api);
    expect(probe.status).toBe(201);
    expect(probe.json.provider).toBe('sandbox');
    // The probe's outcome is counted without holding up the payment's answer.
    await eventually(async () => ((await stateOf('sandbox')) === 'closed' ? true : null), 10_000, 100, 'sandbox closed by its probe');
    expect((await finalOf(api, probe.json.id)).status).toBe('succeeded');
  });
});
