import { z } from 'zod';
import { defineProviderKind, httpUrl } from '../kind';

/**
 * Adyen (Checkout API, through the official @adyen/api-library): a charge is a payment, known
 * by its PSP reference. Its client: ./client.ts; its wire mapping (Adyen's models to and from
 * ours, and our test payment methods as Adyen's test cards): ./wire.ts; its notifications'
 * HMAC validation (the library's): ./webhook.ts. Its double, for tests and `npm start`:
 * doubles/adyen/.
 */
export const adyen = defineProviderKind({
  kind: 'adyen',
  settings: z.object({
    /** Adyen's test Checkout API; another address is an Adyen double (doubles/adyen/). */
    url: httpUrl().default('https://checkout-test.adyen.com'),
    /** The API key (X-API-Key). */
    apiKey: z.string({ error: 'is required' }).min(1, 'is required'),
    /** The merchant account every request names. */
    merchantAccount: z.string({ error: 'is required' }).min(1, 'is required'),
    /** The webhook's HMAC key (hex); null: its notifications are refused. */
    hmacKey: z.string().regex(/^[0-9a-fA-F]{32,}$/, 'must be hex (32+ digits)').nullable(),
  }),
  // No lookup by our key: a lost answer is resolved by the same request under its Idempotency-Key.
  // Captures, cancels and refunds are answered `received` and confirmed by notification, in batches.
  // Cards are stored per shopper (storePaymentMethod) and charged by their stored id (ContAuth);
  // another processor's network transaction id needs the card's full number, which we never hold.
  capabilities: { balanceReport: false, unknownOutcome: 'replay', modifications: 'notified', notifications: 'batch', savedMethods: true, networkTransactionIds: false },
  async createClient(settings, { timeoutMs }) {
    const { AdyenProvider } = await import('./client');
    return new AdyenProvider({ baseUrl: settings.url, apiKey: settings.apiKey, merchantAccount: settings.merchantAccount, hmacKey: settings.hmacKey, timeoutMs });
  },
  async createWebhookVerifier(settings) {
    const { verifyAdyenWebhook } = await import('./webhook');
    return (rawBody) => verifyAdyenWebhook(rawBody, { hmacKey: settings.hmacKey });
  },
  async createBatchVerifier(settings) {
    const { verifyAdyenNotificationBatch } = await import('./webhook');
    return (rawBody) => verifyAdyenNotificationBatch(rawBody, { hmacKey: settings.hmacKey });
  },
});
