import fc from 'fast-check';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { disputeStages, disputeStatuses } from '../../domain/disputes';
import { chargeStates } from '../../domain/payments';
import { adyen } from '../../provider/adyen/library';
import { verifyAdyenWebhook } from '../../provider/adyen/webhook';
import { adyenDisputeEventCodes } from '../../provider/adyen/wire';
import { signSandboxWebhook, verifySandboxWebhook } from '../../provider/sandbox/webhook';
import { verifyStripeWebhook } from '../../provider/stripe/webhook';
import { ProviderEventUnreadableError, type ProviderWebhookEvent } from '../../provider/types';

/**
 * Every PSP kind's event mapping, fuzzed: each event type a kind reads (charges, refunds,
 * disputes, other objects), taken valid and then with fields dropped, nulled or given another
 * type (nested ones too), signed with the kind's real signing and verified. The mapping either
 * answers a well-formed event or throws ProviderEventUnreadableError naming the fields; never a
 * TypeError, a RangeError or any other error (which the inbound route would answer 500).
 */

const iso = '2026-03-01T12:00:00.000Z';
const now = Math.floor(Date.parse(iso) / 1000);
const at = new Date(iso);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Event = { [key: string]: Json };
const event = (type: string, object: Json): Event => ({ id: 'evt_1', object: 'event', type, created: now, data: { object } });

const sandboxCharge = {
  id: 'ch_1', object: 'charge', status: 'succeeded', amount_minor: 2500, amount_captured_minor: 2500, amount_refunded_minor: 0, currency: 'EUR',
  payment_method: 'pm_card_visa', reference: 'pay_1', description: null, idempotency_key: 'k', failure_code: null, failure_message: null, created_at: iso,
  capture: true, return_url: null, next_action: null, settle_at: null, succeeded_at: iso, authorized_at: iso, failed_at: null, canceled_at: null,
  off_session: false, card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2030 }, saved_card: 'card_1', network_transaction_id: 'ntid_1',
};
const sandboxEvents: Record<string, Event> = {
  'charge.succeeded': event('charge.succeeded', sandboxCharge),
  'charge.requires_action': event('charge.requires_action', {
    ...sandboxCharge, status: 'requires_action', amount_captured_minor: 0, succeeded_at: null, authorized_at: null, card: null, saved_card: null, network_transaction_id: null,
    return_url: 'https://shop.example/back', next_action: { type: 'redirect_to_url', redirect_to_url: { url: 'https://psp.example/3ds', return_url: 'https://shop.example/back' } },
  }),
  'refund.failed': event('refund.failed', { id: 're_1', object: 'refund', charge: 'ch_1', amount_minor: 100, status: 'failed', reference: 'rf_1', idempotency_key: 'k', failure_code: 'expired_card', failure_message: 'no', created_at: iso }),
  'charge.dispute.created': event('charge.dispute.created', {
    id: 'dp_1', object: 'dispute', charge: 'ch_1', reference: 'pay_1', amount_minor: 2500, currency: 'eur', reason: 'fraudulent', stage: 'chargeback', status: 'needs_response',
    evidence: {}, evidence_due_by: iso, evidence_submitted_at: null, created_at: iso, updated_at: iso, fee_minor: 1500,
  }),
  'balance.available': event('balance.available', { object: 'balance', available: [] }),
};

const stripeIntent = {
  id: 'pi_1', object: 'payment_intent', amount: 2500, amount_received: 2500, currency: 'eur', status: 'succeeded', capture_method: 'automatic',
  last_payment_error: null, next_action: null, metadata: { reference: 'pay_1' },
  latest_charge: { id: 'ch_1', object: 'charge', amount_refunded: 0, status: 'succeeded', created: now, payment_method_details: { type: 'card' } },
};
const stripeDispute = {
  id: 'dp_1', object: 'dispute', amount: 2500, currency: 'eur', reason: 'fraudulent', status: 'needs_response', created: now, charge: 'ch_1', payment_intent: 'pi_1',
  evidence: { uncategorized_text: null, refund_policy: null }, evidence_details: { due_by: now + 86_400, has_evidence: false, past_due: false, submission_count: 0 },
  balance_transactions: [{ id: 'txn_1', object: 'balance_transaction', amount: -2500, fee: 1500 }], metadata: {},
};
const stripeEvents: Record<string, Event> = {
  'payment_intent.succeeded': event('payment_intent.succeeded', stripeIntent),
  'payment_intent.requires_action': event('payment_intent.requires_action', {
    ...stripeIntent, status: 'requires_action', amount_received: 0, latest_charge: null,
    next_action: { type: 'redirect_to_url', redirect_to_url: { url: 'https://stripe.example/3ds', return_url: 'https://shop.example/back' } },
  }),
  'payment_intent.payment_failed': event('payment_intent.payment_failed', {
    ...stripeIntent, status: 'requires_payment_method', amount_received: 0, latest_charge: 'ch_1',
    last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds', message: 'no' },
  }),
  'refund.updated': event('refund.updated', { id: 're_1', object: 'refund', amount: 100, payment_intent: { id: 'pi_1', object: 'payment_intent' }, status: 'failed', failure_reason: 'expired_or_canceled_card' }),
  'refund.created': event('refund.created', { id: 're_1', object: 'refund', amount: 100, payment_intent: 'pi_1', status: 'succeeded', failure_reason: null }),
  'charge.refunded': event('charge.refunded', { id: 'ch_1', object: 'charge', amount_refunded: 100 }),
  'customer.created': event('customer.created', { id: 'cus_1', object: 'customer' }),
  'payment_intent.succeeded (a saved card)': event('payment_intent.succeeded', {
    ...stripeIntent, customer: 'cus_1', payment_method: { id: 'pm_1', object: 'payment_method' }, setup_future_usage: 'off_session',
    latest_charge: { ...stripeIntent.latest_charge, payment_method_details: { type: 'card', card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2030, network_transaction_id: 'ntid_1' } } },
  }),
  'charge.dispute.created': event('charge.dispute.created', stripeDispute),
  'charge.dispute.closed': event('charge.dispute.closed', {
    ...stripeDispute, status: 'won', evidence_details: { due_by: null, has_evidence: true, past_due: false, submission_count: 1 },
    payment_intent: { id: 'pi_1', object: 'payment_intent', metadata: { reference: 'pay_1' } }, charge: { id: 'ch_1', object: 'charge' },
  }),
};

/** Adyen's notifications: a batch of one signed item, per event code the kind reads (and one it passes through). */
const adyenItem = {
  additionalData: { authCode: '012345' },
  amount: { currency: 'EUR', value: 2500 },
  eventCode: 'CAPTURE',
  eventDate: iso,
  merchantAccountCode: 'OrchestratorTest',
  merchantReference: 'pay_1',
  originalReference: 'A1B2C3D4E5F60789',
  paymentMethod: 'visa',
  pspReference: '0123456789ABCDEF',
  reason: '',
  success: 'true',
};
const adyenBatch = (fields: Record<string, Json>): Event => ({ live: 'false', notificationItems: [{ NotificationRequestItem: { ...adyenItem, ...fields } }] });
const adyenEvents: Record<string, Event> = {
  'AUTHORISATION': adyenBatch({ eventCode: 'AUTHORISATION', originalReference: null, pspReference: 'A1B2C3D4E5F60789' }),
  'CAPTURE': adyenBatch({}),
  'CAPTURE_FAILED': adyenBatch({ eventCode: 'CAPTURE_FAILED', success: 'false', reason: 'Capture failed' }),
  'CANCELLATION': adyenBatch({ eventCode: 'CANCELLATION' }),
  'REFUND': adyenBatch({ eventCode: 'REFUND', amount: { currency: 'EUR', value: 100 } }),
  'REFUND_FAILED': adyenBatch({ eventCode: 'REFUND_FAILED', success: 'false' }),
  'REPORT_AVAILABLE': adyenBatch({ eventCode: 'REPORT_AVAILABLE', originalReference: null }),
  // Disputes: the dispute's own reference, the disputed payment's as originalReference, Adyen's additionalData.
  ...Object.fromEntries(
    adyenDisputeEventCodes.map((code) => [
      code,
      adyenBatch({ eventCode: code, pspReference: 'D15E0000A1B2C3D4', additionalData: { defensePeriodEndsAt: '2030-01-15T10:00:00+01:00', chargebackReasonCode: '10.4', disputeStatus: 'Undefended' } }),
    ]),
  ),
};
for (const batch of Object.values(adyenEvents)) {
  const item = (batch.notificationItems as { NotificationRequestItem: Record<string, Json> }[])[0]!.NotificationRequestItem;
  if (item.originalReference === null) delete item.originalReference;
}
const adyenHmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const adyenValidator = new adyen.hmacValidator();
/** Signs every item of a (mutated) batch as Adyen would, where it still has the shape a signature needs. */
function signAdyenBatch(raw: string): string {
  const body = JSON.parse(raw) as { notificationItems?: unknown };
  for (const wrapped of Array.isArray(body?.notificationItems) ? body.notificationItems : []) {
    const item = (wrapped as { NotificationRequestItem?: any } | null)?.NotificationRequestItem;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) continue;
    if (item.additionalData !== undefined && (item.additionalData === null || typeof item.additionalData !== 'object' || Array.isArray(item.additionalData))) continue;
    try {
      item.additionalData = { ...item.additionalData, hmacSignature: adyenValidator.calculateHmac(item, adyenHmacKey) };
    } catch {
      // Fields a signature cannot be made over (no amount): the wire schema refuses the item first.
    }
  }
  return JSON.stringify(body);
}

const stripeSigner = new Stripe('sk_test_fake');
const kinds = {
  sandbox: {
    events: sandboxEvents,
    verify: (raw: string) => verifySandboxWebhook(raw, { 'sandbox-signature': signSandboxWebhook(raw, 'secret-0123456789', now) }, { secret: 'secret-0123456789', toleranceSeconds: 300 }, at),
  },
  stripe: {
    events: stripeEvents,
    verify: (raw: string) =>
      verifyStripeWebhook(raw, { 'stripe-signature': stripeSigner.webhooks.generateTestHeaderString({ payload: raw, secret: 'whsec_fuzz', timestamp: now }) }, { secret: 'whsec_fuzz' }, at),
  },
  adyen: {
    events: adyenEvents,
    verify: (raw: string) => verifyAdyenWebhook(signAdyenBatch(raw), { hmacKey: adyenHmacKey }),
  },
};

/** What the inbound route may be handed: ProviderWebhookEvent, every field of the type it says. */
const text = z.string();
const minor = z.int().nonnegative();
const wellFormed = z.strictObject({
  id: text,
  type: text,
  createdAt: z.date({ error: 'a Date' }).or(z.custom<Date>((d) => d instanceof Date)),
  charge: z
    .strictObject({
      id: text,
      status: z.enum(chargeStates),
      amountMinor: minor,
      amountCapturedMinor: minor,
      amountRefundedMinor: minor,
      currency: text,
      declineCode: text.nullable(),
      declineMessage: text.nullable(),
      nextAction: z.strictObject({ type: z.literal('redirect_to_url'), url: text, returnUrl: text.nullable() }).nullable(),
      reference: text,
      succeededAt: text.nullish(),
      authorizedAt: text.nullish(),
      savedCard: z
        .strictObject({ token: text.nullable(), networkTransactionId: text, card: z.strictObject({ brand: text, last4: text, expMonth: z.int(), expYear: z.int() }), fingerprint: text.nullish() })
        .nullish(),
    })
    .nullable(),
  refund: z.strictObject({ id: text, chargeId: text, status: z.enum(['succeeded', 'failed']), amountMinor: minor, failureCode: text.nullable(), failureMessage: text.nullable(), reference: text.optional() }).nullable(),
  dispute: z
    .strictObject({
      id: text, chargeId: text, reference: text.nullable(), amountMinor: minor, currency: text, reason: text, stage: z.enum(disputeStages), status: z.enum(disputeStatuses),
      evidenceDueBy: text, evidenceSubmittedAt: text.nullable(), createdAt: text, feeMinor: minor,
    })
    .nullable(),
});

/** Every path in the event, nested ones included (`data.object.next_action.redirect_to_url.url`). */
function paths(value: Json, prefix: string[] = []): string[][] {
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, child]) => [[...prefix, key], ...paths(child, [...prefix, key])]);
}

type Mutation = { path: string[]; change: { kind: 'drop' } | { kind: 'set'; value: unknown } };
function mutate(original: Event, mutations: Mutation[]): Event {
  const copy = structuredClone(original);
  for (const { path, change } of mutations) {
    let parent: any = copy;
    for (const key of path.slice(0, -1)) {
      parent = parent?.[key];
      if (parent === null || typeof parent !== 'object') break;
    }
    if (parent === null || typeof parent !== 'object') continue;
    const last = path[path.length - 1]!;
    if (change.kind === 'drop') delete parent[last];
    // A copy: a later mutation of the same combination may write into it, and fast-check hands out one object for a constant.
    else parent[last] = structuredClone(change.value);
  }
  return copy;
}

/** Maps the signed body; returns the event, or the unreadable error. Any other error fails the test. */
function mapped(verify: (raw: string) => ProviderWebhookEvent, body: Event): ProviderWebhookEvent | ProviderEventUnreadableError {
  const raw = JSON.stringify(body);
  let result: ProviderWebhookEvent;
  try {
    result = verify(raw);
  } catch (error) {
    if (error instanceof ProviderEventUnreadableError) {
      expect(error.issues.length).toBeGreaterThan(0);
      for (const issue of error.issues) expect(issue).toEqual({ path: expect.any(String), code: expect.any(String), message: expect.any(String) });
      return error;
    }
    throw new Error(`the mapping threw ${String(error)} for ${raw}`, { cause: error });
  }
  const checked = wellFormed.safeParse(result);
  if (!checked.success) throw new Error(`the mapping answered an ill-formed event for ${raw}: ${JSON.stringify(checked.error.issues)}`);
  return result;
}

/** Other types than the fields have: each kind of JSON value, and numbers and strings the wire refuses. */
const otherValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom('', 'x', '2500', 'EURO', 'not a time', 0, -1, 1.5, 1e300, -1e300, 2 ** 53, true, false, [], {}, [1], { object: 'charge' }, { type: 'redirect_to_url' }),
  fc.string({ maxLength: 10 }),
  fc.double({ noNaN: true }),
  fc.integer(),
  fc.jsonValue({ maxDepth: 2 }),
);

for (const [kind, { events, verify }] of Object.entries(kinds)) {
  describe(`${kind}: the event mapping answers a well-formed event or ProviderEventUnreadableError, whatever the fields`, () => {
    for (const [type, valid] of Object.entries(events)) {
      describe(type, () => {
        it('the valid event maps', () => {
          const result = mapped(verify, valid);
          expect(result).not.toBeInstanceOf(Error);
        });

        it('each field (nested ones too) dropped, null or set to another JSON type: never another error', () => {
          const values: unknown[] = [null, '', 'x', -1, 1.5, 1e300, true, [], {}];
          for (const path of paths(valid)) {
            mapped(verify, mutate(valid, [{ path, change: { kind: 'drop' } }]));
            for (const value of values) mapped(verify, mutate(valid, [{ path, change: { kind: 'set', value } }]));
          }
        });

        it('random combinations of dropped, null and retyped fields: never another error', () => {
          const mutation: fc.Arbitrary<Mutation> = fc.record({
            path: fc.constantFrom(...paths(valid)),
            change: fc.oneof(fc.constant({ kind: 'drop' as const }), fc.constant({ kind: 'set' as const, value: null }), otherValue.map((value) => ({ kind: 'set' as const, value }))),
          });
          fc.assert(
            fc.property(fc.array(mutation, { minLength: 1, maxLength: 4 }), (mutations) => {
              mapped(verify, mutate(valid, mutations));
            }),
            { numRuns: 300 },
          );
        });
      });
    }
  });
}

describe('the reported cases name the field', () => {
  const dispute = sandboxEvents['charge.dispute.created']!;
  for (const field of ['currency', 'charge', 'amount_minor', 'stage']) {
    it(`a sandbox dispute without ${field}: unreadable at data.object.${field}`, () => {
      const result = mapped(kinds.sandbox.verify, mutate(dispute, [{ path: ['data', 'object', field], change: { kind: 'drop' } }]));
      expect(result).toBeInstanceOf(ProviderEventUnreadableError);
      expect((result as ProviderEventUnreadableError).issues.map((i) => i.path)).toEqual([`data.object.${field}`]);
    });
  }
  it('a Stripe dispute: its charge is its PaymentIntent, its stage and status from Stripe\'s status, the fee its withdrawal\'s; without currency or status: unreadable at their paths', () => {
    const created = mapped(kinds.stripe.verify, stripeEvents['charge.dispute.created']!) as ProviderWebhookEvent;
    expect(created).toMatchObject({ type: 'charge.dispute.created', dispute: { id: 'dp_1', chargeId: 'pi_1', reference: null, stage: 'chargeback', status: 'needs_response', feeMinor: 1500, currency: 'EUR', evidenceSubmittedAt: null } });
    const closed = mapped(kinds.stripe.verify, stripeEvents['charge.dispute.closed']!) as ProviderWebhookEvent;
    expect(closed.dispute).toMatchObject({ chargeId: 'pi_1', reference: 'pay_1', status: 'won', evidenceSubmittedAt: iso });
    const inquiry = mapped(kinds.stripe.verify, mutate(stripeEvents['charge.dispute.created']!, [{ path: ['data', 'object', 'status'], change: { kind: 'set', value: 'warning_needs_response' } }])) as ProviderWebhookEvent;
    expect(inquiry.dispute).toMatchObject({ stage: 'inquiry', status: 'needs_response', feeMinor: 0 });
    for (const field of ['currency', 'status']) {
      const result = mapped(kinds.stripe.verify, mutate(stripeEvents['charge.dispute.created']!, [{ path: ['data', 'object', field], change: { kind: 'drop' } }]));
      expect((result as ProviderEventUnreadableError).issues.map((i) => i.path)).toEqual([`data.object.${field}`]);
    }
  });

  it('a Stripe PaymentIntent without currency, and one whose card charge has no creation time: unreadable at their paths', () => {
    const intent = stripeEvents['payment_intent.succeeded']!;
    const noCurrency = mapped(kinds.stripe.verify, mutate(intent, [{ path: ['data', 'object', 'currency'], change: { kind: 'drop' } }]));
    expect((noCurrency as ProviderEventUnreadableError).issues.map((i) => i.path)).toEqual(['data.object.currency']);
    const noCreated = mapped(kinds.stripe.verify, mutate(intent, [{ path: ['data', 'object', 'latest_charge', 'created'], change: { kind: 'drop' } }]));
    expect((noCreated as ProviderEventUnreadableError).issues.map((i) => i.path)).toEqual(['data.object.latest_charge.created']);
  });
  const item = ['notificationItems', '0', 'NotificationRequestItem'];
  it.each([
    { change: 'without amount.currency', path: [...item, 'amount', 'currency'], mutation: { kind: 'drop' as const } },
    { change: 'with amount.value a string', path: [...item, 'amount', 'value'], mutation: { kind: 'set' as const, value: '2500' } },
    { change: 'with success a boolean', path: [...item, 'success'], mutation: { kind: 'set' as const, value: true } },
    { change: 'with eventDate not a time', path: [...item, 'eventDate'], mutation: { kind: 'set' as const, value: 'yesterday' } },
    { change: 'of a dispute without originalReference', path: [...item, 'originalReference'], mutation: { kind: 'drop' as const }, code: 'CHARGEBACK' },
    { change: 'of a dispute whose defence period ends at no time', path: [...item, 'additionalData', 'defensePeriodEndsAt'], mutation: { kind: 'set' as const, value: 'soon' }, code: 'NOTIFICATION_OF_CHARGEBACK' },
  ])('an Adyen item $change: unreadable at its path in the batch', ({ path, mutation, code }) => {
    const result = mapped(kinds.adyen.verify, mutate(adyenEvents[code ?? 'CAPTURE']!, [{ path, change: mutation }]));
    expect(result).toBeInstanceOf(ProviderEventUnreadableError);
    expect((result as ProviderEventUnreadableError).issues.map((i) => i.path)).toEqual([path.join('.')]);
  });

  it('Adyen\'s dispute notifications: the dispute its pspReference, the charge the disputed payment, stage and status by the event code, the deadline Adyen\'s', () => {
    const standing = (code: string) => (mapped(kinds.adyen.verify, adyenEvents[code]!) as ProviderWebhookEvent).dispute;
    expect(standing('NOTIFICATION_OF_CHARGEBACK')).toEqual({
      id: 'D15E0000A1B2C3D4', chargeId: 'A1B2C3D4E5F60789', reference: 'pay_1', amountMinor: 2500, currency: 'EUR', reason: '10.4',
      stage: 'inquiry', status: 'needs_response', evidenceDueBy: '2030-01-15T09:00:00.000Z', evidenceSubmittedAt: null, createdAt: new Date(iso).toISOString(), feeMinor: 0,
    });
    expect(standing('CHARGEBACK')).toMatchObject({ stage: 'chargeback', status: 'needs_response', evidenceSubmittedAt: null });
    expect(standing('CHARGEBACK_REVERSED')).toMatchObject({ stage: 'chargeback', status: 'won', evidenceSubmittedAt: new Date(iso).toISOString() });
    // The issuer's second round, which moves a chargeback closed won (domain/disputes.ts).
    expect(standing('SECOND_CHARGEBACK')).toMatchObject({ stage: 'pre_arbitration', status: 'lost' });
    expect(standing('DISPUTE_DEFENSE_PERIOD_ENDED')).toMatchObject({ stage: 'chargeback', status: 'lost', evidenceSubmittedAt: null });
    expect((mapped(kinds.adyen.verify, adyenEvents.CHARGEBACK!) as ProviderWebhookEvent).type).toBe('charge.dispute.funds_withdrawn');
    // Another dispute code passes through, unread.
    const comments = mapped(kinds.adyen.verify, adyenBatch({ eventCode: 'ISSUER_COMMENTS' })) as ProviderWebhookEvent;
    expect(comments).toMatchObject({ type: 'adyen.ISSUER_COMMENTS', dispute: null });
  });

});
