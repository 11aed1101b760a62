import { expect } from 'vitest';
import { completeChallenge, sandboxControls } from '../../../testkit/sandbox';
import { expectLedgerConsistent } from '../../helpers/effects';
import type { KindUnderTest, PspCharge, RunningKind } from '../../helpers/kinds';
import { decidedPayment, eventually, uniqueKey, type TestStack } from '../../helpers/stack';

/**
 * The integration flows every kind runs, each declared once with what it needs of a kind: a
 * capability of its descriptor, or one of our test payment methods its PSP for tests has
 * (test/helpers/kinds.ts). kinds.test.ts registers each flow at every kind that has what it
 * needs, and no other: a flow a kind cannot run is not there at all. Every flow asserts at the
 * PSP's side too (the charges it made, what it captured and refunded), not only at our API.
 */
export interface Flow {
  name: string;
  /** What the flow needs of a kind, in words (the test's name says it). */
  needs: string;
  /** Whether the kind has it: its capabilities, its test payment methods. */
  runsAt(kind: KindUnderTest): boolean;
  run(kind: RunningKind, stack: TestStack): Promise<void>;
}

const RETURN_URL = 'http://127.0.0.1:9/return';
const body = (paymentMethod: string, extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: paymentMethod, ...extra });
const has = (paymentMethod: string) => (kind: KindUnderTest) => kind.paymentMethods.includes(paymentMethod);
const succeededAt = (capturedMinor: number, refundedMinor = 0): PspCharge => ({ status: 'succeeded', capturedMinor, refundedMinor });

/** How many of each event type was sent for one object (a payment, a refund, a dispute). */
async function eventCounts(stack: TestStack, objectId: string): Promise<Record<string, number>> {
  const rows = await stack.sql<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' = ${objectId} GROUP BY type`;
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}
async function ledgerTransactions(stack: TestStack, paymentId: string): Promise<{ charge: number; refunds: number }> {
  const [row] = await stack.sql<{ charge: number; refunds: number }[]>`
    SELECT count(*) FILTER (WHERE refund_id IS NULL AND dispute_id IS NULL)::int AS charge, count(*) FILTER (WHERE refund_id IS NOT NULL)::int AS refunds
    FROM ledger_transactions WHERE payment_id = ${paymentId}`;
  return row!;
}

/** The tenant's merchant balance in EUR (GET /v1/balance). */
async function merchantBalance(kind: RunningKind): Promise<number> {
  const { json } = await kind.api.get('/v1/balance');
  return json.accounts.find((a: { account: string; currency: string }) => a.account === 'merchant_balance' && a.currency === 'EUR')?.balance_minor ?? 0;
}

/** The events sent for one object are these, each as many times as given (waited for: the relay's outbox). */
async function expectEvents(stack: TestStack, objectId: string, expected: Record<string, number>) {
  const sorted = (counts: Record<string, number>) => JSON.stringify(Object.entries(counts).sort());
  await eventually(async () => sorted(await eventCounts(stack, objectId)) === sorted(expected), 10_000, 100, `the events of ${objectId}`).catch(() => undefined);
  expect(await eventCounts(stack, objectId)).toEqual(expected);
}

/** A retry under the same key answered the first answer again, byte for byte, marked as replayed. */
function expectReplayOf(replay: { text: string; headers: Headers }, original: { text: string }) {
  expect(replay.text).toBe(original.text);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
}

/** The payment was charged once, at the PSP and in our ledger: one charge there, captured in full (refunded as given), one ledger transaction of the charge. */
async function expectChargedOnce(kind: RunningKind, stack: TestStack, paymentId: string, refunds: { minor: number; count: number } = { minor: 0, count: 0 }) {
  expect(await kind.charges(paymentId)).toEqual([succeededAt(2500, refunds.minor)]);
  expect(await ledgerTransactions(stack, paymentId)).toEqual({ charge: 1, refunds: refunds.count });
}

async function manualPayment(kind: RunningKind) {
  const created = await kind.api.post('/v1/payments', body('pm_card_visa', { capture_method: 'manual' }), uniqueKey('pay'));
  expect(created.status, created.text).toBe(201);
  expect(created.json).toMatchObject({ status: 'requires_capture', provider: kind.name, amount_captured_minor: 0 });
  expect(await kind.charges(created.json.id)).toEqual([{ status: 'requires_capture', capturedMinor: 0, refundedMinor: 0 }]);
  return created.json as { id: string; provider_charge_id: string };
}

/**
 * At a kind whose modifications are `notified`: the PSP's notifications are held back (its
 * sandbox-style webhook faults: lost) while `during` runs, then each one held is redelivered.
 */
async function withNotificationsHeld(kind: RunningKind, chargeId: string, during: () => Promise<void>) {
  if (!kind.controlsUrl) throw new Error(`${kind.name}: a notified kind's PSP for tests takes the sandbox's control calls`);
  const controls = sandboxControls(kind.controlsUrl);
  const listed = async () => ((await (await controls.events(chargeId)).json()) as { data: { id: string; state: string }[] }).data;
  // What was sent before is delivered first, so that only what `during` causes is held back.
  await eventually(async () => (await listed()).every((e) => e.state === 'delivered'), 20_000, 100, 'earlier notifications delivered');
  const before = new Set((await listed()).map((e) => e.id));
  expect((await controls.webhookFaults({ loss: 1 })).status).toBe(200);
  try {
    await during();
    const held = await eventually(async () => {
      const lost = (await listed()).filter((e) => !before.has(e.id) && e.state === 'lost');
      return lost.length > 0 && lost;
    }, 20_000, 100, 'the notification held back');
    expect((await controls.webhookFaults({})).status).toBe(200);
    for (const event of held) expect((await controls.redeliver(event.id)).status).toBe(200);
  } finally {
    await controls.webhookFaults({});
  }
}

/** A flow that needs `needs` (a test payment method its PSP has, unless `runsAt` says otherwise). */
const flow = (needs: string, name: string, run: Flow['run'], runsAt: Flow['runsAt'] = has(needs)): Flow => ({ name, needs, runsAt, run });

export const flows: readonly Flow[] = [
  flow('pm_card_visa', 'a card charge succeeds: one charge at the PSP, one ledger transaction, payment.succeeded once', async (kind, stack) => {
    const created = await kind.api.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ status: 'succeeded', provider: kind.name, amount_captured_minor: 2500 });
    await expectChargedOnce(kind, stack, created.json.id);
    await expectEvents(stack, created.json.id, { 'payment.succeeded': 1 });
  }),
  flow('pm_card_declined', 'a decline: 402 card_declined, the PSP’s charge declined, nothing posted, payment.declined once', async (kind, stack) => {
    const created = await kind.api.post('/v1/payments', body('pm_card_declined'), uniqueKey('pay'));
    expect(created.status, created.text).toBe(402);
    expect(created.json.error).toMatchObject({ type: 'card_declined', payment: { status: 'declined', provider: kind.name, amount_captured_minor: 0 } });
    const id = created.json.error.payment.id as string;
    expect(await kind.charges(id)).toEqual([{ status: 'declined', capturedMinor: 0, refundedMinor: 0 }]);
    expect(await ledgerTransactions(stack, id)).toEqual({ charge: 0, refunds: 0 });
    await expectEvents(stack, id, { 'payment.declined': 1 });
  }),
  flow('pm_card_visa', 'the same request retried (three at once, then once more): one payment, the same bytes replayed, one charge at the PSP', async (kind, stack) => {
    const key = uniqueKey('pay');
    const request = body('pm_card_visa');
    const racing = await Promise.all([0, 1, 2].map(() => kind.api.post('/v1/payments', request, key)));
    const first = racing.find((r) => r.status === 201)!;
    expect(first, racing.map((r) => r.text).join('\n')).toBeDefined();
    for (const answer of racing) expect(answer.json.id).toBe(first.json.id);
    const again = await kind.api.post('/v1/payments', request, key);
    expectReplayOf(again, first);
    await expectChargedOnce(kind, stack, first.json.id);
  }),
  flow('pm_card_visa', 'a manual capture, then its capture: the PSP captures once (at a `notified` kind 202 until its notification, then succeeded)', async (kind, stack) => {
    const before = await merchantBalance(kind);
    const payment = await manualPayment(kind);
    // An authorization moves no money.
    expect(await merchantBalance(kind)).toBe(before);
    const key = uniqueKey('capture');
    // At a `notified` kind through the impatient API: a capture still waiting for its notification is answered 202 soon.
    const via = kind.capabilities.modifications === 'notified' ? kind.impatientApi : kind.api;
    const capture = () => via.post(`/v1/payments/${payment.id}/capture`, {}, key);
    if (kind.capabilities.modifications === 'notified') {
      await withNotificationsHeld(kind, payment.provider_charge_id, async () => {
        const waiting = await capture();
        expect(waiting.status, waiting.text).toBe(202);
        expect(waiting.json).toMatchObject({ id: payment.id, status: 'requires_capture', amount_captured_minor: 0 });
        // The PSP has captured; until it says so the payment is not succeeded, and nothing is posted.
        await eventually(async () => (await kind.charges(payment.id))[0]?.capturedMinor === 2500, 10_000, 100, 'captured at the PSP');
        expect((await kind.api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'requires_capture', amount_captured_minor: 0 });
        expect(await ledgerTransactions(stack, payment.id)).toEqual({ charge: 0, refunds: 0 });
      });
      await eventually(async () => (await kind.api.get(`/v1/payments/${payment.id}`)).json.status === 'succeeded', 20_000, 100, 'succeeded once notified');
    }
    const captured = await capture();
    expect(captured.status, captured.text).toBe(200);
    expect(captured.json).toMatchObject({ id: payment.id, status: 'succeeded', amount_captured_minor: 2500 });
    const replay = await capture();
    expectReplayOf(replay, captured);
    await expectChargedOnce(kind, stack, payment.id);
    expect(await merchantBalance(kind)).toBe(before + 2500);
    await expectEvents(stack, payment.id, { 'payment.requires_capture': 1, 'payment.succeeded': 1 });
  }),
  flow('pm_card_visa', 'a manual capture, then a cancel: canceled, the authorization voided at the PSP, nothing captured or posted', async (kind, stack) => {
    const payment = await manualPayment(kind);
    const key = uniqueKey('cancel');
    const cancel = () => kind.api.post(`/v1/payments/${payment.id}/cancel`, undefined, key);
    const first = await cancel();
    // At a `notified` kind the cancel may wait for the PSP's confirmation (202), as any operation still running.
    expect([200, 202], first.text).toContain(first.status);
    await eventually(async () => (await kind.api.get(`/v1/payments/${payment.id}`)).json.status === 'canceled', 20_000, 100, 'canceled');
    const canceled = first.status === 200 ? first : await cancel();
    expect(canceled.status, canceled.text).toBe(200);
    expect(canceled.json).toMatchObject({ id: payment.id, status: 'canceled', failure: null });
    const replay = await cancel();
    expectReplayOf(replay, canceled);
    await eventually(async () => (await kind.charges(payment.id))[0]?.status === 'canceled', 20_000, 100, 'voided at the PSP');
    expect(await kind.charges(payment.id)).toEqual([{ status: 'canceled', capturedMinor: 0, refundedMinor: 0 }]);
    const late = await kind.api.post(`/v1/payments/${payment.id}/capture`, {}, uniqueKey('capture'));
    expect(late.status, late.text).toBe(409);
    expect(late.json.error.type).toBe('payment_not_capturable');
    expect(await ledgerTransactions(stack, payment.id)).toEqual({ charge: 0, refunds: 0 });
    await expectEvents(stack, payment.id, { 'payment.requires_capture': 1, 'payment.canceled': 1 });
  }),
  flow('pm_card_visa', 'a partial refund, then the rest: refunded at the PSP in full, each refund posted once (at a `notified` kind pending until its notification)', async (kind, stack) => {
    const paid = await kind.api.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
    expect(paid.status, paid.text).toBe(201);
    const payment = paid.json as { id: string; provider_charge_id: string };
    const via = kind.capabilities.modifications === 'notified' ? kind.impatientApi : kind.api;
    const refund = (amountMinor: number, key = uniqueKey('refund')) => via.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: amountMinor, reason: 'requested_by_customer' }, key);
    const settled = async (refundId: string) => eventually(async () => {
      const { json } = await kind.api.get(`/v1/refunds/${refundId}`);
      return json.status === 'pending' ? undefined : json;
    }, 20_000, 100, `refund ${refundId} settled`);

    const firstKey = uniqueKey('refund');
    let firstId: string;
    if (kind.capabilities.modifications === 'notified') {
      firstId = '';
      await withNotificationsHeld(kind, payment.provider_charge_id, async () => {
        const pending = await refund(1000, firstKey);
        expect(pending.status, pending.text).toBe(202);
        expect(pending.json).toMatchObject({ status: 'pending', amount_minor: 1000 });
        firstId = pending.json.id;
        await eventually(async () => (await kind.charges(payment.id))[0]?.refundedMinor === 1000, 10_000, 100, 'refunded at the PSP');
        // The PSP has not said the money went back: pending, its amount reserved, nothing posted.
        expect((await kind.api.get(`/v1/refunds/${firstId}`)).json.status).toBe('pending');
        expect((await kind.api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'succeeded', amount_refunded_minor: 1000 });
        expect(await ledgerTransactions(stack, payment.id)).toEqual({ charge: 1, refunds: 0 });
      });
    } else {
      const done = await refund(1000, firstKey);
      expect(done.status, done.text).toBe(201);
      expect(done.json).toMatchObject({ object: 'refund', payment_id: payment.id, amount_minor: 1000, status: 'succeeded' });
      expect(done.headers.get('location')).toBe(`/v1/refunds/${done.json.id}`);
      firstId = done.json.id;
    }
    // More than the rest of the capture is refused, whatever the first refund's state.
    const beyond = await refund(2000);
    expect(beyond.status, beyond.text).toBe(409);
    expect(beyond.json.error).toMatchObject({ type: 'refund_exceeds_captured', amount_refundable_minor: 1500 });
    expect(await settled(firstId)).toMatchObject({ status: 'succeeded', amount_minor: 1000 });
    expect((await kind.api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'succeeded', amount_refunded_minor: 1000 });
    const replay = await refund(1000, firstKey);
    expect(replay.status, replay.text).toBe(201);
    expect(replay.json).toMatchObject({ id: firstId, status: 'succeeded' });

    const rest = await refund(1500);
    expect([201, 202], rest.text).toContain(rest.status);
    expect(await settled(rest.json.id)).toMatchObject({ status: 'succeeded', amount_minor: 1500 });
    expect((await kind.api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'refunded', amount_refunded_minor: 2500 });
    const over = await refund(1);
    expect(over.status, over.text).toBe(409);
    expect(over.json.error.type).toBe('refund_exceeds_captured');
    const listed = (await kind.api.get(`/v1/payments/${payment.id}/refunds`)).json.data as { id: string }[];
    expect(listed.map((r) => r.id)).toEqual([rest.json.id, firstId]);
    expect((await kind.api.get(`/v1/refunds/${firstId}`)).json).toEqual(listed[1]);
    await expectChargedOnce(kind, stack, payment.id, { minor: 2500, count: 2 });
    await eventually(async () => (await eventCounts(stack, firstId))['refund.succeeded'] === 1 && (await eventCounts(stack, rest.json.id))['refund.succeeded'] === 1, 10_000, 100, 'refund.succeeded of each');
    await expectLedgerConsistent(stack.sql, kind.tenant.id);
  }),
  flow('savedMethods', 'a card saved on-session (setup_future_usage), then charged off-session by our customer API: one charge more at the PSP, by its own token', async (kind, stack) => {
    const customer = await kind.api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'));
    expect(customer.status, customer.text).toBe(201);
    const first = await kind.api.post('/v1/payments', body('pm_card_visa', { customer: customer.json.id, setup_future_usage: 'off_session' }), uniqueKey('pay'));
    expect(first.status, first.text).toBe(201);
    expect(first.json).toMatchObject({ status: 'succeeded', provider: kind.name });
    const method = await eventually(async () => (await kind.api.get(`/v1/customers/${customer.json.id}/payment_methods`)).json.data[0] ?? null, 10_000, 100, 'the saved method');
    expect(method).toMatchObject({ object: 'payment_method', customer: customer.json.id, detached_at: null });
    const [stored] = await stack.sql<{ provider_tokens: Record<string, string> }[]>`SELECT provider_tokens FROM payment_methods WHERE id = ${method.id}`;
    expect(Object.keys(stored!.provider_tokens)).toEqual([kind.name]);

    const later = await kind.api.post('/v1/payments', body(method.id, { customer: customer.json.id, off_session: true }), uniqueKey('pay'));
    expect(later.status, later.text).toBe(201);
    expect(later.json).toMatchObject({ status: 'succeeded', provider: kind.name, payment_method: method.id, amount_captured_minor: 2500 });
    expect(later.json.provider_charge_id).not.toBe(first.json.provider_charge_id);
    expect(await kind.charges(first.json.id)).toEqual([succeededAt(2500)]);
    await expectChargedOnce(kind, stack, later.json.id);
  }, (kind) => kind.capabilities.savedMethods && kind.paymentMethods.includes('pm_card_visa')),
  flow('pm_card_visa', 'lost answers, resolved as the kind’s unknownOutcome says (lookup, lagging lookup or replay): the payment waits (202), then succeeds with one charge at the PSP', async (kind, stack) => {
    await kind.loseAnswers(true);
    let id: string;
    try {
      const created = await kind.impatientApi.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
      expect(created.status, created.text).toBe(202);
      id = created.json.id;
      // The PSP made the charge; its answer, and every retry's, is lost.
      await eventually(async () => (await kind.charges(id)).length === 1, 20_000, 100, 'the charge made at the PSP');
      expect((await kind.api.get(`/v1/payments/${id}`)).json.status).toBe('processing');
    } finally {
      await kind.loseAnswers(false);
    }
    expect(await decidedPayment(kind.api, id, 60_000)).toMatchObject({ status: 'succeeded', provider: kind.name, amount_captured_minor: 2500 });
    await expectChargedOnce(kind, stack, id);
  }),
  flow('pm_card_threeDSecureRequired', '3-D Secure: requires_action with the PSP’s challenge; approved, the payment succeeds with one charge at the PSP', async (kind, stack) => {
    const created = await kind.api.post('/v1/payments', body('pm_card_threeDSecureRequired', { return_url: RETURN_URL }), uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    expect(created.json).toMatchObject({ status: 'requires_action', provider: kind.name, next_action: { type: 'redirect_to_url' } });
    expect(await kind.charges(created.json.id)).toEqual([{ status: 'requires_action', capturedMinor: 0, refundedMinor: 0 }]);
    const approved = await completeChallenge(created.json.next_action.redirect_to_url.url, 'approve');
    expect(approved.status).toBe(303);
    expect(await decidedPayment(kind.api, created.json.id)).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500 });
    await expectChargedOnce(kind, stack, created.json.id);
  }),
  flow('pm_card_createDispute', 'a dispute: opened at the PSP, recorded with its chargeback; accepted through our API, lost at the PSP too', async (kind, stack) => {
    const paid = await kind.api.post('/v1/payments', body('pm_card_createDispute'), uniqueKey('pay'));
    expect(paid.status, paid.text).toBe(201);
    const dispute = await eventually(async () => {
      const [row] = await stack.sql<{ id: string; provider_dispute_id: string; status: string; stage: string }[]>`
        SELECT id, provider_dispute_id, status, stage FROM disputes WHERE payment_id = ${paid.json.id}`;
      return row?.stage === 'chargeback' && row;
    }, 20_000, 100, 'the dispute recorded');
    expect(dispute.status).toBe('needs_response');
    expect(await kind.disputeAtPsp(dispute.provider_dispute_id)).toEqual({ chargeId: paid.json.provider_charge_id, status: 'needs_response' });
    const accepted = await kind.api.post(`/v1/disputes/${dispute.id}/accept`, undefined, uniqueKey('accept'));
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.json).toMatchObject({ id: dispute.id, status: 'lost', payment_id: paid.json.id });
    expect(await eventually(async () => (await kind.disputeAtPsp(dispute.provider_dispute_id)).status === 'lost' || null, 10_000, 100, 'the dispute lost at the PSP')).toBe(true);
    await eventually(async () => (await eventCounts(stack, dispute.id))['dispute.created'] === 1, 10_000, 100, 'dispute.created');
    await expectLedgerConsistent(stack.sql, kind.tenant.id);
  }),
];

/** The flows registered at a kind: exactly those it has what they need for. */
export const flowsAt = (kind: KindUnderTest) => flows.filter((flow) => flow.runsAt(kind));
