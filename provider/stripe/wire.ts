import type Stripe from 'stripe';
import { z } from 'zod';
import { pspId, pspText, PSP_EVENT_TYPE_MAX_LENGTH, PSP_IDENTIFIER_MAX_LENGTH } from '../wire-identifiers';
import { ProviderUnavailableError, readWire, type ProviderBalanceTransaction, type ProviderCharge, type ProviderDispute, type ProviderRefund, type ProviderWebhookEvent } from '../types';

/**
 * Stripe's objects in the orchestrator's terms: a PaymentIntent is our charge (ProviderCharge),
 * a Refund our refund, a Dispute our dispute, a BalanceTransaction of a payment or a refund our balance line, and
 * an Event our ProviderWebhookEvent. The client (./client.ts) reads its answers through it,
 * the webhook verification (./webhook.ts) the events the Stripe library has verified.
 */

/**
 * A card saved at Stripe, as our saved method's token for the connection: its Customer and the
 * PaymentMethod attached to it (`cus_…/pm_…`), both of which an off-session PaymentIntent names.
 */
export const savedCardToken = (customer: string, paymentMethod: string) => `${customer}/${paymentMethod}`;

/** The Customer and PaymentMethod of a token savedCardToken made; null for anything else. */
export function parseSavedCardToken(token: string): { customer: string; paymentMethod: string } | null {
  const match = /^(cus_[A-Za-z0-9_]+)\/(pm_[A-Za-z0-9_]+)$/.exec(token);
  return match ? { customer: match[1]!, paymentMethod: match[2]! } : null;
}

const idOf = (value: string | { id: string } | null | undefined) => (typeof value === 'string' ? value : (value?.id ?? null));

/**
 * The card as Stripe can charge it again, once it authorized the charge: the card network's
 * transaction id, the card and its fingerprint (the latest Charge's payment_method_details.card), and our token
 * when the PaymentIntent saved the card to its Customer (setup_future_usage). null when Stripe
 * reports no network transaction id (the card is then not saved: nothing could charge it by one).
 */
function savedCardOf(intent: Stripe.PaymentIntent, latestCharge: Stripe.Charge | null): ProviderCharge['savedCard'] {
  const card = latestCharge?.payment_method_details?.card;
  if (!card?.network_transaction_id || !card.brand || !card.last4 || !card.exp_month || !card.exp_year) return null;
  const customer = idOf(intent.customer);
  const paymentMethod = idOf(intent.payment_method);
  const saved = intent.setup_future_usage === 'off_session' && customer !== null && paymentMethod !== null;
  return {
    token: saved ? savedCardToken(customer, paymentMethod) : null,
    networkTransactionId: card.network_transaction_id,
    card: { brand: card.brand, last4: card.last4, expMonth: card.exp_month, expYear: card.exp_year },
    fingerprint: card.fingerprint || null,
  };
}

export function toCharge(intent: Stripe.PaymentIntent, cardError?: Stripe.errors.StripeCardError): ProviderCharge {
  const latestCharge = typeof intent.latest_charge === 'object' ? intent.latest_charge : null;
  // A card's Charge is created when the card is authorized (after any 3-D Secure) and, captured
  // automatically, succeeds then; other methods' Charges settle later without saying when (null).
  const cardAt = latestCharge?.payment_method_details?.type === 'card' && latestCharge.status !== 'failed' ? new Date(latestCharge.created * 1000).toISOString() : null;
  const base = {
    authorizedAt: cardAt,
    succeededAt: intent.capture_method === 'manual' ? null : cardAt,
    id: intent.id,
    amountMinor: intent.amount,
    amountCapturedMinor: intent.amount_received,
    amountRefundedMinor: latestCharge?.amount_refunded ?? 0,
    currency: intent.currency.toUpperCase(),
    declineCode: null,
    declineMessage: null,
    nextAction: null,
    reference: intent.metadata?.['reference'] ?? '',
  };
  const savedCard = savedCardOf(intent, latestCharge);
  switch (intent.status) {
    case 'succeeded':
      return { ...base, status: 'succeeded', ...(savedCard ? { savedCard } : {}) };
    case 'requires_capture':
      return { ...base, status: 'requires_capture', ...(savedCard ? { savedCard } : {}) };
    case 'canceled':
      return { ...base, status: 'canceled' };
    case 'processing':
      // Bank debits and the like: Stripe has it, the outcome comes later (webhook or poll).
      return { ...base, status: 'processing' };
    case 'requires_payment_method': {
      // Confirmation failed (a decline, also after a 3-D Secure challenge): the PaymentIntent
      // waits for another payment method, which for us (one method per charge) is a decline.
      const failure = intent.last_payment_error;
      return {
        ...base,
        status: 'declined',
        declineCode: failure?.decline_code ?? failure?.code ?? cardError?.decline_code ?? cardError?.code ?? 'card_declined',
        declineMessage: failure?.message ?? cardError?.message ?? null,
      };
    }
    case 'requires_action': {
      // 3-D Secure or a bank redirect: the customer goes to next_action.redirect_to_url.url and
      // comes back to its return_url. Any other kind of action (use_stripe_sdk: Stripe.js in
      // the customer's browser) is one a server-side integration cannot hand over, so that is
      // declined under the code Stripe itself uses for that case.
      const redirect = intent.next_action?.type === 'redirect_to_url' ? intent.next_action.redirect_to_url : null;
      if (redirect?.url) {
        return { ...base, status: 'requires_action', nextAction: { type: 'redirect_to_url', url: redirect.url, returnUrl: redirect.return_url ?? null } };
      }
      return {
        ...base,
        status: 'declined',
        declineCode: 'authentication_required',
        declineMessage: 'The payment method requires customer authentication.',
      };
    }
    default:
      // 'requires_confirmation': no outcome yet. Unknown, so the caller looks
      // it up again later rather than acting on a guess.
      throw new ProviderUnavailableError(`PaymentIntent ${intent.id} is ${intent.status}; outcome not known yet`);
  }
}

/**
 * A balance transaction's type as ours: charges and refunds by their type; a dispute's
 * withdrawal and reinstatement are `adjustment`s whose source is the Dispute, told apart by
 * their reporting category (else by the sign of the amount). Anything else is no line of ours.
 */
function lineType(txn: Stripe.BalanceTransaction): ProviderBalanceTransaction['type'] | null {
  if (txn.type === 'charge' || txn.type === 'payment') return 'charge';
  if (txn.type === 'refund' || txn.type === 'payment_refund') return 'refund';
  const source = txn.source as { object?: string } | string | null;
  const ofDispute = typeof source === 'object' && source !== null ? source.object === 'dispute' : typeof source === 'string' && /^(dp|du)_/.test(source);
  if (txn.type !== 'adjustment' || !ofDispute) return null;
  if (txn.reporting_category === 'dispute_reversal') return 'dispute_reversal';
  if (txn.reporting_category === 'dispute') return 'dispute';
  return txn.amount < 0 ? 'dispute' : 'dispute_reversal';
}

export function toBalanceTransaction(txn: Stripe.BalanceTransaction): ProviderBalanceTransaction | null {
  const type = lineType(txn);
  if (type === null) return null;
  const source = txn.source;
  const sourceId = typeof source === 'string' ? source : (source?.id ?? '');
  const paymentIntentOf = (value: unknown): { id: string; reference: string | null } | null => {
    if (typeof value === 'string') return { id: value, reference: null };
    if (value && typeof value === 'object' && 'id' in value) {
      const intent = value as Stripe.PaymentIntent;
      return { id: intent.id, reference: intent.metadata?.['reference'] ?? null };
    }
    return null;
  };
  let chargeId = sourceId;
  let reference: string | null = null;
  if (source && typeof source === 'object') {
    const expanded = source as { object?: string; payment_intent?: unknown; metadata?: Record<string, string> | null };
    const intent = paymentIntentOf(expanded.payment_intent);
    if (intent) chargeId = intent.id;
    reference = type === 'refund' ? (expanded.metadata?.['reference'] ?? null) : (intent?.reference ?? expanded.metadata?.['reference'] ?? null);
  }
  return {
    id: txn.id,
    type,
    source: sourceId,
    chargeId,
    reference,
    amountMinor: txn.amount,
    feeMinor: txn.fee,
    currency: txn.currency.toUpperCase(),
    status: txn.status === 'available' ? 'available' : 'pending',
    createdAt: new Date(txn.created * 1000),
  };
}

export function toRefund(refund: Stripe.Refund): ProviderRefund {
  const chargeId = typeof refund.payment_intent === 'string' ? refund.payment_intent : (refund.payment_intent?.id ?? '');
  const base = { id: refund.id, chargeId, amountMinor: refund.amount };
  switch (refund.status) {
    case 'succeeded':
      return { ...base, status: 'succeeded', failureCode: null, failureMessage: null };
    case 'failed':
    case 'canceled':
      return {
        ...base,
        status: 'failed',
        failureCode: refund.failure_reason ?? refund.status,
        failureMessage: `Refund ${refund.status}${refund.failure_reason ? `: ${refund.failure_reason}` : ''}`,
      };
    default:
      // 'pending', 'requires_action': finishes later (Stripe sends a webhook); until then the
      // outcome is unknown and findRefundByIdempotencyKey will report it once finished.
      throw new ProviderUnavailableError(`Refund ${refund.id} is ${refund.status}; outcome not known yet`);
  }
}

/** Stripe's dispute statuses as our stage and status: `warning_*` is an inquiry (no money moved yet). */
const disputeStandings: Readonly<Record<string, Pick<ProviderDispute, 'stage' | 'status'>>> = {
  warning_needs_response: { stage: 'inquiry', status: 'needs_response' },
  warning_under_review: { stage: 'inquiry', status: 'under_review' },
  // An inquiry closed without becoming a chargeback: nothing was lost.
  warning_closed: { stage: 'inquiry', status: 'won' },
  needs_response: { stage: 'chargeback', status: 'needs_response' },
  under_review: { stage: 'chargeback', status: 'under_review' },
  won: { stage: 'chargeback', status: 'won' },
  lost: { stage: 'chargeback', status: 'lost' },
  // Stopped before it became a dispute (e.g. by a prevention network): nothing was lost.
  prevented: { stage: 'inquiry', status: 'won' },
};

const isoOf = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();

/**
 * A Stripe Dispute as ours. The charge is its PaymentIntent (our charge id), the reference our
 * payment id from the PaymentIntent's metadata when it is expanded (null otherwise: the charge
 * id finds the payment). The evidence deadline is evidence_details.due_by (none: its creation).
 * Stripe says how often evidence was submitted, not when: a submitted dispute's submission time
 * is `observedAt`, when this answer or event was made (the first one recorded is kept,
 * db/disputes.ts). The fee is what the
 * withdrawal took (its balance transactions' positive fees). A status this mapping does not know
 * is an unknown outcome (ProviderUnavailableError): nothing acts on a guess.
 */
export function toDispute(dispute: Stripe.Dispute, observedAt: Date): ProviderDispute {
  const standing = disputeStandings[dispute.status];
  if (!standing) throw new ProviderUnavailableError(`Dispute ${dispute.id} is ${dispute.status}; not a status this adapter knows`);
  const intent = dispute.payment_intent;
  const chargeId = (typeof intent === 'string' ? intent : intent?.id) ?? (typeof dispute.charge === 'string' ? dispute.charge : dispute.charge.id);
  const details = dispute.evidence_details;
  const submittedAt = details && details.submission_count > 0 ? (Number.isFinite(observedAt.getTime()) ? observedAt : new Date(dispute.created * 1000)).toISOString() : null;
  return {
    id: dispute.id,
    chargeId,
    reference: typeof intent === 'object' && intent !== null ? (intent.metadata?.['reference'] ?? null) : null,
    amountMinor: dispute.amount,
    currency: dispute.currency.toUpperCase(),
    reason: dispute.reason,
    ...standing,
    evidenceDueBy: isoOf(details?.due_by ?? dispute.created),
    evidenceSubmittedAt: submittedAt,
    createdAt: isoOf(dispute.created),
    feeMinor: standing.stage === 'chargeback' ? (dispute.balance_transactions ?? []).reduce((sum, txn) => sum + Math.max(0, txn.fee), 0) : 0,
  };
}

/** The evidence Stripe holds for a dispute: its text fields that are set (file fields are ids, kept as they are). */
export function evidenceOf(dispute: Stripe.Dispute): Record<string, string> {
  return Object.fromEntries(Object.entries(dispute.evidence ?? {}).filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== ''));
}

/** Stripe's event types in ours; the charge is the PaymentIntent, as everywhere in this adapter. */
const paymentIntentEvents: Record<string, string> = {
  'payment_intent.requires_action': 'charge.requires_action',
  'payment_intent.processing': 'charge.processing',
  'payment_intent.succeeded': 'charge.succeeded',
  'payment_intent.amount_capturable_updated': 'charge.requires_capture',
  'payment_intent.payment_failed': 'charge.declined',
  'payment_intent.canceled': 'charge.canceled',
};

/**
 * The fields of Stripe's objects that toCharge and toRefund read, as zod schemas: a signed event
 * whose PaymentIntent or Refund lacks one, has it null where it may not be, or of another type is
 * refused with the field's path (ProviderEventUnreadableError) before anything is mapped. Other
 * fields pass, and statuses stay open strings (an unknown one passes the event through). Ids,
 * references and codes are at most 255 characters (Stripe: "IDs can be up to 255 characters";
 * ../wire-identifiers.ts), a Customer's and a PaymentMethod's half that each, as a saved card's
 * token joins the two (savedCardToken).
 */
const minor = z.int().nonnegative();
/** Unix seconds a Date can hold as an ISO 8601 string (years 0001 to 9999). */
const unixSeconds = z.int().min(-62_135_596_800).max(253_402_300_799);

const latestChargeSchema = z
  .looseObject({
    amount_refunded: minor.optional(),
    status: z.string().nullish(),
    created: unixSeconds.optional(),
    payment_method_details: z
      .looseObject({
        type: z.string().nullish(),
        card: z
          .looseObject({
            brand: z.string().nullish(),
            last4: z.string().nullish(),
            exp_month: z.int().min(1).max(12).nullish(),
            exp_year: z.int().nullish(),
            network_transaction_id: pspText().nullish(),
            fingerprint: pspText().nullish(),
          })
          .nullish(),
      })
      .nullish(),
  })
  .refine((c) => c.created !== undefined || c.payment_method_details?.type !== 'card' || c.status === 'failed', {
    message: 'a card charge that did not fail says when it was created',
    path: ['created'],
  });

/** A Customer's or a PaymentMethod's id, or the object naming it: half an id's bound (the saved card's token is both). */
const halfId = pspId(Math.floor(PSP_IDENTIFIER_MAX_LENGTH / 2));
const halfIdOrObject = z.union([halfId, z.looseObject({ id: halfId })]);

const paymentIntentSchema = z.looseObject({
  id: pspId(),
  amount: minor,
  amount_received: minor,
  currency: z.string().regex(/^[A-Za-z]{3}$/, 'must be an ISO 4217 code'),
  status: z.string(),
  capture_method: z.string().nullish(),
  metadata: z.looseObject({ reference: pspText().optional() }).nullish(),
  latest_charge: z.union([pspText(), latestChargeSchema]).nullish(),
  customer: halfIdOrObject.nullish(),
  payment_method: halfIdOrObject.nullish(),
  setup_future_usage: z.string().nullish(),
  last_payment_error: z.looseObject({ decline_code: pspText().nullish(), code: pspText().nullish(), message: z.string().nullish() }).nullish(),
  next_action: z
    .looseObject({ type: z.string(), redirect_to_url: z.looseObject({ url: z.string().nullish(), return_url: z.string().nullish() }).nullish() })
    .nullish(),
});

const refundSchema = z.looseObject({
  id: pspId(),
  amount: minor,
  status: z.string().nullish(),
  payment_intent: z.union([pspText(), z.looseObject({ id: pspText() })]).nullish(),
  failure_reason: pspText().nullish(),
});

const idOrObject = z.union([pspId(), z.looseObject({ id: pspId() })]);

const disputeSchema = z.looseObject({
  id: pspId(),
  amount: minor,
  currency: z.string().regex(/^[A-Za-z]{3}$/, 'must be an ISO 4217 code'),
  reason: pspText(),
  status: z.string(),
  created: unixSeconds,
  charge: idOrObject,
  payment_intent: z.union([pspId(), z.looseObject({ id: pspId(), metadata: z.looseObject({ reference: pspText().optional() }).nullish() })]).nullish(),
  evidence_details: z.looseObject({ due_by: unixSeconds.nullish(), submission_count: z.int().nonnegative() }).nullish(),
  balance_transactions: z.array(z.looseObject({ fee: z.int().min(-1e12).max(1e12) })).nullish(),
});

/** The event as the Stripe library returns it once verified (the body parsed, nothing checked). */
const eventSchema = z.object({
  id: pspId(),
  type: pspId(PSP_EVENT_TYPE_MAX_LENGTH),
  /** Unix seconds. */
  created: z.number(),
  data: z.object({ object: z.looseObject({ object: z.unknown() }) }),
});

export function toWebhookEvent(body: unknown): ProviderWebhookEvent {
  const event = readWire(eventSchema, body);
  const base = { id: event.id, createdAt: new Date(event.created * 1000), charge: null, refund: null, dispute: null };
  const object = event.data.object;
  const at = ['data', 'object'];
  // `charge.dispute.created|updated|closed|funds_withdrawn|funds_reinstated` carry the Dispute:
  // under the same names as the sandbox's, the dispute the inbound route re-reads from Stripe.
  if (object.object === 'dispute' && event.type.startsWith('charge.dispute.')) {
    const dispute = readWire(disputeSchema, object, at) as unknown as Stripe.Dispute;
    if (disputeStandings[dispute.status]) return { ...base, type: event.type, dispute: toDispute(dispute, base.createdAt) };
  }
  if (object.object === 'payment_intent') {
    const intent = readWire(paymentIntentSchema, object, at) as unknown as Stripe.PaymentIntent;
    let charge: ProviderCharge;
    try {
      charge = toCharge(intent);
    } catch {
      // requires_confirmation: nothing to act on.
      return { ...base, type: `stripe.${event.type}` };
    }
    return { ...base, type: paymentIntentEvents[event.type] ?? `stripe.${event.type}`, charge };
  }
  if (object.object === 'refund' && event.type.startsWith('refund.')) {
    const refund = readWire(refundSchema, object, at) as unknown as Stripe.Refund;
    if (refund.status === 'succeeded' || refund.status === 'failed' || refund.status === 'canceled') {
      const mapped = toRefund(refund);
      return { ...base, type: `refund.${mapped.status}`, refund: mapped };
    }
  }
  if (event.type === 'charge.refunded') return { ...base, type: 'charge.refunded' };
  return { ...base, type: `stripe.${event.type}` };
}
