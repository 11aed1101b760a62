import Stripe from 'stripe';
import { ProviderWebhookError, type ProviderWebhookEvent } from '../types';
import { toWebhookEvent } from './wire';

export interface StripeWebhookSettings {
  /** The endpoint's signing secret ('whsec_…'); null: every webhook is refused. */
  secret: string | null;
  /** How old a signature's timestamp may be, in seconds (undefined: the Stripe library's, 300). */
  toleranceSeconds?: number | undefined;
}

/**
 * Verified by the Stripe library itself (Stripe-Signature, its tolerance), then mapped: the
 * payment_intent.* events carry the PaymentIntent (our charge), refund events the Refund. A
 * field the mapping reads that is missing, null or of another type is a
 * ProviderEventUnreadableError with the field's path.
 */
export function verifyStripeWebhook(rawBody: string, headers: Record<string, string | undefined>, settings: StripeWebhookSettings, now: Date = new Date()): ProviderWebhookEvent {
  if (!settings.secret) throw new ProviderWebhookError('no Stripe webhook secret is configured (PROVIDER_<NAME>_WEBHOOK_SECRET or STRIPE_WEBHOOK_SECRET)');
  const header = Object.entries(headers).find(([name]) => name.toLowerCase() === 'stripe-signature')?.[1];
  if (!header) throw new ProviderWebhookError('missing Stripe-Signature header');
  let event: unknown;
  try {
    event = Stripe.webhooks.constructEvent(rawBody, header, settings.secret, settings.toleranceSeconds, undefined, now.getTime());
  } catch (error) {
    throw new ProviderWebhookError(`Stripe webhook refused: ${(error as Error).message}`);
  }
  // The library checks the signature, not the body: the mapping reads it through its schemas.
  return toWebhookEvent(event);
}
