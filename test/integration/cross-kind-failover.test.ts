import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { freePort } from '../../devstack/ports';
import { AdyenProvider } from '../../provider/adyen/client';
import { SandboxProvider } from '../../provider/sandbox/client';
import { apiClient, decidedPayment, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';

/**
 * Failover across kinds, end to end through the API on the real stack (Temporal, PostgreSQL,
 * the worker, two sandbox PSPs with their own databases, and the Adyen double as `adyen-test`),
 * each tenant routed by its own routing (PATCH /admin/tenants, activities/routing.ts
 * planRouteFor). The double is on the sandboxes' card network (doubles/adyen/network.ts): a card
 * saved at adyen-test is charged at sandbox-b by its network transaction id while adyen-test is
 * down. Each test counts the charges at every PSP the payment could reach, so a double charge
 * fails it. `sandbox` is the stack's first sandbox (sandbox-a under `npm start`); `sandbox-gone`
 * is a sandbox connection at an address nobody listens on.
 */

const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
let double: AdyenDouble;
let stack: TestStack;

beforeAll(async () => {
  // The stack's sandboxes are on the network with its development key: so is the double (no key given).
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null });
  const gone = new SandboxProvider({ baseUrl: `http://127.0.0.1:${await freePort()}`, timeoutMs: 1500 });
  const adyenTest = new AdyenProvider({ baseUrl: double.url, apiKey, merchantAccount, hmacKey, timeoutMs: 1500 });
  stack = await startStack({
    secondSandbox: {},
    extraProviders: { 'adyen-test': adyenTest, 'sandbox-gone': gone },
    providerNames: ['sandbox', 'sandbox-b', 'adyen-test', 'sandbox-gone'],
    api: { IDEMPOTENCY_WAIT_MS: 3000 },
  });
  double.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/adyen-test`);
}, 300_000);
/** Forgets the PSPs' shared health (db/routing.ts): an outage's errors (three tries per attempt) put a PSP out of first place for a while. */
const forgetHealth = () => stack.sql`DELETE FROM routing_health`;
afterEach(async () => {
  await double.setOutage('none');
  await sandboxOutage('none');
  await forgetHealth();
  await expectLedgerConsistent(stack.sql);
});
afterAll(async () => {
  await stack?.stop();
  await double?.close();
});

async function sandboxOutage(mode: 'none' | 'unavailable' | 'timeout') {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}
async function doubleOutage(mode: 'unavailable' | 'down' | 'lose-answers') {
  const response = await fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
  // Down: until a new connection is refused (the worker's pooled ones it closed are seen closed first).
  if (mode === 'down') await eventually(() => fetch(`${double.url}/healthz`).then(() => false, (e: { cause?: { code?: string } }) => e.cause?.code === 'ECONNREFUSED'));
}

/** A tenant with its routing set through the admin API, and its API client. */
async function routed(fallback: string[]) {
  const tenant: Tenant = await stack.createTenant('cross-kind');
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ routing: { fallback } }),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return apiClient(stack.apiUrl, tenant.apiKey);
}

const payment = (extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa', ...extra });

interface SandboxCharge {
  id: string;
  status: string;
  network_transaction_id: string | null;
}
/** The charges a sandbox holds for a payment (its reference), read from its own table: a lookup through its API hangs in outage `timeout`. */
async function sandboxCharges(which: 'sandbox' | 'sandbox-b', paymentId: string): Promise<SandboxCharge[]> {
  if (which === 'sandbox') return stack.sql<SandboxCharge[]>`SELECT id, status, network_transaction_id FROM sandbox.charges WHERE reference = ${paymentId}`;
  const response = await fetch(`${stack.secondSandbox!.url}/v1/charges?reference=${encodeURIComponent(paymentId)}`);
  return ((await response.json()) as { data: SandboxCharge[] }).data;
}

/** The ledger transactions of the payment's charge and its events of `type`. */
async function postedAndEvents(paymentId: string, type: string) {
  const [ledger] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_transactions WHERE payment_id = ${paymentId} AND refund_id IS NULL`;
  const [events] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM outbox_events WHERE type = ${type} AND payload->'data'->'object'->>'id' = ${paymentId}`;
  return { ledger: ledger!.n, events: events!.n };
}

/** Until the payment's charge step runs its `attempt`-th try at the same PSP: each try before it ended with the outcome unknown. */
async function chargeTriedAgain(client: ReturnType<typeof apiClient>, paymentId: string, attempt: number) {
  const { workflow_id: workflowId } = (await client.get(`/v1/payments/${paymentId}`)).json;
  await eventually(
    async () => {
      const { raw } = await stack.temporal.workflow.getHandle(workflowId).describe();
      return (raw.pendingActivities?.find((a) => a.activityType?.name === 'chargeAttempt')?.attempt ?? 0) >= attempt;
    },
    60_000,
    100,
    `the charge step of ${paymentId} at its try ${attempt}`,
  );
}

async function create(client: ReturnType<typeof apiClient>, body: Record<string, unknown>) {
  const created = await client.post('/v1/payments', body, uniqueKey('pay'));
  expect([201, 202], created.text).toContain(created.status);
  return created.json.id as string;
}

describe('a card saved at adyen-test is charged at sandbox-b by its network transaction id', () => {
  it('routed {"fallback":["adyen-test","sandbox-b"]}, adyen-test down: the off-session payment is charged once, at sandbox-b; nothing reaches the double; posted once, one payment.succeeded', async () => {
    const client = await routed(['adyen-test', 'sandbox-b']);
    const customer = (await client.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'))).json.id as string;
    const first = await decidedPayment(client, await create(client, payment({ customer, setup_future_usage: 'off_session' })));
    expect(first).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    const method = await eventually(async () => (await client.get(`/v1/customers/${customer}/payment_methods`)).json.data[0] ?? null);
    // Adyen's test Visa, as the double reported it.
    expect(method).toMatchObject({ card: { brand: 'visa', last4: '1111' } });
    const [stored] = await stack.sql<{ provider_tokens: Record<string, string>; network_transaction_id: string }[]>`
      SELECT provider_tokens, network_transaction_id FROM payment_methods WHERE id = ${method.id}`;
    expect(Object.keys(stored!.provider_tokens)).toEqual(['adyen-test']);
    // The card network's id, not one of the double's own.
    expect(stored!.network_transaction_id).toMatch(/^ntx_/);

    await doubleOutage('down');
    const before = double.paymentsMade();
    const paid = await decidedPayment(client, await create(client, payment({ payment_method: method.id, customer, off_session: true })));
    expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox-b', payment_method: method.id, amount_captured_minor: 2500 });
    expect(paid.attempts).toMatchObject([
      { attempt: 1, provider: 'adyen-test', outcome: 'not_sent', error_code: 'connection_refused' },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
    ]);
    expect(double.paymentsMade()).toBe(before);
    const atB = await sandboxCharges('sandbox-b', paid.id);
    expect(atB).toMatchObject([{ id: paid.provider_charge_id, status: 'succeeded', network_transaction_id: stored!.network_transaction_id }]);
    expect(await sandboxCharges('sandbox', paid.id)).toEqual([]);
    expect(await postedAndEvents(paid.id, 'payment.succeeded')).toEqual({ ledger: 1, events: 1 });

    // Back up, the card is charged at adyen-test by its stored id again (its own token first).
    await double.setOutage('none');
    await forgetHealth();
    const again = await decidedPayment(client, await create(client, payment({ payment_method: method.id, customer, off_session: true })));
    expect(again).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
    expect(double.paymentsMade()).toBe(before + 1);
    expect(await sandboxCharges('sandbox-b', again.id)).toEqual([]);
  });

  it('the double given another network key: sandbox-b does not know its id, refuses it, and nothing is charged anywhere', async () => {
    const stranger = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, networkKey: 'another-card-network-key-0123' });
    try {
      const charged = await new AdyenProvider({ baseUrl: stranger.url, apiKey, merchantAccount, hmacKey, timeoutMs: 1500 }).createCharge({
        idempotencyKey: uniqueKey('key'),
        amountMinor: 1000,
        currency: 'EUR',
        paymentMethod: 'pm_card_visa',
        capture: true,
        reference: uniqueKey('ref'),
        setupFutureUsage: 'off_session',
      });
      expect(charged.savedCard?.networkTransactionId).toMatch(/^ntx_/);
      const reference = uniqueKey('ref');
      const refused = await stack.secondSandbox!.provider.createCharge({
        idempotencyKey: uniqueKey('key'),
        amountMinor: 1000,
        currency: 'EUR',
        paymentMethod: 'pm_card_visa',
        capture: true,
        reference,
        offSession: true,
        savedMethod: { token: null, networkTransactionId: charged.savedCard!.networkTransactionId, card: charged.savedCard!.card },
      }).catch((error: Error) => error);
      expect(refused).toBeInstanceOf(Error);
      expect(String(refused)).toContain('does not know this network transaction id');
      expect(await sandboxCharges('sandbox-b', reference)).toEqual([]);
    } finally {
      await stranger.close();
    }
  });
});

describe('failover across kinds: the next PSP only when the first certainly took no money', () => {
  describe('routed {"fallback":["adyen-test","sandbox-b"]}', () => {
    it.each([
      { mode: 'unavailable' as const, what: 'unavailable (503, nothing made)', made: 0 },
      { mode: 'lose-answers' as const, what: 'losing its answers (the payment made)', made: 1 },
    ])('adyen-test $what: a kind that replays cannot prove that no payment was made, so the payment never moves on; back, the replay answers the one payment; nothing at sandbox-b', async ({ mode, made }) => {
      const client = await routed(['adyen-test', 'sandbox-b']);
      await doubleOutage(mode);
      const before = double.paymentsMade();
      const id = await create(client, payment());
      await chargeTriedAgain(client, id, 3);
      expect(double.paymentsMade()).toBe(before + made);
      expect(await sandboxCharges('sandbox-b', id)).toEqual([]);
      await double.setOutage('none');
      const paid = await decidedPayment(client, id);
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
      expect(paid.attempts).toMatchObject([{ attempt: 1, provider: 'adyen-test', outcome: 'succeeded' }]);
      expect(double.paymentsMade()).toBe(before + 1);
      expect(await sandboxCharges('sandbox-b', id)).toEqual([]);
      expect(await postedAndEvents(id, 'payment.succeeded')).toEqual({ ledger: 1, events: 1 });
    });

    it('adyen-test down (connection refused, nothing sent): sandbox-b charges at once; nothing at the double', async () => {
      const client = await routed(['adyen-test', 'sandbox-b']);
      await doubleOutage('down');
      const before = double.paymentsMade();
      const paid = await decidedPayment(client, await create(client, payment()));
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
      expect(paid.attempts).toMatchObject([
        { attempt: 1, provider: 'adyen-test', outcome: 'not_sent', error_code: 'connection_refused' },
        { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
      ]);
      expect(double.paymentsMade()).toBe(before);
      expect((await sandboxCharges('sandbox-b', paid.id)).map((c) => c.status)).toEqual(['succeeded']);
    });
  });

  describe('routed {"fallback":["sandbox","adyen-test"]} (the sandbox first)', () => {
    it('the sandbox unavailable (creates 503, lookups answer): after lookups by our key find no charge, adyen-test charges; nothing at the sandbox', async () => {
      const client = await routed(['sandbox', 'adyen-test']);
      await sandboxOutage('unavailable');
      const before = double.paymentsMade();
      const paid = await decidedPayment(client, await create(client, payment()));
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
      expect(paid.attempts).toMatchObject([
        { attempt: 1, provider: 'sandbox', outcome: 'not_charged', error_code: 'psp_error_none_found' },
        { attempt: 2, provider: 'adyen-test', outcome: 'succeeded' },
      ]);
      expect(await sandboxCharges('sandbox', paid.id)).toEqual([]);
      expect(double.paymentsMade()).toBe(before + 1);
    });

    it('the sandbox down (routed {"fallback":["sandbox-gone","adyen-test"]}: connection refused, nothing sent): adyen-test charges at once', async () => {
      const client = await routed(['sandbox-gone', 'adyen-test']);
      const before = double.paymentsMade();
      const paid = await decidedPayment(client, await create(client, payment()));
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
      expect(paid.attempts).toMatchObject([
        { attempt: 1, provider: 'sandbox-gone', outcome: 'not_sent', error_code: 'connection_refused' },
        { attempt: 2, provider: 'adyen-test', outcome: 'succeeded' },
      ]);
      expect(double.paymentsMade()).toBe(before + 1);
    });

    it('the sandbox loses its answers (outage "timeout": it charged, lookups hang too): the payment keeps asking it; back, its lookup finds the charge; nothing at the double', async () => {
      const client = await routed(['sandbox', 'adyen-test']);
      await sandboxOutage('timeout');
      const before = double.paymentsMade();
      const id = await create(client, payment());
      await chargeTriedAgain(client, id, 3);
      expect((await sandboxCharges('sandbox', id)).map((c) => c.status)).toEqual(['succeeded']);
      expect(double.paymentsMade()).toBe(before);
      await sandboxOutage('none');
      const paid = await decidedPayment(client, id);
      expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
      expect(paid.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox', outcome: 'succeeded' }]);
      expect((await sandboxCharges('sandbox', id)).map((c) => c.id)).toEqual([paid.provider_charge_id]);
      expect(double.paymentsMade()).toBe(before);
      expect(await postedAndEvents(id, 'payment.succeeded')).toEqual({ ledger: 1, events: 1 });
    });
  });
});

describe('routed {"fallback":["sandbox","sandbox-b","adyen-test"]}: a transient error is tried again at its PSP; a PSP without the method is no candidate', () => {
  it('pm_card_flaky (503 twice per key at the sandbox): charged at the sandbox on its third try, under the one key; sandbox-b never asked; adyen-test (no pm_card_flaky) never a candidate', async () => {
    const client = await routed(['sandbox', 'sandbox-b', 'adyen-test']);
    const before = double.paymentsMade();
    const paid = await decidedPayment(client, await create(client, payment({ payment_method: 'pm_card_flaky' })));
    expect(paid).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    expect(paid.attempts).toMatchObject([{ attempt: 1, provider: 'sandbox', outcome: 'succeeded', provider_charge_id: paid.provider_charge_id }]);
    expect(paid.attempts).toHaveLength(1);
    // One charge at the sandbox, under attempt 1's key, which it was sent three times (the two 503s, then the charge).
    expect((await sandboxCharges('sandbox', paid.id)).map((c) => c.id)).toEqual([paid.provider_charge_id]);
    expect((await stack.provider.findChargeByIdempotencyKey(`${paid.id}:charge`))?.id).toBe(paid.provider_charge_id);
    const [flaky] = await stack.sql<{ attempts: number }[]>`SELECT attempts FROM sandbox.flaky_attempts WHERE idempotency_key = ${`${paid.id}:charge`}`;
    expect(flaky?.attempts).toBe(3);
    expect(await sandboxCharges('sandbox-b', paid.id)).toEqual([]);
    expect(double.paymentsMade()).toBe(before);
    expect(double.paymentsFor(paid.id)).toEqual([]);
    // The plan dropped adyen-test, and says why (the run's memo).
    const handle = stack.temporal.workflow.getHandle(paid.workflow_id as string);
    await handle.result();
    const { memo } = await handle.describe();
    expect(memo).toMatchObject({ route: ['sandbox', 'sandbox-b'], route_reason: expect.stringContaining('adyen-test skipped: payment method not supported') });
  });

  it('a route with no PSP supporting the method: the API refuses it (400 on payment_method, nothing runs); an API that knows only the sandbox kind lets it through, and the run fails it payment_method_unsupported before any PSP call', async () => {
    const tenant = await stack.createTenant('cross-kind-unsupported');
    await stack.sql`UPDATE tenants SET routing = ${stack.sql.json({ fallback: ['adyen-test'] })} WHERE id = ${tenant.id}`;
    const before = double.paymentsMade();
    const refused = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', payment({ payment_method: 'pm_card_flaky' }), uniqueKey('pay'));
    expect(refused.status, refused.text).toBe(400);
    expect(refused.json.error).toMatchObject({ type: 'invalid_request', issues: [{ path: 'payment_method', message: expect.stringContaining('adyen-test (adyen)') }] });
    expect(await stack.sql`SELECT id FROM payments WHERE tenant_id = ${tenant.id}`).toEqual([]);
    // An API whose PROVIDERS name the sandbox alone (a deployment's API and worker configured apart): the run's plan finds no candidate.
    const unaware = await stack.startApi({ PROVIDERS: [{ name: 'sandbox', kind: 'sandbox', settings: { url: stack.sandboxUrl } }] });
    try {
      const client = apiClient(unaware.url, tenant.apiKey);
      const failed = await client.post('/v1/payments', payment({ payment_method: 'pm_card_flaky' }), uniqueKey('pay'));
      expect(failed.status, failed.text).toBe(402);
      expect(failed.json.error).toMatchObject({ type: 'payment_failed', payment: { status: 'failed', provider: null, failure: { code: 'payment_method_unsupported', message: expect.stringContaining('adyen-test') } } });
      expect((await client.get(`/v1/payments/${failed.json.error.payment.id}`)).json.attempts).toEqual([]);
    } finally {
      await unaware.close();
    }
    expect(double.paymentsMade()).toBe(before);
  });
});
