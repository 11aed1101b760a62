import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { freePort } from '../../devstack/ports';
import { disputeWorkflowId } from '../../domain/ids';
import type { DisputeRow } from '../../domain/resources';
import { SandboxProvider } from '../../provider/sandbox/client';
import { apiClient, eventually, decidedPayment, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { AesGcmPayloadCodec } from '../../lib/payload-codec';
import { testPayloadKeys } from '../../testkit/payload-keys';

/**
 * Failover across two PSPs, end to end through the API against the real stack:
 * Temporal, PostgreSQL, the worker and TWO sandbox PSPs (`sandbox`, the default, and
 * `sandbox-b`, each with its own database). The route tries `sandbox` first, then `sandbox-b`
 * (one tenant's route starts at `dead`, a PSP nobody listens at); B opens a dispute 200 ms after
 * capturing a `pm_card_createDispute` charge and decides evidence 200 ms after it. docs/CONTRACT.md
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
    secondSandbox: { disputes: { disputeAfterMs: 200, disputeDecisionMs: 200 } },
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
/**
 * POST /v1/payments and the payment once its charge is decided: a failover takes a few
 * retries at A first (about 1.5 s), which may outlast the bounded wait (202, then GET).
 */
async function pay(request: Record<string, unknown>, client = api) {
  const created = await client.post('/v1/payments', request, uniqueKey('pay'));
  expect([201, 202], created.text).toContain(created.status);
  return decidedPayment(client, created.json.id);
}
/** The run's memo once the run has closed (the answer comes from the database commit, before the run's last memo). */
async function memoOf(workflowId: string) {
  const handle = stack.temporal.workflow.getHandle(workflowId);
  await handle.result();
  return (await handle.describe()).memo as Record<string, unknown>;
}

/** The last heartbeat's details of the run's pending chargeAttempt, decoded (what the Web UI shows through the codec server). */
async function chargeHeartbeat(workflowId: string) {
  return eventually(async () => {
    const { raw } = await stack.temporal.workflow.getHandle(workflowId).describe();
    const payloads = raw.pendingActivities?.find((a) => a.activityType?.name === 'chargeAttempt')?.heartbeatDetails?.payloads;
    if (!payloads?.length) return undefined;
    const [decoded] = await new AesGcmPayloadCodec(testPayloadKeys).decode(payloads as Payload[]);
    return defaultPayloadConverter.fromPayload<Record<string, unknown>>(decoded!);
  });
}

/**
 * Waits until the payment's charge step runs its `attempt`-th try at the same PSP: each try
 * before it ended with the outcome unknown, the point where a wrong failover would have moved on.
 */
async function chargeTriedAgain(paymentId: string, attempt: number) {
  const { workflow_id: workflowId } = (await api.get(`/v1/payments/${paymentId}`)).json;
  await eventually(
    async () => {
      const { raw } = await stack.temporal.workflow.getHandle(workflowId).describe();
      return (raw.pendingActivities?.find((a) => a.activityType?.name === 'chargeAttempt')?.attempt ?? 0) >= attempt;
    },
    30_000,
    100,
    `the charge step of ${paymentId} at its try ${attempt}`,
  );
}

describe('failover: the next PSP only when the last one certainly took no money', () => {
  it('a plain payment: one attempt at the default PSP; GET shows provider and attempts', async () => {
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    // 201, or 202 when a loaded machine takes longer than the API's wait (the first payment of the file).
    expect([201, 202]).toContain(created.status);
    const decided = await decidedPayment(api, created.json.id);
    expect(decided).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
    // The charge id as the decided payment shows it: a 202 answer has none yet.
    const chargeId = decided.provider_charge_id as string;
    expect(chargeId).toMatch(/^ch_/);
    const got = await api.get(`/v1/payments/${created.json.id}`);
    expect(got.json).toMatchObject({
      provider: 'sandbox',
      attempts: [{ attempt: 1, provider: 'sandbox', provider_charge_id: chargeId, outcome: 'succeeded', error_code: null }],
    });
    expect(got.json.attempts[0].finished_at).not.toBeNull();
    const { a, b } = await chargesAt(created.json.id);
    expect(a.map((c) => c.id)).toEqual([chargeId]);
    expect(b).toEqual([]);
  });

  it('A in outage "unavailable" (creates 503, lookups answer none): B charges; A holds nothing', async () => {
    await outage(stack.sandboxUrl, 'unavailable');
    const payment = await pay(body());
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    expect(payment.attempts).toMatchObject([
      { attempt: 1, provider: 'sandbox', outcome: 'not_charged', error_code: 'psp_error_none_found', provider_charge_id: null },
      { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded', provider_charge_id: payment.provider_charge_id },
    ]);
    const { a, b } = await chargesAt(payment.id);
    expect(a).toEqual([]);
    expect(b.map((c) => c.id)).toEqual([payment.provider_charge_id]);
    // B's webhooks reach the API at /provider_webhooks/sandbox-b, verified with B's secret, and find the payment.
    await eventually(async () => {
      const rows = await stack.sql<{ disposition: string }[]>`SELECT disposition FROM provider_events WHERE provider = 'sandbox-b' AND payment_id = ${payment.id}`;
      return rows.length > 0 && rows.every((r) => r.disposition === 'forward');
    });
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

  it('A refuses connections on each of its 3 tries (nothing sent): B charges', async () => {
    const deadApi = apiClient(stack.apiUrl, deadTenant.apiKey);
    // Three tries at A (its backoff: 0.5 s, then 1 s) may outlast the bounded wait: 201 or 202, then GET.
    const payment = await pay(body(), deadApi);
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
    const created = { json: await pay(body('pm_card_visa', { capture_method: 'manual' })) };
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
  it('A "down" (lookups fail too): the payment stays processing at A, B never sees it; A back, its tries used up: its lookups find nothing, then B charges', async () => {
    await outage(stack.sandboxUrl, 'down');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    // The charge and then a lookup at A failed (outcome unknown): the step tries A a third time.
    await chargeTriedAgain(id, 3);
    const waiting = (await api.get(`/v1/payments/${id}`)).json;
    expect(waiting).toMatchObject({ status: 'processing', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'pending', finished_at: null }] });
    // The Web UI's pending activity names the PSP it keeps asking (its heartbeat's details).
    expect(await chargeHeartbeat(waiting.workflow_id)).toMatchObject({ provider: 'sandbox', attempt: 1 });
    expect(await stack.secondSandbox!.provider.listChargesByReference(id)).toEqual([]);
    await outage(stack.sandboxUrl, 'none');
    const done = await decidedPayment(api, id, 45_000);
    // A had its PROVIDER_TRANSIENT_TRIES (3) tries while down: back, it is not charged again; two lookups by the key prove it holds nothing.
    expect(done).toMatchObject({
      status: 'succeeded',
      provider: 'sandbox-b',
      attempts: [
        { attempt: 1, provider: 'sandbox', outcome: 'not_charged', error_code: 'outcome_unknown_none_found' },
        { attempt: 2, provider: 'sandbox-b', outcome: 'succeeded' },
      ],
    });
    const { a, b } = await chargesAt(id);
    expect(a).toEqual([]);
    expect(b.map((c) => c.id)).toEqual([done.provider_charge_id]);
  });

  it('A "timeout" (commits, never answers; lookups hang): stays processing, B never sees it; A back: the charge A made is the payment’s', async () => {
    await outage(stack.sandboxUrl, 'timeout');
    const created = await api.post('/v1/payments', body(), uniqueKey('pay'));
    expect(created.status).toBe(202);
    const id = created.json.id as string;
    // The charge's answer and then a lookup at A timed out (outcome unknown): the step tries A a third time.
    await chargeTriedAgain(id, 3);
    expect((await api.get(`/v1/payments/${id}`)).json).toMatchObject({ status: 'processing', attempts: [{ provider: 'sandbox', outcome: 'pending' }] });
    expect(await stack.secondSandbox!.provider.listChargesByReference(id)).toEqual([]);
    await outage(stack.sandboxUrl, 'none');
    const done = await decidedPayment(api, id, 45_000);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'succeeded' }] });
    const { a, b } = await chargesAt(id);
    expect(a.map((c) => c.id)).toEqual([done.provider_charge_id]);
    expect(b).toEqual([]);
  });
});

describe('the reconciler, per PSP', () => {
  it('a charge at A for a payment B holds (a late success at A) is a duplicate_charge, given back at A; B’s run finds nothing of it', async () => {
    const from = new Date(Date.now() - 1000);
    await outage(stack.sandboxUrl, 'unavailable');
    const created = { json: await pay(body()) };
    expect(created.json).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    await outage(stack.sandboxUrl, 'none');
    const id = created.json.id as string;
    // A's late success, as if the charge lost at A had committed after all.
    const injected = await fetch(`${stack.sandboxUrl}/_sandbox/discrepancies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'direct_charge', reference: id, amount_minor: 2500, currency: 'EUR' }),
    });
    expect(injected.status).toBe(200);
    const lateCharge = ((await injected.json()) as { charge: { id: string } }).charge.id;

    const window = { from: from.toISOString(), to: new Date(Date.now() + 1000).toISOString() };
    const atA = await stack.reconciliation.run({ runKey: uniqueKey('recon-a'), workflowId: 'failover-test', provider: 'sandbox', window });
    const findingsA = await stack.sql<{ kind: string; payment_id: string; provider_figures: any }[]>`
      SELECT d.kind, d.payment_id, f.provider_figures FROM reconciliation_findings f JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id
      WHERE f.run_id = ${atA.runId}`;
    expect(findingsA).toEqual([expect.objectContaining({ kind: 'duplicate_charge', payment_id: id })]);
    expect(findingsA[0]!.provider_figures.compensation).toEqual([expect.objectContaining({ charge_id: lateCharge, action: 'refund', status: 'succeeded', amount_minor: 2500 })]);
    const [late] = await stack.provider.listChargesByReference(id);
    expect(late).toMatchObject({ id: lateCharge, amountRefundedMinor: 2500 });

    const atB = await stack.reconciliation.run({ runKey: uniqueKey('recon-b'), workflowId: 'failover-test', provider: 'sandbox-b', window });
    expect(atB).toMatchObject({ status: 'clean', discrepancyCount: 0 });
    // Once given back, A's next run finds the duplicate again (it happened), but nothing more to give back.
    const again = await stack.reconciliation.run({ runKey: uniqueKey('recon-a2'), workflowId: 'failover-test', provider: 'sandbox', window });
    const findingsAgain = await stack.sql<{ kind: string; provider_figures: any }[]>`
      SELECT d.kind, f.provider_figures FROM reconciliation_findings f JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id WHERE f.run_id = ${again.runId}`;
    expect(findingsAgain.map((f) => f.kind)).toEqual(['duplicate_charge']);
    expect(findingsAgain[0]!.provider_figures.compensation).toEqual([expect.objectContaining({ charge_id: lateCharge, action: 'none', status: 'already_refunded' })]);
  });
});

describe('a dispute of a payment that failed over', () => {
  it('is handled at B, the PSP holding the charge: its workflow id and its calls at B, the money right, each PSP’s reconciliation clean of it', async () => {
    const from = new Date(Date.now() - 1000);
    const disputed = await stack.createTenant('failover-dispute');
    const client = apiClient(stack.apiUrl, disputed.apiKey);
    await outage(stack.sandboxUrl, 'unavailable');
    const payment = await pay(body('pm_card_createDispute', { amount_minor: 4000 }), client);
    expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
    await outage(stack.sandboxUrl, 'none');

    const opened = await eventually(async () => (await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${payment.id}`)[0], 20_000, 50, 'the dispute recorded');
    expect(opened).toMatchObject({ provider: 'sandbox-b', provider_charge_id: payment.provider_charge_id, workflow_id: disputeWorkflowId('sandbox-b', opened.provider_dispute_id) });
    expect((await stack.secondSandbox!.provider.disputes.retrieveDispute(opened.provider_dispute_id)).chargeId).toBe(payment.provider_charge_id);
    await expect(stack.provider.disputes.retrieveDispute(opened.provider_dispute_id)).rejects.toThrow();
    const balance = async () => {
      const { accounts } = (await client.get('/v1/balance')).json as { accounts: { account: string; currency: string; balance_minor: number }[] };
      return Object.fromEntries(accounts.filter((a) => a.currency === 'EUR').map((a) => [a.account, a.balance_minor]));
    };
    await eventually(async () => (await balance()).merchant_balance === 4000 - 4000 - 1500, 20_000, 50, 'the withdrawal posted');

    // The merchant's evidence goes to B: B decides it and reinstates.
    const evidence = await client.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { uncategorized_text: 'winning_evidence' }, submit: true }, uniqueKey('ev'));
    expect(evidence.status).toBe(200);
    expect(evidence.json).toMatchObject({ id: opened.id, provider: 'sandbox-b', status: 'under_review' });
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    expect(await stack.secondSandbox!.provider.disputes.retrieveDispute(opened.provider_dispute_id)).toMatchObject({ status: 'won', evidenceSubmittedAt: expect.any(String) });
    expect(await balance()).toMatchObject({ merchant_balance: 4000 - 1500, provider_receivable: 4000 - 1500, dispute_claim: 0, dispute_reserve: 0 });
    const keys = await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${opened.id} ORDER BY created_at`;
    expect(keys.map((k) => k.event_key)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);

    // B's report has the dispute's lines and agrees with our postings; A's run has nothing of it.
    const window = { from: from.toISOString(), to: new Date(Date.now() + 1000).toISOString() };
    const atB = await stack.reconciliation.run({ runKey: uniqueKey('recon-b'), workflowId: 'failover-test', provider: 'sandbox-b', window });
    expect(atB).toMatchObject({ status: 'clean', discrepancyCount: 0 });
    const atA = await stack.reconciliation.run({ runKey: uniqueKey('recon-a'), workflowId: 'failover-test', provider: 'sandbox', window });
    const aboutIt = await stack.sql`
      SELECT d.kind FROM reconciliation_findings f JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id
      WHERE f.run_id = ${atA.runId} AND (d.payment_id = ${payment.id} OR d.subject = ${opened.id})`;
    expect(aboutIt).toEqual([]);
  });
});
