import { z } from 'zod';
import { defineProviderKind, httpUrl } from '../kind';
// Its module imports no SDK at run time (the library's types only).
import { ADYEN_TEST_DISPUTES_URL } from './disputes';
import { adyenDouble } from './double';
import { ADYEN_MERCHANT_REFERENCE_MAX_LENGTH, ADYEN_PSP_REFERENCE_LENGTH } from './identifiers';
import { adyenTestCards } from './test-cards';

/**
 * Adyen (Checkout API, through the official @adyen/api-library): a charge is a payment, known
 * by its PSP reference. Its client: ./client.ts; its wire mapping (Adyen's models to and from
 * ours, and our test payment methods as Adyen's test cards): ./wire.ts; its notifications'
 * HMAC validation (the library's): ./webhook.ts. Its double, for tests and `npm start`:
 * doubles/adyen/, declared in ./double.ts.
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
    /** Adyen's Disputes service (its own host, not Checkout's); unset: Adyen's test one. A double serves it under a path of its own URL (doubles/adyen/disputes.ts). */
    disputesUrl: httpUrl().nullable().transform((url) => url ?? ADYEN_TEST_DISPUTES_URL),
    /** The webhook's HMAC key (hex); null: its notifications are refused. */
    hmacKey: z.string().regex(/^[0-9a-fA-F]{32,}$/, 'must be hex (32+ digits)').nullable(),
    /** The report host its Settlement details reports are downloaded from (Adyen's test one; live: https://ca-live.adyen.com). */
    reportUrl: httpUrl().nullable().transform((url) => url ?? 'https://ca-test.adyen.com'),
    /** The report user's name and password (basic auth; e.g. `report_123456@Company.Acme`); null: its API key. */
    reportUsername: z.string().min(1).nullable(),
    reportPassword: z.string().min(1).nullable(),
    /** The report user's API key (X-API-Key), when it has no password here; none of the three: each reconciliation run fails, saying so. */
    reportApiKey: z.string().min(1).nullable(),
  }),
  // No lookup by our key: a lost answer is resolved by the same request under its Idempotency-Key.
  // Captures, cancels and refunds are answered `received` and confirmed by notification, in batches.
  // Money moved is in the Settlement details report, per closed batch; there is no search by our reference.
  // Cards are stored per shopper (storePaymentMethod) and charged by their stored id (ContAuth);
  // another processor's network transaction id needs the card's full number, which we never hold.
  // Its Disputes API answers commands only: a dispute is known by its signed notifications.
  // Cards: Adyen's test cards by our names (and the double's own), and the cards it stored; no other method reaches its client.
  paymentMethods: { types: ['card'], testMethods: Object.keys(adyenTestCards), pspTokens: false },
  webhookBody:
    'batches, `{live, notificationItems: [{NotificationRequestItem}]}`, each item signed with its own HMAC in `additionalData.hmacSignature`, ' +
    `answered \`[accepted]\`; its \`pspReference\` and \`originalReference\` at most ${ADYEN_PSP_REFERENCE_LENGTH} characters, its \`merchantReference\` ${ADYEN_MERCHANT_REFERENCE_MAX_LENGTH}; a dispute ` +
    '(NOTIFICATION_OF_CHARGEBACK, CHARGEBACK, CHARGEBACK_REVERSED, SECOND_CHARGEBACK, …) without `originalReference`, or with an unreadable ' +
    '`additionalData.defensePeriodEndsAt`, is unreadable',
  capabilities: { balanceReport: true, chargeSearch: false, unknownOutcome: 'replay', modifications: 'notified', notifications: 'batch', savedMethods: true, networkTransactionIds: false, challengeReturn: 'orchestrator', disputeSource: 'notification' },
  async createClient(settings, { timeoutMs }) {
    const { AdyenProvider } = await import('./client');
    return new AdyenProvider({
      baseUrl: settings.url,
      disputesUrl: settings.disputesUrl,
      apiKey: settings.apiKey,
      merchantAccount: settings.merchantAccount,
      hmacKey: settings.hmacKey,
      timeoutMs,
      report: { url: settings.reportUrl, username: settings.reportUsername, password: settings.reportPassword, apiKey: settings.reportApiKey },
    });
  },
  async createWebhookVerifier(settings) {
    const { verifyAdyenWebhook } = await import('./webhook');
    return (rawBody) => verifyAdyenWebhook(rawBody, { hmacKey: settings.hmacKey });
  },
  async createBatchVerifier(settings) {
    const { verifyAdyenNotificationBatch } = await import('./webhook');
    return (rawBody) => verifyAdyenNotificationBatch(rawBody, { hmacKey: settings.hmacKey });
  },
  double: adyenDouble,
});
