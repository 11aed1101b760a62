import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import { apiClient, decidedPayment, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * The adyen kind end to end through the orchestrator: the API, the payment workflow on a real
 * worker (real Temporal and PostgreSQL) whose registry has `adyen-test` (the client through the
 * official library, against the Adyen double on loopback) beside the stack's sandbox. Its
 * notifications are not wired to the API here: the route's `[accepted]` batch answer is not
 * built yet, so these are the charge's own answers, and the failover rule as the kind's
 * capability `unknownOutcome: 'replay'` makes it.
 */
const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
let double: AdyenDouble;
let gone: AdyenDouble;
let stack: TestStack;
let tenant: Tenant;
let failoverTenant: Tenant;
let api: ReturnType<typeof apiClient>;
const routes = new Map<string, string[]>();
const route: RoutePlanner = async (request) => {
  const providers = routes.get(request.tenantId) ?? ['adyen-test'];
  return { providers, reason: `test route: ${providers.join(' then ')}` };
};
const client = (url: string) => new AdyenProvider({ baseUrl: url, apiKey, merchantAccount, hmacKey, timeoutMs: 1500 });

beforeAll(async () => {
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null });
  // A second double, closed before its test: nobody listens at its address any more.
  gone = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null });
  stack = await startStack({ route, extraProviders: { 'adyen-test': client(double.url), 'adyen-gone': client(gone.url) }, api: { IDEMPOTENCY_WAIT_MS: 3000 } });
  tenant = await stack.createTenant('adyen');
  failoverTenant = await stack.createTenant('adyen-failover');
  routes.set(failoverTenant.id, ['adyen-gone', 'sandbox']);
  api = apiClient(stack.apiUrl, tenant.apiKey);
}, 300_000);
afterAll(async () => {
  await stack?.stop();
  await double?.close();
});

const outage = (mode: string) => fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode }) }).then((r) => expect(r.status).toBe(200));
const body = (payment_method = 'pm_card_visa', extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method, ...extra });

describe('Adyen through the orchestrator (the Adyen double)', () => {
  it('a card payment succeeds at adyen-test, its charge the PSP reference; one payment at the PSP', async () => {
    const before = double.paymentsMade();
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ status: 'succeeded', provider: 'adyen-test', amount_captured_minor: 2500 });
    expect(created.json.provider_charge_id).toMatch(/^[0-9A-F]{16}$/);
    expect(double.paymentsMade()).toBe(before + 1);
  });

  it('a refusal is the payment declined with its reason', async () => {
    const created = await api.post('/v1/payments', body('pm_card_declined'), uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    expect(created.json.error).toMatchObject({ type: 'card_declined', payment: { status: 'declined', provider: 'adyen-test' } });
  });

  it('lost answers are resolved by replaying the request under its key: the payment waits, then succeeds with one payment at the PSP', async () => {
    const before = double.paymentsMade();
    await outage('lose-answers');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    // The first request was made and its answer lost; every retry replays it, and its answer is lost again.
    await eventually(() => double.paymentsMade() === before + 1);
    await outage('none');
    const payment = await decidedPayment(api, created.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    expect(double.paymentsMade()).toBe(before + 1);
  });

  it('a kind that replays never fails over after lost answers: routed to adyen-test then sandbox, while the double is unavailable the payment keeps asking it, and no other PSP charges', async () => {
    const routed = await stack.createTenant('adyen-replay-route');
    routes.set(routed.id, ['adyen-test', 'sandbox']);
    const routedApi = apiClient(stack.apiUrl, routed.apiKey);
    const before = double.paymentsMade();
    await outage('unavailable');
    const created = await routedApi.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status, created.text).toBe(202);
    // Past the lookups that let a lookup kind move on (two), it is still asking adyen-test.
    const { workflow_id: workflowId } = (await routedApi.get(`/v1/payments/${created.json.id}`)).json;
    await eventually(async () => {
      const { raw } = await stack.temporal.workflow.getHandle(workflowId).describe();
      const pending = raw.pendingActivities?.find((a) => a.activityType?.name === 'chargeAttempt');
      return (pending?.attempt ?? 0) >= 3;
    }, 60_000);
    expect(await stack.provider.listChargesByReference(created.json.id)).toEqual([]);
    await outage('none');
    const payment = await decidedPayment(routedApi, created.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    expect(payment.attempts).toHaveLength(1);
    expect(double.paymentsMade()).toBe(before + 1);
  });

  it('routed {"fallback":["adyen-gone","sandbox"]}: an Adyen that cannot be reached (nothing sent) fails over, one charge in all', async () => {
    await gone.close();
    const failoverApi = apiClient(stack.apiUrl, failoverTenant.apiKey);
    const created = await failoverApi.post('/v1/payments', body(), uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    const payment = await decidedPayment(failoverApi, created.json.id);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'adyen-gone', outcome: 'not_sent', error_code: 'connection_refused' },
      { attempt: 2, provider: 'sandbox', outcome: 'succeeded' },
    ]);
    expect(await stack.provider.listChargesByReference(created.json.id)).toHaveLength(1);
    expect(gone.paymentsMade()).toBe(0);
  });
});
