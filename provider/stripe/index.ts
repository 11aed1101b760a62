import { z } from 'zod';
import { defineProviderKind, httpUrl } from '../kind';
import { stripeTestPaymentMethods } from './test-payment-methods';

/**
 * Stripe: a charge is a PaymentIntent. Its client: ./client.ts; its wire mapping (the SDK's
 * objects to and from ours): ./wire.ts; its webhook verification (the Stripe library's):
 * ./webhook.ts.
 */
export const stripe = defineProviderKind({
  kind: 'stripe',
  settings: z.object({
    /** Stripe's API; another address is a Stripe-compatible fake (stripe-mock in tests). */
    url: httpUrl().default('https://api.stripe.com'),
    /** The secret API key (`sk_…`). */
    apiKey: z.string({ error: 'is required' }).min(1, 'is required'),
    /** The webhook endpoint's signing secret (`whsec_…`); null: its webhooks are refused. */
    webhookSecret: z.string().min(1).nullable(),
  }),
  // Search, by which it finds a PaymentIntent by our key, is eventually consistent (./client.ts).
  // It saves cards as its own Customer and PaymentMethod, but its API takes no network
  // transaction id of another processor for a merchant-initiated charge.
  webhookBody: 'one Event a request, signed in `Stripe-Signature` (checked by the Stripe library, within its tolerance)',
  capabilities: { balanceReport: true, chargeSearch: true, unknownOutcome: 'lagging-lookup', modifications: 'final', notifications: 'event', savedMethods: true, networkTransactionIds: false, challengeReturn: 'merchant', disputeSource: 'retrieval' },
  testPaymentMethods: stripeTestPaymentMethods,
  // Cards (our names with a Stripe test card, a merchant's own PaymentMethod ids as given).
  paymentMethods: { types: ['card'], testMethods: Object.keys(stripeTestPaymentMethods), pspTokens: true },
  async createClient(settings, { timeoutMs }) {
    const { StripeProvider } = await import('./client');
    const url = new URL(settings.url);
    const elsewhere = url.hostname !== 'api.stripe.com';
    return new StripeProvider({
      apiKey: settings.apiKey,
      timeoutMs,
      webhookSecret: settings.webhookSecret,
      ...(elsewhere ? { host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), protocol: url.protocol === 'https:' ? 'https' : 'http' } : {}),
    });
  },
  async createWebhookVerifier(settings) {
    const { verifyStripeWebhook } = await import('./webhook');
    return (rawBody, headers, now) => verifyStripeWebhook(rawBody, headers, { secret: settings.webhookSecret }, now);
  },
});
