import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { freePort } from '../../devstack/ports';
import { SandboxProvider } from '../../provider/sandbox-client';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * Failover across two PSPs (issue 22), end to end through the API against the real stack:
 * Temporal, PostgreSQL, the worker and TWO sandbox PSPs (`sandbox`, the default, and
 * `sandbox-b`, each with its own database). The route tries `sandbox` first, then `sandbox-b`
 * (one tenant's route starts at `dead`, a PSP nobody listens at). docs/CONTRACT.md
 * "Providers, routing and failover": the payment moves to the next PSP only when the last one
 * certainly took no money; while its outcome is unknown it keeps asking that one.
 */

let stack: TestStack;
let tenant: Tenant;
let deadTenant: Tenant;
let api: ReturnType<typeof apiClient>;
const routes = new Map<string, string[]>();
const route: RoutePlanner = async (request) => {
  const providers = routes.get(request.tenantId) ?? ['sandbox', 'sandbox-b'];
  return { providers, reason: `test route: ${providers.join(' then ')}` };
};

beforeAll(async () => {
  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  stack = await startStack({
    secondSandbox: {},
    route,
    extraProviders: { dead: new SandboxProvider({ baseUrl: deadUrl, timeoutMs: 1500 }) },
    // A payment whose outcome is unknown answers 202 after this (it stays processing).
    api: { IDEMPOTENCY_WAIT_MS: 3000 },
  });
  tenant = await stack.createTenant('failover');
  deadTenant = await stack.createTenant('failover-dead');
  routes.set(deadTenant.id, ['dead', 'sandbox-b']);
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterEach(async () => {
  await outage(stack.sandboxUrl, 'none');
  await expectLedgerConsistent(stack.sql);
});
afterAll(async () => stack?.stop());

async function outage(url: string, mode: 'none' | 'unavailable' | 'down' | 'timeout' | 'declining') {
  const response = await fetch(`${url}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}
const body = (payment_method = 'pm_card_visa', extra: Record<string, unknown> = {}) => ({
  order_id: uniqueKey('ord'),
  amount_minor: 2500,
  currency: 'EUR',
  payment_method,
  ...extra,
});
/** The charges each PSP holds for the payment (its reference). */
async function chargesAt(paymentId: string) {
  return {
    a: await stack.provider.listChargesByReference(paymentId),
    b: await stack.secondSandbox!.provider.listChargesByReference(paymentId),
  };
}
async function settled(id: string, client = api, timeoutMs = 30_000) {
  return eventually(async () => {
    const { json } = await client.get(`/v1/payments/${id}`);
    return ['requires_action', 'processing'].includes(json.status) ? null : json;
  }, timeoutMs);
}
async function memoOf(workflowId: string) {
  return (await stack.temporal.workflow.getHandle(workflowId).describe()).memo as Record<string, unknown>;
}

describe('failover: the next PSP only when the last one certainly took no money', () => {
  it('a plain payment: one attempt at the default PSP; GET shows provider and attempts', async () => {
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    const got = await api.get(`/v1/payments/${created.json.id}`);
    expect(got.json).toMatchObject({
      provider: 'sandbox',
      attempts: [{ attempt: 1, provider: 'sandbox', provider_charge_id: created.json.provider_charge_id, outcome: 'succeeded', error_code: null }],
    });
    expect(got.json.attempts[0].finished_at).not.toBeNull();
    const { a, b } = await chargesAt(created.json.id);
    expect(a.map((c) => c.id)).toEqual([created.json.provider_charge_id]);
    expect(b).toEqual([]);
  });

  it('A in outage "unavailable" (creates 503, lookups answer none): B charges; A holds nothing', async () => {
    await outage(stack.sandboxUrl, 'unavailable');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(201);
    const payment = (await api.get(`/v1/payments/${created.json.id}`)).json;
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'sandbox', outcome: 'not_charged', error_code: 'outcome_unknown_none_found', provider_charge_id: null },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded', provider_charge_id: payment.provider_charge_id },
    ]);
    const { a, b } = await chargesAt(payment.id);
    expect(a).toEqual([]);
    expect(b.map((c) => c.id)).toEqual([payment.provider_charge_id]);
    // B's charge was made under attempt 2's own sub-key.
    expect((await stack.secondSandbox!.provider.findChargeByIdempotencyKey(`${payment.id}:charge:2`))?.id).toBe(payment.provider_charge_id);
    // The run's page says where each attempt went and why it moved on.
    const memo = await memoOf(payment.workflow_id);
    expect(memo).toMatchObject({ route: ['sandbox', 'sandbox-b'], provider: 'sandbox-b' });
    expect(memo.attempts).toMatchObject([
      { attempt: 1, provider: 'sandbox', outcome: 'not_charged', moved_on_because: expect.stringContaining('found no charge') },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
    ]);
  });

  it('A refuses connections (nothing sent): B charges at once', async () => {
    const deadApi = apiClient(stack.apiUrl, deadTenant.apiKey);
    const created = await deadApi.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(201);
    const payment = (await deadApi.get(`/v1/payments/${created.json.id}`)).json;
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'dead', outcome: 'not_sent', error_code: 'connection_refused' },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
    ]);
    expect((await memoOf(payment.workflow_id)).attempts).toMatchObject([{ provider: 'dead', moved_on_because: expect.stringContaining('connection refused') }, { provider: 'sandbox-b' }]);
  });

  it('A declines with processing_error (retryable elsewhere): B charges; a card decline does not move on', async () => {
    await outage(stack.sandboxUrl, 'declining');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(201);
    const payment = (await api.get(`/v1/payments/${created.json.id}`)).json;
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'sandbox', outcome: 'declined', error_code: 'processing_error', provider_charge_id: expect.stringMatching(/^ch_/) },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
    ]);
    const { a, b } = await chargesAt(payment.id);
    expect(a.map((c) => c.status)).toEqual(['declined']);
    expect(b.map((c) => c.status)).toEqual(['succeeded']);
    await outage(stack.sandboxUrl, 'none');

    const declined = await api.post('/v1/payments', body('pm_card_declined'), uniqueKey('pay'));
    expect(declined.status).toBe(402);
    const card = (await api.get(`/v1/payments/${declined.json.error.payment.id}`)).json;
    expect(card).toMatchObject({ status: 'declined', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'declined', error_code: 'card_declined' }] });
    expect((await chargesAt(card.id)).b).toEqual([]);
  });

  it('a manual-capture payment failed over to B: capture and refund go to B', async () => {
    await outage(stack.sandboxUrl, 'unavailable');
    const created = await api.post('/v1/payments', body('pm_card_visa', { capture_method: 'manual' }), uniqueKey('pay'));
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ status: 'requires_capture', provider: 'sandbox-b' });
    // A stays in its outage: a capture or refund sent there would fail (503) and retry forever.
    const captured = await api.post(`/v1/payments/${created.json.id}/capture`, {}, uniqueKey('cap'));
    expect(captured.status).toBe(200);
    expect(captured.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, provider: 'sandbox-b' });
    const refunded = await api.post(`/v1/payments/${created.json.id}/refunds`, { amount_minor: 1000 }, uniqueKey('ref'));
    expect(refunded.status).toBe(201);
    expect(refunded.json).toMatchObject({ status: 'succeeded', amount_minor: 1000 });
    const [atB] = (await chargesAt(created.json.id)).b;
    expect(atB).toMatchObject({ id: created.json.provider_charge_id, status: 'succeeded', amountCapturedMinor: 2500, amountRefundedMinor: 1000 });
    expect((await chargesAt(created.json.id)).a).toEqual([]);
  });
});

describe('no failover while A’s outcome is unknown', () => {
  it('A "down" (lookups fail too): the payment stays processing at A, B never sees it; A back: it completes at A', async () => {
    await outage(stack.sandboxUrl, 'down');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    await new Promise((r) => setTimeout(r, 4000));
    const waiting = (await api.get(`/v1/payments/${id}`)).json;
    expect(waiting).toMatchObject({ status: 'processing', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'pending', finished_at: null }] });
    expect((await memoOf(waiting.workflow_id)).attempts).toMatchObject([{ attempt: 1, provider: 'sandbox', outcome: 'pending' }]);
    expect(await stack.secondSandbox!.provider.listChargesByReference(id)).toEqual([]);
    await outage(stack.sandboxUrl, 'none');
    const done = await settled(id, api, 45_000);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'succeeded' }] });
    const { a, b } = await chargesAt(id);
    expect(a.map((c) => c.id)).toEqual([done.provider_charge_id]);
    expect(b).toEqual([]);
  });

  it('A "timeout" (commits, never answers; lookups hang): stays processing, B never sees it; A back: the charge A made is the payment’s', async () => {
    await outage(stack.sandboxUrl, 'timeout');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    await new Promise((r) => setTimeout(r, 5000));
    expect((await api.get(`/v1/payments/${id}`)).json).toMatchObject({ status: 'processing', attempts: [{ provider: 'sandbox', outcome: 'pending' }] });
    expect(await stack.secondSandbox!.provider.listChargesByReference(id)).toEqual([]);
    await outage(stack.sandboxUrl, 'none');
    const done = await settled(id, api, 45_000);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'succeeded' }] });
    const { a, b } = await chargesAt(id);
    expect(a.map((c) => c.id)).toEqual([done.provider_charge_id]);
    expect(b).toEqual([]);
  });
});
