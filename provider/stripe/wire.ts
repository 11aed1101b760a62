import type Stripe from 'stripe';
import { z } from 'zod';
import { ProviderUnavailableError, readWire, type ProviderBalanceTransaction, type ProviderCharge, type ProviderRefund, type ProviderWebhookEvent } from '../types';

/**
 * Stripe's objects in the orchestrator's terms: a PaymentIntent is our charge (ProviderCharge),
 * a Refund our refund, a BalanceTransaction of a payment or a refund our balance line, and
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
 * transaction id and the card (the latest Charge's payment_method_details.card), and our token
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

export function toBalanceTransaction(txn: Stripe.BalanceTransaction): ProviderBalanceTransaction | null {
  const type = txn.type === 'charge' || txn.type === 'payment' ? 'charge' : txn.type === 'refund' || txn.type === 'payment_refund' ? 'refund' : null;
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
 * fields pass, and statuses stay open strings (an unknown one passes the event through).
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
            network_transaction_id: z.string().nullish(),
          })
          .nullish(),
      })
      .nullish(),
  })
  .refine((c) => c.created !== undefined || c.payment_method_details?.type !== 'card' || c.status === 'failed', {
    message: 'a card charge that did not fail says when it was created',
    path: ['created'],
  });

const paymentIntentSchema = z.looseObject({
  id: z.string().min(1),
  amount: minor,
  amount_received: minor,
  currency: z.string().regex(/^[A-Za-z]{3}$/, 'must be an ISO 4217 code'),
  status: z.string(),
  capture_method: z.string().nullish(),
  metadata: z.looseObject({ reference: z.string().optional() }).nullish(),
  latest_charge: z.union([z.string(), latestChargeSchema]).nullish(),
  customer: z.union([z.string(), z.looseObject({ id: z.string() })]).nullish(),
  payment_method: z.union([z.string(), z.looseObject({ id: z.string() })]).nullish(),
  setup_future_usage: z.string().nullish(),
  last_payment_error: z.looseObject({ decline_code: z.string().nullish(), code: z.string().nullish(), message: z.string().nullish() }).nullish(),
  next_action: z
    .looseObject({ type: z.string(), redirect_to_url: z.looseObject({ url: z.string().nullish(), return_url: z.string().nullish() }).nullish() })
    .nullish(),
});

const refundSchema = z.looseObject({
  id: z.string().min(1),
  amount: minor,
  status: z.string().nullish(),
  payment_intent: z.union([z.string(), z.looseObject({ id: z.string() })]).nullish(),
  failure_reason: z.string().nullish(),
});

/** The event as the Stripe library returns it once verified (the body parsed, nothing checked). */
const eventSchema = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  /** Unix seconds. */
  created: z.number(),
  data: z.object({ object: z.looseObject({ object: z.unknown() }) }),
});

export function toWebhookEvent(body: unknown): ProviderWebhookEvent {
  const event = readWire(eventSchema, body);
  // Stripe's disputes are not read by this kind (no dispute capability): its `charge.dispute.*`
  // events pass through as `stripe.charge.dispute.*`, with no dispute.
  const base = { id: event.id, createdAt: new Date(event.created * 1000), charge: null, refund: null, dispute: null };
  const object = event.data.object;
  const at = ['data', 'object'];
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
