import Stripe from 'stripe';
import { ProviderWebhookError, type ProviderCharge, type ProviderWebhookEvent } from '../types';
import { toCharge, toRefund } from './client';

export interface StripeWebhookSettings {
  /** The endpoint's signing secret ('whsec_…'); null: every webhook is refused. */
  secret: string | null;
  /** How old a signature's timestamp may be, in seconds (undefined: the Stripe library's, 300). */
  toleranceSeconds?: number | undefined;
}

/**
 * Verified by the Stripe library itself (Stripe-Signature, its tolerance), then mapped: the
 * payment_intent.* events carry the PaymentIntent (our charge), refund events the Refund.
 */
export function verifyStripeWebhook(rawBody: string, headers: Record<string, string | undefined>, settings: StripeWebhookSettings, now: Date = new Date()): ProviderWebhookEvent {
  if (!settings.secret) throw new ProviderWebhookError('no Stripe webhook secret is configured (PROVIDER_<NAME>_WEBHOOK_SECRET or STRIPE_WEBHOOK_SECRET)');
  const header = Object.entries(headers).find(([name]) => name.toLowerCase() === 'stripe-signature')?.[1];
  if (!header) throw new ProviderWebhookError('missing Stripe-Signature header');
  let event: Stripe.Event;
  try {
    event = Stripe.webhooks.constructEvent(rawBody, header, settings.secret, settings.toleranceSeconds, undefined, now.getTime());
  } catch (error) {
    throw new ProviderWebhookError(`Stripe webhook refused: ${(error as Error).message}`);
  }
  return toWebhookEvent(event);
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

function toWebhookEvent(event: Stripe.Event): ProviderWebhookEvent {
  const base = { id: event.id, createdAt: new Date(event.created * 1000), charge: null, refund: null };
  const object = event.data.object as { object?: string };
  if (object.object === 'payment_intent') {
    const intent = object as Stripe.PaymentIntent;
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
    const refund = object as Stripe.Refund;
    if (refund.status === 'succeeded' || refund.status === 'failed' || refund.status === 'canceled') {
      const mapped = toRefund(refund);
      return { ...base, type: `refund.${mapped.status}`, refund: mapped };
    }
  }
  if (event.type === 'charge.refunded') return { ...base, type: 'charge.refunded' };
  return { ...base, type: `stripe.${event.type}` };
}

