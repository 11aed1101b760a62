import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaymentsClient } from '../../client';
import { disputeWorkflowId } from '../../domain/ids';
import type { DisputeRow } from '../../domain/resources';
import { refundEvidence } from '../../shared/disputes';
import type { ReconciliationResult } from '../../shared/reconciliation';
import { disputeEventTypes, eurBalances } from '../helpers/disputes';
import { expectLedgerConsistent } from '../helpers/effects';
import { apiClient, eventually, isolatedApi, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * Disputes on the real stack: the sandbox opens them (pm_card_createDispute*), its signed
 * webhooks start the dispute workflow, which records each report forward-only with its ledger
 * postings and events; duplicated, reordered and lost webhooks change nothing of that.
 * The sandbox's deadline is 6 s here, with a reminder 2 s before it and a poll every second.
 */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({
    sandbox: { disputes: { disputeAfterMs: 200, disputeDecisionMs: 200, disputeEvidenceSeconds: 6 } },
    api: { DISPUTE_REMINDER_SECONDS: [2], DISPUTE_POLL_SECONDS: 1 },
  });
});
afterAll(async () => stack?.stop());

const faults = async (f: Record<string, number>) => {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/webhook_faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(f) });
  expect(response.status).toBe(200);
};

async function disputedPayment(tenant: Tenant, paymentMethod = 'pm_card_createDispute', amountMinor = 10_000) {
  const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: amountMinor, currency: 'EUR', payment_method: paymentMethod }, uniqueKey());
  expect(paid.status).toBe(201);
  return paid.json as { id: string; provider_charge_id?: string };
}

const disputeOf = (paymentId: string) =>
  eventually(async () => (await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${paymentId}`)[0], 20_000, 50, 'the dispute recorded');

const merchantBalance = (tenant: Tenant) => eurBalances(stack, tenant);
const eventTypes = (tenant: Tenant, disputeId: string) => disputeEventTypes(stack, tenant, disputeId);

/** The dispute's events once it has closed, its reminders aside. */
async function closedDisputeEvents(tenant: Tenant, disputeId: string): Promise<string[]> {
  await eventually(async () => (await eventTypes(tenant, disputeId)).includes('dispute.closed'), 20_000, 50, 'closed event');
  return (await eventTypes(tenant, disputeId)).filter((t) => t !== 'dispute.evidence_due_soon');
}

/** A won chargeback's events: each fact once. */
const wonChargebackEvents = ['dispute.created', 'dispute.funds_withdrawn', 'dispute.updated', 'dispute.funds_reinstated', 'dispute.closed'];

const ledgerKeys = async (disputeId: string) =>
  (await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${disputeId} ORDER BY created_at`).map((t) => t.event_key);

/** Runs reconciliationWorkflow over [from, to) at the sandbox, as a Schedule would start it. */
const reconcile = (from: Date, to = new Date(Date.now() + 1)): Promise<ReconciliationResult> =>
  stack.temporal.workflow.execute('reconciliationWorkflow', {
    taskQueue: stack.taskQueue,
    workflowId: uniqueKey('reconciliation'),
    args: [{ providers: ['sandbox'], window: { kind: 'explicit', from: from.toISOString(), to: to.toISOString() } }],
  });

const runFindings = (runId: string) =>
  stack.sql<{ kind: string; subject: string; payment_id: string; provider_reference: string; ours: any; provider_figures: any }[]>`
    SELECT d.kind, d.subject, d.payment_id, d.provider_reference, f.ours, f.provider_figures
    FROM reconciliation_findings f JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id
    WHERE f.run_id = ${runId} ORDER BY d.kind, d.subject`;

const submit = async (row: DisputeRow, text: string) =>
  stack.provider.disputes.updateDispute({ disputeId: row.provider_dispute_id, idempotencyKey: uniqueKey('ev'), evidence: { uncategorized_text: text }, submit: true });

describe('a chargeback is a workflow started by the verified webhook, with the money right at every step', () => {
  it('won: the balance drops by the amount and the fee at the withdrawal and rises by the amount when it is won; each fact posted and sent once', async () => {
    const tenant = await stack.createTenant('disputes');
    const payment = await disputedPayment(tenant);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 10_000 });
    const opened = await disputeOf(payment.id);
    expect(opened).toMatchObject({ tenant_id: tenant.id, provider: 'sandbox', amount_minor: 10_000, currency: 'EUR', reason: 'fraudulent', stage: 'chargeback', workflow_id: disputeWorkflowId('sandbox', opened.provider_dispute_id) });
    await eventually(async () => (await merchantBalance(tenant)).merchant_balance === -1_500, 20_000, 50, 'the withdrawal posted');
    expect(await merchantBalance(tenant)).toMatchObject({ dispute_claim: 10_000, dispute_reserve: 10_000, provider_receivable: -1_500 });

    // The network holds the money: a refund now would pay the customer twice.
    const refund = await apiClient(stack.apiUrl, tenant.apiKey).post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 100 }, uniqueKey());
    expect(refund.status).toBe(409);
    expect(refund.json).toMatchObject({ error: { type: 'payment_disputed' } });

    // The API and the typed client show it, to this tenant only.
    const client = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: stack.apiUrl, baseDelayMs: 50 });
    const shown = await client.disputes.retrieve(opened.id);
    expect(shown).toMatchObject({ id: opened.id, object: 'dispute', payment_id: payment.id, provider: 'sandbox', amount_minor: 10_000, currency: 'EUR', stage: 'chargeback', status: 'needs_response', evidence_submitted_at: null, hold: null });
    expect(Object.keys(shown)).toEqual(['id', 'object', 'payment_id', 'provider', 'amount_minor', 'currency', 'reason', 'stage', 'status', 'evidence_due_by', 'evidence_submitted_at', 'hold', 'created_at', 'updated_at']);
    expect((await client.disputes.list({ payment_id: payment.id })).data.map((d) => d.id)).toEqual([opened.id]);
    expect((await client.disputes.list({ status: 'won' })).data).toEqual([]);
    const stranger = await stack.createTenant('disputes-stranger');
    expect((await apiClient(stack.apiUrl, stranger.apiKey).get(`/v1/disputes/${opened.id}`)).status).toBe(404);
    expect((await new PaymentsClient({ apiKey: stranger.apiKey, baseUrl: stack.apiUrl }).disputes.list()).data).toEqual([]);
    expect((await apiClient(stack.apiUrl, tenant.apiKey).get('/v1/disputes?status=open')).status).toBe(400);

    await submit(opened, 'winning_evidence');
    const won = await eventually(async () => {
      const [row] = await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${opened.id}`;
      return row!.status === 'won' && row;
    }, 20_000, 50, 'won');
    expect(won.evidence_submitted_at).not.toBeNull();
    const events = await closedDisputeEvents(tenant, opened.id);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 8_500, provider_receivable: 8_500, dispute_claim: 0, dispute_reserve: 0 });
    expect(events).toEqual(wonChargebackEvents);
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);
    const result = await stack.temporal.workflow.getHandle(opened.workflow_id).result();
    expect(result).toEqual({ disputeId: opened.id, status: 'won' });
    expect((await client.disputes.list({ status: 'won' })).data.map((d) => d.id)).toEqual([opened.id]);
  });

  it('webhooks duplicated and reordered attach to the same run and post once; a lost one is made good by the run polling the PSP', async () => {
    const tenant = await stack.createTenant('disputes-faults');
    await faults({ duplicate: 1, reorder: 1, reorder_hold_ms: 300 });
    try {
      const payment = await disputedPayment(tenant, 'pm_card_createDispute', 4_000);
      const opened = await disputeOf(payment.id);
      await eventually(async () => (await merchantBalance(tenant)).merchant_balance === -1_500, 20_000, 50, 'the withdrawal posted');
      // From here every webhook is lost: the closing is learned by the run's own poll.
      await faults({ loss: 1 });
      await submit(opened, 'losing_evidence');
      await eventually(async () => (await stack.sql<DisputeRow[]>`SELECT status FROM disputes WHERE id = ${opened.id}`)[0]!.status === 'lost', 20_000, 50, 'lost');
      await eventually(async () => (await eventTypes(tenant, opened.id)).includes('dispute.closed'), 20_000, 50, 'closed event');
      expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: -1_500, dispute_claim: 0, dispute_reserve: 0 });
      expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:loss`]);
      // Whether a poll saw it under review between its lost webhooks is timing: dispute.updated may or may not be among them.
      const types = (await eventTypes(tenant, opened.id)).filter((t) => t !== 'dispute.evidence_due_soon' && t !== 'dispute.updated');
      expect(types).toEqual(['dispute.created', 'dispute.funds_withdrawn', 'dispute.closed']);
      expect((await stack.sql`SELECT 1 FROM disputes WHERE payment_id = ${payment.id}`).length).toBe(1);
      expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    } finally {
      await faults({});
    }
  });

  it('unanswered: a reminder before the deadline, then lost at it (the run asks the PSP when the deadline passes)', async () => {
    const tenant = await stack.createTenant('disputes-deadline');
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 3_000);
    const opened = await disputeOf(payment.id);
    await eventually(async () => (await stack.sql<DisputeRow[]>`SELECT status FROM disputes WHERE id = ${opened.id}`)[0]!.status === 'lost', 20_000, 50, 'lost at the deadline');
    await eventually(async () => (await eventTypes(tenant, opened.id)).includes('dispute.closed'), 20_000, 50, 'closed event');
    expect(await eventTypes(tenant, opened.id)).toEqual(['dispute.created', 'dispute.funds_withdrawn', 'dispute.evidence_due_soon', 'dispute.closed']);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: -1_500 });
  });

  it('an inquiry moves no money until it escalates', async () => {
    const tenant = await stack.createTenant('disputes-inquiry');
    const payment = await disputedPayment(tenant, 'pm_card_createDisputeInquiry', 2_000);
    const opened = await disputeOf(payment.id);
    expect(opened).toMatchObject({ stage: 'inquiry', status: 'needs_response', fee_minor: 0 });
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 2_000 });
    await submit(opened, 'winning_evidence');
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 2_000 });
    expect(await ledgerKeys(opened.id)).toEqual([]);
    expect(await eventTypes(tenant, opened.id)).toEqual(['dispute.created', 'dispute.updated', 'dispute.closed']);
  });

  it('evidence and accept through the API: staged, submitted, won; conceded and lost; each answer replayed byte for byte, refusals 409 with the reason', async () => {
    const tenant = await stack.createTenant('disputes-commands');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 5_000);
    const opened = await disputeOf(payment.id);
    const evidencePath = `/v1/disputes/${opened.id}/evidence`;

    expect((await api.post(evidencePath, { evidence: 'no' }, uniqueKey())).status).toBe(400);
    expect((await api.post(evidencePath, { evidence: { 'Bad Name': 'x' } }, uniqueKey())).status).toBe(400);
    expect((await api.post(`/v1/disputes/dsp_nope/evidence`, { evidence: {} }, uniqueKey())).status).toBe(404);

    const staged = await api.post(evidencePath, { evidence: { uncategorized_text: 'winning_evidence' }, submit: false }, uniqueKey());
    expect(staged.status).toBe(200);
    expect(staged.json).toMatchObject({ id: opened.id, object: 'dispute', status: 'needs_response', evidence_submitted_at: null });
    const key = uniqueKey();
    const submitted = await api.post(evidencePath, { evidence: { product_description: 'a lamp' }, submit: true }, key);
    expect(submitted.status).toBe(200);
    expect(submitted.json).toMatchObject({ status: 'under_review' });
    expect(submitted.json.evidence_submitted_at).not.toBeNull();
    const replayed = await api.post(evidencePath, { evidence: { product_description: 'a lamp' }, submit: true }, key);
    expect(replayed.text).toBe(submitted.text);
    const late = await api.post(evidencePath, { evidence: { uncategorized_text: 'more' }, submit: true }, uniqueKey());
    expect(late.status).toBe(409);
    expect(late.json).toMatchObject({ error: { type: 'dispute_not_open' } });
    // Under review, or already won: the sandbox decides 200 ms after the submission.
    expect(late.json.error.message).toMatch(/under_review|is won/);
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    const [row] = await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${opened.id}`;
    expect(row!.evidence).toEqual({ uncategorized_text: 'winning_evidence', product_description: 'a lamp' });
    expect((await eventTypes(tenant, opened.id)).filter((t) => t === 'dispute.updated').length).toBeGreaterThanOrEqual(2);

    const other = await disputedPayment(tenant, 'pm_card_createDispute', 6_000);
    const conceded = await disputeOf(other.id);
    const acceptKey = uniqueKey();
    const accepted = await api.post(`/v1/disputes/${conceded.id}/accept`, undefined, acceptKey);
    expect(accepted.status).toBe(200);
    expect(accepted.json).toMatchObject({ id: conceded.id, status: 'lost', stage: 'chargeback' });
    expect((await api.post(`/v1/disputes/${conceded.id}/accept`, undefined, acceptKey)).text).toBe(accepted.text);
    // The typed client: a refusal is thrown typed.
    const client = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: stack.apiUrl, baseDelayMs: 50 });
    await expect(client.disputes.accept(conceded.id)).rejects.toMatchObject({ status: 409, type: 'dispute_not_open' });
    await expect(client.disputes.submitEvidence(conceded.id, { evidence: { uncategorized_text: 'late' } })).rejects.toMatchObject({ status: 409, type: 'dispute_not_open' });
    expect(await stack.temporal.workflow.getHandle(conceded.workflow_id).result()).toEqual({ disputeId: conceded.id, status: 'lost' });
    expect(await ledgerKeys(conceded.id)).toEqual([`dispute:${conceded.id}:withdrawal`, `dispute:${conceded.id}:loss`]);
    const stranger = await stack.createTenant('disputes-commands-stranger');
    expect((await apiClient(stack.apiUrl, stranger.apiKey).post(`/v1/disputes/${conceded.id}/accept`, undefined, uniqueKey())).status).toBe(404);
  });

  it('a dispute whose webhooks were all lost is found by the reconciliation run, which starts its workflow', async () => {
    const tenant = await stack.createTenant('disputes-reconciled');
    const from = new Date();
    await faults({ loss: 1 });
    try {
      const payment = await disputedPayment(tenant, 'pm_card_createDispute', 7_000);
      const [charge] = await stack.provider.listChargesByReference(payment.id);
      const atPsp = await eventually(async () => (await stack.provider.disputes.listDisputes({ limit: 100 })).data.find((d) => d.chargeId === charge!.id), 20_000, 50, 'the PSP opened it');
      expect((await stack.sql`SELECT 1 FROM disputes WHERE provider_dispute_id = ${atPsp.id}`).length).toBe(0);
      await reconcile(from);
      const found = await disputeOf(payment.id);
      expect(found).toMatchObject({ provider_dispute_id: atPsp.id, stage: 'chargeback', workflow_id: disputeWorkflowId('sandbox', atPsp.id) });
      await eventually(async () => (await merchantBalance(tenant)).merchant_balance === -1_500, 20_000, 50, 'the withdrawal posted');
    } finally {
      await faults({});
    }
  });
});

/** A card payment, a refund of part or all of it, then the network's chargeback (opened on demand at the sandbox: no race with a timer). */
async function chargebackAfterRefund(tenant: Tenant, amountMinor: number, refundedMinor: number) {
  const payment = await disputedPayment(tenant, 'pm_card_visa', amountMinor);
  const refund = await apiClient(stack.apiUrl, tenant.apiKey).post(`/v1/payments/${payment.id}/refunds`, { amount_minor: refundedMinor }, uniqueKey());
  expect(refund.status).toBe(201);
  expect(refund.json).toMatchObject({ status: 'succeeded', amount_minor: refundedMinor });
  const [charge] = await stack.provider.listChargesByReference(payment.id);
  const opening = await fetch(`${stack.sandboxUrl}/_sandbox/disputes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ charge_id: charge!.id }) });
  expect(opening.status).toBe(200);
  return { payment, charge: charge!, opened: await disputeOf(payment.id) };
}

describe('a payment refunded in full before its dispute came', () => {
  it('the run submits the refund as evidence once and flags the payment for an operator; the network reinstates, so the money leaves once', async () => {
    const tenant = await stack.createTenant('disputes-refunded');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const { payment, charge, opened } = await chargebackAfterRefund(tenant, 9_000, 9_000);
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });

    // At the PSP: the refund is the evidence, submitted once; one refund of the charge.
    const [atPsp] = await stack.sql<{ status: string; evidence: Record<string, string> }[]>`SELECT status, evidence FROM sandbox.disputes WHERE id = ${opened.provider_dispute_id}`;
    expect(atPsp).toEqual({ status: 'won', evidence: refundEvidence(payment.id) });
    const pspEvents = (await (await fetch(`${stack.sandboxUrl}/_sandbox/events?charge=${charge.id}`)).json()) as { data: { type: string }[] };
    expect(pspEvents.data.filter((e) => e.type === 'charge.dispute.updated')).toHaveLength(1);
    expect((await stack.provider.listChargesByReference(payment.id)).map((c) => [c.amountCapturedMinor, c.amountRefundedMinor])).toEqual([[9_000, 9_000]]);

    // The payment is flagged for an operator.
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'refunded', failure: { code: 'needs_operator', message: expect.stringContaining(opened.id) } });

    // Ledger: the capture, the refund, the withdrawal and the reinstatement, each once: the customer has the money once, the merchant bears the fee.
    const keys = (await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE payment_id = ${payment.id} ORDER BY created_at`).map((t) => t.event_key);
    expect(keys.filter((k) => !k.startsWith('dispute:'))).toHaveLength(2);
    expect(keys.filter((k) => k.startsWith('dispute:'))).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: -1_500, provider_receivable: -1_500, dispute_claim: 0, dispute_reserve: 0 });
    await expectLedgerConsistent(stack.sql);
    expect(await closedDisputeEvents(tenant, opened.id)).toEqual(wonChargebackEvents);
    const paymentEvents = await stack.sql<{ type: string; n: number }[]>`
      SELECT type, count(*)::int AS n FROM outbox_events WHERE tenant_id = ${tenant.id} AND payload->'data'->'object'->>'id' = ${payment.id} GROUP BY type`;
    expect(paymentEvents.every((e) => e.n === 1)).toBe(true);
  });
});

describe('a payment refunded in part before its dispute came', () => {
  it('the run submits the partial refund as evidence and flags the payment for an operator with the amount refunded', async () => {
    const tenant = await stack.createTenant('disputes-partly-refunded');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const { payment, opened } = await chargebackAfterRefund(tenant, 3_000, 800);
    expect(opened).toMatchObject({ stage: 'chargeback', amount_minor: 3_000 });
    // The sandbox's network rules for the cardholder unless the charge was refunded in full.
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    const [atPsp] = await stack.sql<{ evidence: Record<string, string>; evidence_submitted_at: Date | null }[]>`
      SELECT evidence, evidence_submitted_at FROM sandbox.disputes WHERE id = ${opened.provider_dispute_id}`;
    expect(atPsp!.evidence).toEqual(refundEvidence(payment.id, { refundedMinor: 800, capturedMinor: 3_000, currency: 'EUR' }));
    expect(atPsp!.evidence.uncategorized_text).toContain('800 of');
    expect(atPsp!.evidence_submitted_at).not.toBeNull();
    const shown = (await api.get(`/v1/payments/${payment.id}`)).json;
    expect(shown).toMatchObject({ status: 'succeeded', amount_refunded_minor: 800, failure: { code: 'needs_operator' } });
    expect(shown.failure.message).toContain(opened.id);
    expect(shown.failure.message).toContain('800 of the payment');
    await expectLedgerConsistent(stack.sql);
  });
});

describe('what one dispute takes', () => {
  // A second API that takes 3 evidence requests and 3 000 bytes per dispute.
  let limited: Awaited<ReturnType<typeof isolatedApi>>;
  beforeAll(async () => {
    limited = await isolatedApi(stack, stack.temporal, { DISPUTE_EVIDENCE_MAX_REQUESTS: 3, DISPUTE_EVIDENCE_MAX_BYTES: 3_000 });
  });
  afterAll(async () => limited?.close());

  /** An open chargeback of a new tenant, and that tenant's client of the limited API. */
  async function openChargeback(name: string, amountMinor: number) {
    const tenant = await stack.createTenant(name);
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', amountMinor);
    return { api: apiClient(limited.url, tenant.apiKey), opened: await disputeOf(payment.id) };
  }

  it('evidence past the requests or bytes one dispute takes: 409 dispute_evidence_limit, recorded under its key, and nothing stored or sent', async () => {
    const { api, opened } = await openChargeback('disputes-limits', 5_500);
    const path = `/v1/disputes/${opened.id}/evidence`;
    const text = (n: number) => 'x'.repeat(n);

    expect((await api.post(path, { evidence: { uncategorized_text: text(1_000) } }, uniqueKey())).status).toBe(200);
    expect((await api.post(path, { evidence: { product_description: text(1_000) } }, uniqueKey())).status).toBe(200);
    // A third request whose bytes would pass the 3 000 the dispute takes.
    const tooBigKey = uniqueKey();
    const tooBig = await api.post(path, { evidence: { customer_name: text(1_500) } }, tooBigKey);
    expect(tooBig.status).toBe(409);
    expect(tooBig.json.error).toMatchObject({ type: 'dispute_evidence_limit' });
    expect(tooBig.json.error.message).toContain('bytes');
    // Recorded: the same request is answered the same, even once there would be room.
    const replayed = await api.post(path, { evidence: { customer_name: text(1_500) } }, tooBigKey);
    expect(replayed.text).toBe(tooBig.text);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');

    const [counted] = await stack.sql<{ evidence_requests: number; evidence: Record<string, string> }[]>`SELECT evidence_requests, evidence FROM disputes WHERE id = ${opened.id}`;
    expect(counted).toEqual({ evidence_requests: 2, evidence: { uncategorized_text: text(1_000), product_description: text(1_000) } });
    expect((await stack.sql`SELECT 1 FROM dispute_evidence WHERE dispute_id = ${opened.id}`).length).toBe(2);
    const [atPsp] = await stack.sql<{ evidence: Record<string, string> }[]>`SELECT evidence FROM sandbox.disputes WHERE id = ${opened.provider_dispute_id}`;
    expect(Object.keys(atPsp!.evidence).sort()).toEqual(['product_description', 'uncategorized_text']);

    // The third request that fits; the fourth is past the number of requests.
    expect((await api.post(path, { evidence: { customer_name: 'Jane' } }, uniqueKey())).status).toBe(200);
    const fourth = await api.post(path, { evidence: { customer_email_address: 'jane@example.com' } }, uniqueKey());
    expect(fourth.status).toBe(409);
    expect(fourth.json.error).toMatchObject({ type: 'dispute_evidence_limit' });
    expect(fourth.json.error.message).toContain('3 evidence requests');
    const [after] = await stack.sql<{ evidence_requests: number; evidence: Record<string, string> }[]>`SELECT evidence_requests, evidence FROM disputes WHERE id = ${opened.id}`;
    expect(after!.evidence_requests).toBe(3);
    expect(after!.evidence).not.toHaveProperty('customer_email_address');

    // The run's history holds digests, never the evidence: each accepted update's arguments
    // (encrypted, so measured, not read) are far smaller than the 1 000 characters of evidence it carried.
    const events = (await stack.temporal.workflow.getHandle(opened.workflow_id).fetchHistory()).events ?? [];
    const updateArgs = events.flatMap((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.args?.payloads ?? []);
    expect(updateArgs.length).toBe(3);
    for (const payload of updateArgs) expect(payload.data?.length ?? 0).toBeLessThan(1_000);
  });

  it('concurrent evidence requests cannot overrun the limit: as many succeed as it allows', async () => {
    const { api, opened } = await openChargeback('disputes-limits-race', 5_600);
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => api.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { uncategorized_text: `note ${i}` } }, uniqueKey())),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 409, 409, 409]);
    const [counted] = await stack.sql<{ evidence_requests: number }[]>`SELECT evidence_requests FROM disputes WHERE id = ${opened.id}`;
    expect(counted!.evidence_requests).toBe(3);
  });

  it('an evidence key "__proto__" is refused like a metadata key, by name', async () => {
    const tenant = await stack.createTenant('disputes-proto');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 5_700);
    const opened = await disputeOf(payment.id);
    const refused = await api.request('POST', `/v1/disputes/${opened.id}/evidence`, { rawBody: '{"evidence":{"__proto__":"x","uncategorized_text":"y"}}', headers: { 'content-type': 'application/json' }, key: uniqueKey() });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.json.error)).toContain('evidence key \\"__proto__\\" is reserved');
    const [row] = await stack.sql<{ evidence_requests: number; evidence: Record<string, string> }[]>`SELECT evidence_requests, evidence FROM disputes WHERE id = ${opened.id}`;
    expect(row).toEqual({ evidence_requests: 0, evidence: {} });
  });
});

describe('a dispute whose run ended while the PSP had not closed it', () => {
  it('terminated: the next evidence starts the run again and reaches the PSP (no 409); the next webhook starts it again too', async () => {
    const tenant = await stack.createTenant('disputes-terminated');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 5_800);
    const opened = await disputeOf(payment.id);
    const handle = stack.temporal.workflow.getHandle(opened.workflow_id);
    // The dispute's opening webhooks first (each reaches the run through its event's workflow,
    // which would start the run again right after the cut): every one delivered.
    await eventually(async () => (await stack.sql`SELECT 1 FROM sandbox.events WHERE charge_id = ${opened.provider_charge_id} AND state = 'pending'`).length === 0, 20_000, 50, 'the opening delivered');
    const firstRun = (await handle.describe()).runId;
    await handle.terminate('the run is cut short');
    // A report still on its way (its event's workflow outlasting the route's wait) may start the
    // run again at once: cut that one short too, until the latest run is the terminated one.
    await eventually(async () => {
      const described = await handle.describe();
      if (described.status.name === 'TERMINATED') return true;
      await handle.terminate('the run is cut short').catch(() => undefined);
      return false;
    }, 20_000, 100, 'the run terminated');

    const key = uniqueKey();
    const send = () => api.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { product_description: 'a lamp' }, submit: false }, key);
    const staged = await eventually(async () => {
      const answer = await send();
      expect([200, 202, 503]).toContain(answer.status);
      return answer.status === 200 && answer;
    }, 20_000, 200, 'the evidence answered');
    expect(staged.json).toMatchObject({ id: opened.id, status: 'needs_response' });
    const restarted = await handle.describe();
    expect(restarted.runId).not.toBe(firstRun);
    expect(restarted.status.name).toBe('RUNNING');
    const [atPsp] = await stack.sql<{ evidence: Record<string, string> }[]>`SELECT evidence FROM sandbox.disputes WHERE id = ${opened.provider_dispute_id}`;
    expect(atPsp!.evidence).toMatchObject({ product_description: 'a lamp' });

    // Cut short again: the PSP's next webhook (the dispute decided) starts it again, and it records the decision.
    await handle.terminate('the run is cut short again');
    await submit(opened, 'winning_evidence');
    await eventually(async () => (await stack.sql<DisputeRow[]>`SELECT status FROM disputes WHERE id = ${opened.id}`)[0]!.status === 'won', 20_000, 50, 'won');
    expect(await handle.result()).toEqual({ disputeId: opened.id, status: 'won' });
    // The decision's other webhooks may come after the run closed (each reaches it through its
    // event's workflow): one that does starts a run that records it and ends (§3.6.1, 2). Once
    // every one is delivered (each answered after its report reached the run), the run is closed.
    await eventually(async () => (await stack.sql`SELECT 1 FROM sandbox.events WHERE charge_id = ${opened.provider_charge_id} AND state = 'pending'`).length === 0, 20_000, 50, 'the decision delivered');
    const settled = await eventually(async () => {
      const described = await handle.describe();
      return described.status.name === 'COMPLETED' && described;
    }, 20_000, 50, 'the run closed');
    // Closed by the PSP: a command now is refused as closed, and no run is started for it.
    const late = await api.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { uncategorized_text: 'more' } }, uniqueKey());
    expect(late.status).toBe(409);
    expect(late.json.error).toMatchObject({ type: 'dispute_not_open' });
    const after = await handle.describe();
    expect({ runId: after.runId, status: after.status.name }).toEqual({ runId: settled.runId, status: 'COMPLETED' });
  });
});

describe('the sweeper starts again the run of a dispute the PSP has not closed', () => {
  it('terminated with no webhook or command to follow: the sweep starts it again, leaves running ones alone, and the new run records the decision', async () => {
    const tenant = await stack.createTenant('disputes-swept');
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 5_900);
    const opened = await disputeOf(payment.id);
    const handle = stack.temporal.workflow.getHandle(opened.workflow_id);
    const firstRun = (await handle.describe()).runId;
    // A running run is left alone.
    await stack.abandonedRuns.runOnce(200, 0);
    expect((await handle.describe()).runId).toBe(firstRun);

    await handle.terminate('the run is cut short');
    await stack.abandonedRuns.runOnce(200, 0);
    const restarted = await handle.describe();
    expect(restarted.runId).not.toBe(firstRun);
    expect(restarted.status.name).toBe('RUNNING');
    // The PSP decides while every webhook is lost: the new run's own look at the PSP records it.
    await faults({ loss: 1 });
    try {
      await submit(opened, 'winning_evidence');
      expect(await handle.result()).toEqual({ disputeId: opened.id, status: 'won' });
    } finally {
      await faults({});
    }
    await stack.abandonedRuns.runOnce(200, 0);
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    await expectLedgerConsistent(stack.sql, tenant.id);
  });
});

describe('reconciliation compares a dispute’s money with the PSP’s dispute lines', () => {
  it('a won chargeback reconciles clean; the PSP’s reinstatement line altered, the run finds an amount_mismatch for that dispute with both sides’ figures', async () => {
    const tenant = await stack.createTenant('disputes-reconciliation');
    const from = new Date();
    const payment = await disputedPayment(tenant, 'pm_card_createDispute', 8_000);
    const opened = await disputeOf(payment.id);
    await eventually(async () => (await ledgerKeys(opened.id)).length === 1, 20_000, 50, 'the withdrawal posted');
    await submit(opened, 'winning_evidence');
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);
    const to = new Date(Date.now() + 1);

    const clean = await reconcile(from, to);
    expect(clean.runs).toEqual([expect.objectContaining({ provider: 'sandbox', status: 'clean', discrepancyCount: 0 })]);

    await stack.sql`UPDATE sandbox.balance_transactions SET amount_minor = 7000 WHERE source = ${opened.provider_dispute_id} AND type = 'dispute_reversal'`;
    const tampered = await reconcile(from, to);
    expect(tampered.runs).toEqual([expect.objectContaining({ status: 'discrepancies', discrepancyCount: 1 })]);
    expect(await runFindings(tampered.runs[0]!.runId)).toEqual([
      expect.objectContaining({
        kind: 'amount_mismatch',
        subject: opened.id,
        payment_id: payment.id,
        provider_reference: opened.provider_dispute_id,
        ours: expect.objectContaining({ object: 'dispute', amount_minor: 8_000, fee_minor: 1_500, ledger_withdrawal_minor: -9_500, ledger_reinstatement_minor: 8_000 }),
        provider_figures: expect.objectContaining({ type: 'dispute_reversal', source: opened.provider_dispute_id, amount_minor: 7_000 }),
      }),
    ]);
  });
});
