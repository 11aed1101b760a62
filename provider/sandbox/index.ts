import { z } from 'zod';
import { defineProviderKind, httpUrl } from '../kind';

/** How old (or how far ahead) a webhook's signature timestamp may be, in seconds (as card PSPs allow). */
const WEBHOOK_TOLERANCE_SECONDS = 300;

/**
 * The provider sandbox (sandbox/): the stand-in PSP of development and tests. Its client:
 * ./client.ts; its wire mapping (its JSON to and from ours): ./wire.ts; its webhook
 * verification: ./webhook.ts.
 */
export const sandbox = defineProviderKind({
  kind: 'sandbox',
  settings: z.object({
    /** Where `npm run sandbox` listens unless told otherwise. */
    url: httpUrl().default('http://127.0.0.1:4010'),
    /** The secret the sandbox signs its webhooks with; null: its webhooks are refused. */
    webhookSecret: z.string().min(16, 'must be 16+ characters').nullable(),
  }),
  // Its names are our test payment methods; a card it saved is charged by its own token (savedMethods).
  paymentMethods: { types: ['card', 'sepa_debit'], testMethods: 'all', pspTokens: false },
  webhookBody: 'one event a request, `{id, type, created, data: {object}}`, signed in `Sandbox-Signature` (`t=<unix seconds>,v1=<HMAC-SHA256 of "<t>.<raw body>">`, within 300 s)',
  capabilities: { balanceReport: true, chargeSearch: true, unknownOutcome: 'lookup', modifications: 'final', notifications: 'event', savedMethods: true, networkTransactionIds: true, challengeReturn: 'merchant', disputeSource: 'retrieval' },
  async createClient(settings, { timeoutMs }) {
    const { SandboxProvider } = await import('./client');
    return new SandboxProvider({ baseUrl: settings.url, timeoutMs, webhookSecret: settings.webhookSecret, webhookToleranceSeconds: WEBHOOK_TOLERANCE_SECONDS });
  },
  async createWebhookVerifier(settings) {
    const { verifySandboxWebhook } = await import('./webhook');
    return (rawBody, headers, now) => verifySandboxWebhook(rawBody, headers, { secret: settings.webhookSecret, toleranceSeconds: WEBHOOK_TOLERANCE_SECONDS }, now);
  },
});
