import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { DISPUTES_PATH, type DisputeMoneyMovement } from '../../doubles/adyen/disputes';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import type { DisputeRow } from '../../domain/resources';
import { AdyenProvider } from '../../provider/adyen/client';
import { adyen } from '../../provider/adyen/library';
import { disputeEventTypes, eurBalances } from '../helpers/disputes';
import { expectLedgerConsistent } from '../helpers/effects';
import { apiClient, decidedPayment, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { adyenPspReference } from '../helpers/adyen';

/**
 * Disputes at Adyen on the real stack (Temporal dev server, PostgreSQL, a worker whose registry
 * has `adyen-test`: the client through the official library against the Adyen double). The
 * double disputes the captured payment of `pm_card_createDispute` (NOTIFICATION_OF_CHARGEBACK,
 * then CHARGEBACK), signed and batched to /provider_webhooks/adyen-test; the notification is the
 * dispute (the kind's disputeSource `notification`: Adyen has no read of one), and the run never
 * asks the PSP. Evidence goes through the Disputes service (reasons, a document, the defence),
 * decided by the sandbox's rule: the defence reverses the chargeback (CHARGEBACK_REVERSED, won),
 * and a losing one is then taken again by the issuer (SECOND_CHARGEBACK: the second round, lost);
 * an acceptance closes it lost; an undefended one is lost when its defence period ends.
 */
const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
/** The double's defence period: long enough for a test's evidence, short enough to wait for its end. */
const DEFENSE_WINDOW_MS = 12_000;
let double: AdyenDouble;
let stack: TestStack;
const route: RoutePlanner = async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' });

beforeAll(async () => {
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, disputes: { openAfterMs: 100, decisionMs: 200, defenseWindowMs: DEFENSE_WINDOW_MS } });
  const client = new AdyenProvider({ baseUrl: double.url, disputesUrl: double.disputesUrl, apiKey, merchantAccount, hmacKey, timeoutMs: 1500 });
  stack = await startStack({ route, extraProviders: { 'adyen-test': client }, api: { IDEMPOTENCY_WAIT_MS: 3000, DISPUTE_REMINDER_SECONDS: [4], DISPUTE_POLL_SECONDS: 1 } });
  double.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/adyen-test`);
}, 300_000);
afterAll(async () => {
  await stack?.stop();
  await double?.close();
});

const faults = async (f: Record<string, number>) => {
  const response = await fetch(`${double.url}/_sandbox/webhook_faults`, { method: 'POST', body: JSON.stringify(f) });
  expect(response.status).toBe(200);
};

async function disputedPayment(tenant: Tenant, amountMinor: number) {
  const api = apiClient(stack.apiUrl, tenant.apiKey);
  const paid = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: amountMinor, currency: 'EUR', payment_method: 'pm_card_createDispute' }, uniqueKey('pay'));
  // 202 when the worker is slower than the API's wait (a busy machine): the payment is decided later.
  expect([201, 202], paid.text).toContain(paid.status);
  const payment = paid.status === 201 ? paid.json : await decidedPayment(api, paid.json.id);
  expect(payment).toMatchObject({ status: 'succeeded', provider: 'adyen-test' });
  return payment as { id: string; provider_charge_id: string };
}

/** The dispute once its CHARGEBACK is recorded (the funds withdrawn). */
const chargebackOf = (paymentId: string) =>
  eventually(async () => {
    const [row] = await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${paymentId}`;
    return row?.stage === 'chargeback' && row;
  }, 20_000, 50, 'the chargeback recorded');

const statusOf = async (disputeId: string) => (await stack.sql<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${disputeId}`)[0]!;

/** The dispute once its second round (pre_arbitration) is recorded. */
const secondRoundOf = (disputeId: string) =>
  eventually(async () => {
    const row = await statusOf(disputeId);
    return row.stage === 'pre_arbitration' && row;
  }, 20_000, 50, 'the second round recorded');

/** A tenant's payment disputed at adyen-test, its chargeback recorded, then defended with `text` as its evidence. */
async function defendedChargeback(tenantName: string, amountMinor: number, text: string) {
  const tenant = await stack.createTenant(tenantName);
  const api = apiClient(stack.apiUrl, tenant.apiKey);
  const payment = await disputedPayment(tenant, amountMinor);
  const opened = await chargebackOf(payment.id);
  const submitted = await api.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { uncategorized_text: text }, submit: true }, uniqueKey());
  expect(submitted.status, submitted.text).toBe(200);
  return { tenant, api, payment, opened };
}

const merchantBalance = (tenant: Tenant) => eurBalances(stack, tenant);
/** The dispute's events, its reminders aside. */
const eventTypes = async (tenant: Tenant, disputeId: string) => (await disputeEventTypes(stack, tenant, disputeId)).filter((t) => t !== 'dispute.evidence_due_soon');

const ledgerKeys = async (disputeId: string) =>
  (await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${disputeId} ORDER BY created_at`).map((t) => t.event_key);

/** The activities the dispute's runs scheduled, by type. */
async function activitiesOf(workflowId: string): Promise<string[]> {
  const history = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => (e.activityTaskScheduledEventAttributes?.activityType?.name ? [e.activityTaskScheduledEventAttributes.activityType.name] : []));
}

const movementsOf = (dispute: DisputeRow): Pick<DisputeMoneyMovement, 'type' | 'amountMinor'>[] =>
  double
    .disputeMovements()
    .filter((m) => m.pspReference === dispute.provider_dispute_id)
    .map((m) => {
      expect(m).toMatchObject({ originalReference: dispute.provider_charge_id, merchantReference: dispute.payment_id, currency: 'EUR' });
      return { type: m.type, amountMinor: m.amountMinor };
    });

const validator = new adyen.hmacValidator();

/** A dispute notification as Adyen would sign and send it for the recorded dispute. */
function signedDisputeItem(dispute: DisputeRow, eventCode: string): Record<string, unknown> {
  const item = {
    amount: { currency: dispute.currency, value: dispute.amount_minor },
    eventCode,
    eventDate: new Date().toISOString(),
    merchantAccountCode: merchantAccount,
    merchantReference: dispute.payment_id,
    pspReference: dispute.provider_dispute_id,
    originalReference: dispute.provider_charge_id,
    reason: '',
    success: 'true',
  };
  const data = { defensePeriodEndsAt: dispute.evidence_due_by.toISOString(), chargebackReasonCode: dispute.reason, disputeStatus: eventCode === 'CHARGEBACK_REVERSED' ? 'Won' : 'Lost' };
  return { ...item, additionalData: { ...data, hmacSignature: validator.calculateHmac({ ...item, additionalData: data } as never, hmacKey) } };
}

const postNotification = (item: unknown) =>
  fetch(`${stack.apiUrl}/provider_webhooks/adyen-test`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: item }] }) }).then(async (r) => ({
    status: r.status,
    text: await r.text(),
  }));

/** Waits until the latest run under the dispute's workflow id has completed. */
const latestRunCompleted = (workflowId: string) =>
  eventually(async () => (await stack.temporal.workflow.getHandle(workflowId).describe()).status.name === 'COMPLETED', 20_000, 50, 'the latest run completed');

const wonChargebackEvents = ['dispute.created', 'dispute.funds_withdrawn', 'dispute.updated', 'dispute.funds_reinstated', 'dispute.closed'];

describe('a disputed payment at adyen-test', () => {
  afterEach(async () => faults({}));

  it('opens a dispute shown by our API; evidence staged then submitted wins (CHARGEBACK_REVERSED): the money withdrawn and given back, each fact once, and the run never asks Adyen', async () => {
    const tenant = await stack.createTenant('adyen-dispute-won');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const payment = await disputedPayment(tenant, 10_000);
    const opened = await chargebackOf(payment.id);
    expect(opened).toMatchObject({ provider: 'adyen-test', provider_charge_id: payment.provider_charge_id, amount_minor: 10_000, currency: 'EUR', reason: '10.4', status: 'needs_response', fee_minor: 0 });
    // Adyen's deadline: the defence period its notifications carry.
    expect(Math.abs(opened.evidence_due_by.getTime() - (opened.created_at.getTime() + DEFENSE_WINDOW_MS))).toBeLessThan(5_000);
    const shown = await api.get(`/v1/disputes/${opened.id}`);
    expect(shown.json).toMatchObject({ id: opened.id, object: 'dispute', payment_id: payment.id, provider: 'adyen-test', amount_minor: 10_000, stage: 'chargeback', status: 'needs_response', evidence_submitted_at: null });
    await eventually(async () => (await merchantBalance(tenant)).merchant_balance === 0, 20_000, 50, 'the withdrawal posted');
    expect(await merchantBalance(tenant)).toMatchObject({ dispute_claim: 10_000, dispute_reserve: 10_000 });

    const evidencePath = `/v1/disputes/${opened.id}/evidence`;
    const staged = await api.post(evidencePath, { evidence: { uncategorized_text: 'winning_evidence' }, submit: false }, uniqueKey());
    expect(staged.status, staged.text).toBe(200);
    expect(staged.json).toMatchObject({ status: 'needs_response', evidence_submitted_at: null });
    const key = uniqueKey();
    const submitted = await api.post(evidencePath, { evidence: { product_description: 'a lamp' }, submit: true }, key);
    expect(submitted.status, submitted.text).toBe(200);
    expect(submitted.json).toMatchObject({ status: 'under_review' });
    expect(submitted.json.evidence_submitted_at).not.toBeNull();
    expect((await api.post(evidencePath, { evidence: { product_description: 'a lamp' }, submit: true }, key)).text).toBe(submitted.text);

    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    const won = await statusOf(opened.id);
    expect(won).toMatchObject({ stage: 'chargeback', status: 'won', evidence: { uncategorized_text: 'winning_evidence', product_description: 'a lamp' } });
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 10_000, dispute_claim: 0, dispute_reserve: 0 });
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);
    await eventually(async () => (await eventTypes(tenant, opened.id)).includes('dispute.closed'), 20_000, 50, 'closed event');
    expect((await eventTypes(tenant, opened.id)).filter((t, i, all) => t !== 'dispute.updated' || all.indexOf(t) === i)).toEqual(wonChargebackEvents);
    await expectLedgerConsistent(stack.sql, tenant.id);
    expect(movementsOf(opened)).toEqual([
      { type: 'Chargeback', amountMinor: -10_000 },
      { type: 'ChargebackReversed', amountMinor: 10_000 },
    ]);
    // The notification was the dispute: no activity read it from Adyen, on a schedule or at a deadline.
    expect(await activitiesOf(opened.workflow_id)).not.toContain('retrieveDispute');
    // Decided: Adyen takes no more evidence, and the answer says why.
    const late = await api.post(evidencePath, { evidence: { uncategorized_text: 'more' }, submit: true }, uniqueKey());
    expect(late.status).toBe(409);
    expect(late.json).toMatchObject({ error: { type: 'dispute_not_open' } });
  });

  it('losing evidence: the defence reverses the chargeback, then the issuer\'s SECOND_CHARGEBACK takes it again: the dispute ends pre_arbitration lost, the money withdrawn twice and given back once, each fact once', async () => {
    const { tenant, api, payment, opened } = await defendedChargeback('adyen-dispute-lost', 4_000, 'losing_evidence');
    expect(await secondRoundOf(opened.id)).toMatchObject({ status: 'lost', amount_minor: 4_000, fee_minor: 0 });
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    expect(await ledgerKeys(opened.id)).toEqual(['withdrawal', 'reinstatement', 'second_withdrawal', 'loss'].map((fact) => `dispute:${opened.id}:${fact}`));
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 0, dispute_claim: 0, dispute_reserve: 0 });
    await expectLedgerConsistent(stack.sql, tenant.id);
    expect(movementsOf(opened)).toEqual([
      { type: 'Chargeback', amountMinor: -4_000 },
      { type: 'ChargebackReversed', amountMinor: 4_000 },
      { type: 'SecondChargeback', amountMinor: -4_000 },
    ]);
    const kept = (await (await fetch(`${double.url}/_sandbox/events?charge=${payment.provider_charge_id}`)).json()) as { data: { type: string }[] };
    expect(kept.data.map((k) => k.type)).toEqual(['AUTHORISATION', 'NOTIFICATION_OF_CHARGEBACK', 'CHARGEBACK', 'CHARGEBACK_REVERSED', 'SECOND_CHARGEBACK']);
    await eventually(async () => (await eventTypes(tenant, opened.id)).filter((t) => t === 'dispute.closed').length === 2, 20_000, 50, 'the second closing event');
    expect((await eventTypes(tenant, opened.id)).filter((t, i, all) => t !== 'dispute.updated' || all.indexOf(t) === i)).toEqual([
      ...wonChargebackEvents,
      'dispute.funds_withdrawn',
      'dispute.closed',
    ]);
    const shown = await api.get(`/v1/disputes/${opened.id}`);
    expect(shown.json).toMatchObject({ stage: 'pre_arbitration', status: 'lost' });
  });

  it('a chargeback won, its run ended, then the issuer\'s SECOND_CHARGEBACK: a new run records the second round, and the reversal delivered again changes nothing', async () => {
    const { tenant, api, payment, opened } = await defendedChargeback('adyen-dispute-second-round', 2_500, 'winning_evidence');
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 2_500 });

    const second = await postNotification(signedDisputeItem(opened, 'SECOND_CHARGEBACK'));
    expect(second, 'Adyen\'s acknowledgement').toEqual({ status: 200, text: '[accepted]' });
    expect(await secondRoundOf(opened.id)).toMatchObject({ status: 'lost' });
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    // A refund of the payment may not give back what the network took twice.
    const refund = await api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 2_500 }, uniqueKey());
    expect(refund.status, refund.text).toBe(409);
    expect(refund.json).toMatchObject({ error: { type: 'payment_disputed', amount_refundable_minor: 0 } });

    expect((await postNotification(signedDisputeItem(opened, 'CHARGEBACK_REVERSED'))).status).toBe(200);
    await eventually(async () => (await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND event_id LIKE ${`${opened.provider_dispute_id}:CHARGEBACK_REVERSED:%`}`).length >= 1, 20_000, 50, 'the reversal stored');
    await latestRunCompleted(opened.workflow_id);
    expect(await statusOf(opened.id)).toMatchObject({ stage: 'pre_arbitration', status: 'lost' });
    expect(await ledgerKeys(opened.id)).toEqual(['withdrawal', 'reinstatement', 'second_withdrawal', 'loss'].map((fact) => `dispute:${opened.id}:${fact}`));
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 0, dispute_claim: 0, dispute_reserve: 0 });
    await expectLedgerConsistent(stack.sql, tenant.id);
  });

  it('the second round delivered before the reversal (reordered): the money withdrawn once and written off, never given back', async () => {
    const tenant = await stack.createTenant('adyen-dispute-second-first');
    const payment = await disputedPayment(tenant, 1_500);
    const opened = await chargebackOf(payment.id);
    expect((await postNotification(signedDisputeItem(opened, 'SECOND_CHARGEBACK'))).status).toBe(200);
    expect(await secondRoundOf(opened.id)).toMatchObject({ status: 'lost' });
    expect((await postNotification(signedDisputeItem(opened, 'CHARGEBACK_REVERSED'))).status).toBe(200);
    await eventually(async () => (await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND event_id LIKE ${`${opened.provider_dispute_id}:CHARGEBACK_REVERSED:%`}`).length === 1, 20_000, 50, 'the reversal stored');
    await latestRunCompleted(opened.workflow_id);
    expect(await statusOf(opened.id)).toMatchObject({ stage: 'pre_arbitration', status: 'lost' });
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:loss`]);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 0, dispute_claim: 0, dispute_reserve: 0 });
    await expectLedgerConsistent(stack.sql, tenant.id);
  });

  it('accepted through the API: lost at once (acceptDispute), replayed byte for byte, a second acceptance 409; Adyen\'s DISPUTE_DEFENSE_PERIOD_ENDED changes nothing', async () => {
    const tenant = await stack.createTenant('adyen-dispute-accepted');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const payment = await disputedPayment(tenant, 6_000);
    const opened = await chargebackOf(payment.id);
    const key = uniqueKey();
    const accepted = await api.post(`/v1/disputes/${opened.id}/accept`, undefined, key);
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.json).toMatchObject({ id: opened.id, stage: 'chargeback', status: 'lost' });
    expect((await api.post(`/v1/disputes/${opened.id}/accept`, undefined, key)).text).toBe(accepted.text);
    expect((await api.post(`/v1/disputes/${opened.id}/accept`, undefined, uniqueKey())).status).toBe(409);
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    await eventually(async () => (await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND event_id = ${`${opened.provider_dispute_id}:DISPUTE_DEFENSE_PERIOD_ENDED:true`}`).length === 1, 20_000, 50, 'the period-ended notification stored');
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:loss`]);
    expect(await eventTypes(tenant, opened.id)).toEqual(['dispute.created', 'dispute.funds_withdrawn', 'dispute.closed']);
    expect(movementsOf(opened)).toEqual([{ type: 'Chargeback', amountMinor: -6_000 }]);
  });

  it('unanswered: a reminder before Adyen\'s deadline, then lost by its DISPUTE_DEFENSE_PERIOD_ENDED (the run does not ask Adyen at the deadline)', async () => {
    const tenant = await stack.createTenant('adyen-dispute-expired');
    const payment = await disputedPayment(tenant, 3_000);
    const opened = await chargebackOf(payment.id);
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
    expect(await disputeEventTypes(stack, tenant, opened.id)).toEqual(['dispute.created', 'dispute.funds_withdrawn', 'dispute.evidence_due_soon', 'dispute.closed']);
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:loss`]);
    expect(await activitiesOf(opened.workflow_id)).not.toContain('retrieveDispute');
  }, 60_000);

  it('notifications duplicated and reordered: one dispute, one run, each posting once, and it still ends won', async () => {
    const tenant = await stack.createTenant('adyen-dispute-faults');
    await faults({ duplicate: 1, reorder: 1, reorder_hold_ms: 300 });
    const payment = await disputedPayment(tenant, 5_000);
    const opened = await chargebackOf(payment.id);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const submitted = await api.post(`/v1/disputes/${opened.id}/evidence`, { evidence: { uncategorized_text: 'winning_evidence' }, submit: true }, uniqueKey());
    expect(submitted.status, submitted.text).toBe(200);
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'won' });
    // Every notification delivered (twice), each stored once by its id.
    await eventually(async () => {
      const kept = (await (await fetch(`${double.url}/_sandbox/events?charge=${payment.provider_charge_id}`)).json()) as { data: { type: string; state: string; attempts: number }[] };
      return kept.data.length === 4 && kept.data.every((k) => k.state === 'delivered' && k.attempts >= 2);
    }, 20_000, 50, 'every notification delivered twice');
    const stored = await stack.sql<{ event_id: string }[]>`SELECT event_id FROM provider_events WHERE provider = 'adyen-test' AND split_part(event_id, ':', 1) = ${opened.provider_dispute_id}`;
    expect(stored.map((s) => s.event_id.split(':')[1]).sort()).toEqual(['CHARGEBACK', 'CHARGEBACK_REVERSED', 'NOTIFICATION_OF_CHARGEBACK']);
    expect(await stack.sql`SELECT 1 FROM disputes WHERE payment_id = ${payment.id}`).toHaveLength(1);
    expect(await ledgerKeys(opened.id)).toEqual([`dispute:${opened.id}:withdrawal`, `dispute:${opened.id}:reinstatement`]);
    expect(await merchantBalance(tenant)).toMatchObject({ merchant_balance: 5_000, dispute_claim: 0, dispute_reserve: 0 });
  });
});

describe('a hostile dispute notification at /provider_webhooks/adyen-test', () => {
  const dispute = (fields: Record<string, unknown> = {}) => {
    const item = {
      amount: { currency: 'EUR', value: 900_000 },
      eventCode: 'CHARGEBACK',
      eventDate: new Date().toISOString(),
      merchantAccountCode: merchantAccount,
      merchantReference: 'pay_forged',
      pspReference: adyenPspReference(),
      originalReference: adyenPspReference(),
      reason: '',
      success: 'true',
      ...fields,
    } as Record<string, unknown>;
    const data = { defensePeriodEndsAt: new Date(Date.now() + 60_000).toISOString(), ...(fields.additionalData as object) };
    return { ...item, additionalData: { ...data, hmacSignature: validator.calculateHmac({ ...item, additionalData: data } as never, hmacKey) } } as Record<string, unknown>;
  };
  const post = (item: unknown) =>
    fetch(`${stack.apiUrl}/provider_webhooks/adyen-test`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: item }] }) }).then(async (r) => ({
      status: r.status,
      json: (await r.json()) as { error: { type: string; issues?: { path: string }[] } },
    }));
  const nothingStored = async (item: { pspReference?: unknown }) => {
    expect(await stack.sql`SELECT 1 FROM provider_events WHERE provider = 'adyen-test' AND split_part(event_id, ':', 1) = ${String(item.pspReference)}`).toEqual([]);
    expect(await stack.sql`SELECT 1 FROM disputes WHERE provider = 'adyen-test' AND provider_dispute_id = ${String(item.pspReference)}`).toEqual([]);
  };

  it.each([
    { what: 'without the disputed payment (originalReference)', fields: { originalReference: undefined }, path: 'originalReference' },
    { what: 'whose defence period ends at no time', fields: { additionalData: { defensePeriodEndsAt: 'in a week' } }, path: 'additionalData.defensePeriodEndsAt' },
    { what: 'whose reason code is not text', fields: { additionalData: { chargebackReasonCode: 104 } }, path: 'additionalData.chargebackReasonCode' },
  ])('signed, $what: 400 invalid_request naming the field, and nothing stored', async ({ fields, path }) => {
    const item = dispute(fields);
    const answer = await post(item);
    expect(answer.status).toBe(400);
    expect(answer.json.error.type).toBe('invalid_request');
    expect(answer.json.error.issues?.map((i) => i.path)).toEqual([`notificationItems.0.NotificationRequestItem.${path}`]);
    await nothingStored(item);
  });

  it('a well-formed dispute signed with another key: 400 webhook_signature_invalid, nothing stored', async () => {
    const item = dispute();
    (item.additionalData as Record<string, unknown>).hmacSignature = validator.calculateHmac(item as never, 'AB'.repeat(32));
    const answer = await post(item);
    expect(answer.status).toBe(400);
    expect(answer.json.error.type).toBe('webhook_signature_invalid');
    await nothingStored(item);
  });
});

describe('the double\'s Disputes service', () => {
  const call = (operation: string, body: unknown, key?: string) =>
    fetch(`${double.url}${DISPUTES_PATH}/v30/${operation}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, ...(key ? { 'Idempotency-Key': key } : {}) },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));

  it('checks each body with the library\'s model, answers an unknown dispute unsuccessful, and replays a key\'s first answer', async () => {
    expect(await call('defendDispute', { disputePspReference: 'X', merchantAccountCode: merchantAccount, defenseReasonCode: 'SupplyDefenseMaterial', evidence: 'x' })).toMatchObject({ status: 400, json: { errorCode: '702' } });
    expect(await call('defendDispute', { disputePspReference: 'X', merchantAccountCode: merchantAccount })).toMatchObject({ status: 422, json: { errorCode: '100' } });
    const badDocument = { disputePspReference: 'X', merchantAccountCode: merchantAccount, defenseDocuments: [{ defenseDocumentTypeCode: 'DefenseMaterial', contentType: 'application/pdf' }] };
    expect(await call('supplyDefenseDocument', badDocument)).toMatchObject({ status: 422, json: { errorCode: '100', message: expect.stringContaining('defenseDocuments[0].content') } });
    expect(await call('acceptDispute', { disputePspReference: 'X', merchantAccountCode: 'Another' })).toMatchObject({ status: 403 });
    expect(await call('acceptDispute', { disputePspReference: 'X', merchantAccountCode: merchantAccount })).toEqual({ status: 200, json: { disputeServiceResult: { success: false, errorMessage: 'Dispute not found' } } });
    expect(await call('closeDispute', { disputePspReference: 'X', merchantAccountCode: merchantAccount })).toMatchObject({ status: 404 });

    const tenant = await stack.createTenant('adyen-dispute-double');
    const payment = await disputedPayment(tenant, 2_000);
    const opened = await chargebackOf(payment.id);
    const key = uniqueKey('accept');
    const accepted = await call('acceptDispute', { disputePspReference: opened.provider_dispute_id, merchantAccountCode: merchantAccount }, key);
    expect(accepted).toEqual({ status: 200, json: { disputeServiceResult: { success: true } } });
    expect(await call('acceptDispute', { disputePspReference: opened.provider_dispute_id, merchantAccountCode: merchantAccount }, key)).toEqual(accepted);
    expect(await call('acceptDispute', { disputePspReference: opened.provider_dispute_id, merchantAccountCode: merchantAccount }, uniqueKey('accept'))).toMatchObject({ json: { disputeServiceResult: { success: false } } });
    // Its DISPUTE_DEFENSE_PERIOD_ENDED closes our dispute lost.
    expect(await stack.temporal.workflow.getHandle(opened.workflow_id).result()).toEqual({ disputeId: opened.id, status: 'lost' });
  });
});
