import type { RoutePlanner } from '../../activities';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import { adyenTestCards } from '../../provider/adyen/wire';
import type { ProviderCapabilities } from '../../provider/kind';
import { providerKind } from '../../provider/registry';
import { StripeProvider } from '../../provider/stripe/client';
import type { PaymentProvider } from '../../provider/types';
import { knownPaymentMethods } from '../../sandbox/payment-methods';
import { sandboxControls } from '../../testkit/sandbox';
import { apiClient, startStack, type Tenant, type TestStack } from './stack';
import { startStripeFake, type StripeFake } from './stripe-fake';

/**
 * Every kind of provider/kinds.ts as the tests run it: how its PSP is started for tests (the
 * sandbox, Stripe's fake behaving as Stripe's test mode, the Adyen double), the connection's
 * name in the worker's registry, and a tenant routed to it. The flows of
 * test/integration/kinds/ run at every kind here wherever its capabilities (its descriptor's)
 * and its test payment methods allow.
 */

/** A charge as the PSP itself holds it (its own state, not ours). */
export interface PspCharge {
  status: 'succeeded' | 'requires_capture' | 'requires_action' | 'declined' | 'canceled';
  capturedMinor: number;
  refundedMinor: number;
}

/** What is known of a kind before anything starts: what decides which flows are registered for it. */
export interface KindUnderTest {
  /** The descriptor's kind (provider/kinds.ts). */
  kind: string;
  /** The connection's name in the worker's registry: what a payment's `provider` says. */
  name: string;
  capabilities: ProviderCapabilities;
  /**
   * Our test payment methods (sandbox/payment-methods.ts's names) its PSP for tests behaves as
   * the sandbox does for: a flow that needs one runs only at a kind that has it.
   */
  paymentMethods: readonly string[];
}

/** A kind's PSP running, its tenant routed to it. */
export interface RunningKind extends KindUnderTest {
  tenant: Tenant;
  api: ReturnType<typeof apiClient>;
  /** The same tenant through an API that answers an operation still running 202 after 1.5 s (the stack's waits 10 s). */
  impatientApi: ReturnType<typeof apiClient>;
  /** The worker's client of it. */
  client: PaymentProvider;
  /** The charges the PSP made for one of our payments (its reference), in order. */
  charges(paymentId: string): Promise<PspCharge[]>;
  /** On: the PSP does what it is asked and the answer is lost (the connection cut or never answered). */
  loseAnswers(on: boolean): Promise<void>;
  /** Where its PSP takes the sandbox's control calls (/_sandbox/webhook_faults, events, redeliver); null: it takes none. */
  controlsUrl: string | null;
  /** A dispute as its PSP holds it: the charge it disputes and where it stands (`needs_response`, `won`, `lost`). */
  disputeAtPsp(disputeId: string): Promise<{ chargeId: string; status: string }>;
}

/** A dispute read from a PSP that has a read of its disputes (disputeSource `retrieval`). */
async function readDispute(client: PaymentProvider, disputeId: string): Promise<{ chargeId: string; status: string }> {
  const dispute = await client.disputes!.retrieveDispute(disputeId);
  return { chargeId: dispute.chargeId, status: dispute.status };
}

/** Our names that Adyen's test cards stand for (provider/adyen/wire.ts). */
const adyenNames = Object.keys(adyenTestCards);

export const kindsUnderTest: readonly KindUnderTest[] = [
  { kind: 'sandbox', name: 'sandbox', paymentMethods: knownPaymentMethods },
  { kind: 'stripe', name: 'stripe-test', paymentMethods: Object.keys(providerKind('stripe').testPaymentMethods ?? {}) },
  { kind: 'adyen', name: 'adyen-test', paymentMethods: adyenNames },
].map((k) => ({ ...k, capabilities: providerKind(k.kind).capabilities }));

const ADYEN = { apiKey: 'kinds_api_key', merchantAccount: 'KindsTest', hmacKey: '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056' };
const STRIPE_WEBHOOK_SECRET = 'whsec_kinds_0123456789abcdef';

export interface KindsStack {
  stack: TestStack;
  kinds: ReadonlyMap<string, RunningKind>;
  stop(): Promise<void>;
}

/**
 * One test stack with every kind's PSP beside the stack's sandbox in the worker's registry, each
 * PSP's webhooks to the API's /provider_webhooks/<name>, and one tenant per kind whose every
 * payment is routed to that kind alone. Short windows for the waits a flow meets (the disputes
 * open and are decided in 200 ms; a second API answers an operation still running after 1.5 s).
 */
export async function startKinds(): Promise<KindsStack> {
  const double: AdyenDouble = await startAdyenDouble({ ...ADYEN, webhookUrl: null });
  const stripe: StripeFake = await startStripeFake({ webhookSecret: STRIPE_WEBHOOK_SECRET, disputeAfterMs: 200 });
  const clients: Record<string, PaymentProvider> = {
    'stripe-test': new StripeProvider({ apiKey: 'sk_test_kinds', host: stripe.host, port: stripe.port, protocol: 'http', timeoutMs: 1_500, webhookSecret: STRIPE_WEBHOOK_SECRET }),
    'adyen-test': new AdyenProvider({ baseUrl: double.url, disputesUrl: double.disputesUrl, ...ADYEN, timeoutMs: 1_500 }),
  };
  const routes = new Map<string, string>();
  const route: RoutePlanner = async (request) => {
    const name = routes.get(request.tenantId) ?? 'sandbox';
    return { providers: [name], reason: `test route: ${name}` };
  };
  const stack = await startStack({
    route,
    extraProviders: clients,
    sandbox: { disputes: { disputeAfterMs: 200, disputeDecisionMs: 200 } },
    api: { DISPUTE_POLL_SECONDS: 1 },
  });
  const impatient = await stack.startApi({ IDEMPOTENCY_WAIT_MS: 1500 });
  double.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/adyen-test`);
  stripe.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/stripe-test`);
  const sandbox = sandboxControls(stack.sandboxUrl);

  /** Each kind's PSP seen from its own side. */
  const psp: Record<string, Pick<RunningKind, 'charges' | 'loseAnswers' | 'client' | 'controlsUrl' | 'disputeAtPsp'>> = {
    sandbox: {
      client: stack.provider,
      controlsUrl: stack.sandboxUrl,
      disputeAtPsp: (disputeId) => readDispute(stack.provider, disputeId),
      charges: async (paymentId) =>
        (await stack.sql<{ status: PspCharge['status']; captured: number; refunded: number }[]>`
          SELECT status, amount_captured_minor AS captured, amount_refunded_minor AS refunded FROM sandbox.charges WHERE reference = ${paymentId} ORDER BY created_at`).map((c) => ({
          status: c.status,
          capturedMinor: Number(c.captured),
          refundedMinor: Number(c.refunded),
        })),
      // The sandbox's `timeout`: it commits what it is asked and never answers (lookups hang too).
      loseAnswers: async (on) => {
        const answer = await sandbox.outage(on ? 'timeout' : 'none');
        if (answer.status !== 200) throw new Error(`sandbox outage: ${answer.status}`);
      },
    },
    'stripe-test': {
      client: clients['stripe-test']!,
      disputeAtPsp: (disputeId) => readDispute(clients['stripe-test']!, disputeId),
      controlsUrl: null,
      charges: async (paymentId) =>
        stripe.intentsFor(paymentId).map((i) => ({
          status: i.status === 'requires_payment_method' ? 'declined' : (i.status as PspCharge['status']),
          capturedMinor: i.amount_received,
          refundedMinor: i.latest_charge?.amount_refunded ?? 0,
        })),
      loseAnswers: async (on) => stripe.loseAnswers(on),
    },
    'adyen-test': {
      client: clients['adyen-test']!,
      controlsUrl: double.url,
      // Adyen's disputes are read from nothing but its notifications (disputeSource `notification`): the ones the double sent.
      disputeAtPsp: async (disputeId) => {
        const sent = double.notifications.filter((n) => n.pspReference === disputeId).map((n) => String(n.eventCode));
        if (sent.length === 0) throw new Error(`the double sent nothing about dispute ${disputeId}`);
        const chargeId = double.notifications.find((n) => n.pspReference === disputeId)!.originalReference ?? '';
        // A reversal is the defence's first answer; the issuer's second chargeback, if any, decides.
        const status = sent.some((c) => c === 'SECOND_CHARGEBACK' || c === 'DISPUTE_DEFENSE_PERIOD_ENDED') ? 'lost' : sent.includes('CHARGEBACK_REVERSED') ? 'won' : 'needs_response';
        return { chargeId, status };
      },
      charges: async (paymentId) =>
        double.paymentsFor(paymentId).map((p) => {
          const cancelled = double.notifications.some((n) => ['CANCELLATION', 'TECHNICAL_CANCEL'].includes(String(n.eventCode)) && n.originalReference === p.pspReference && String(n.success) === 'true');
          const challenging = p.challenged !== undefined && p.challenged.answer === null;
          const status: PspCharge['status'] = p.authorised ? (p.capturedMinor > 0 ? 'succeeded' : 'requires_capture') : cancelled ? 'canceled' : challenging ? 'requires_action' : 'declined';
          return { status, capturedMinor: p.capturedMinor, refundedMinor: p.refundedMinor };
        }),
      loseAnswers: async (on) => {
        const answer = await fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode: on ? 'lose-answers' : 'none' }) });
        if (answer.status !== 200) throw new Error(`adyen double outage: ${answer.status}`);
      },
    },
  };

  const kinds = new Map<string, RunningKind>();
  for (const kind of kindsUnderTest) {
    const tenant = await stack.createTenant(`kind-${kind.name}`);
    routes.set(tenant.id, kind.name);
    kinds.set(kind.name, { ...kind, ...psp[kind.name]!, tenant, api: apiClient(stack.apiUrl, tenant.apiKey), impatientApi: apiClient(impatient.url, tenant.apiKey) });
  }
  return {
    stack,
    kinds,
    async stop() {
      await stack.stop();
      await double.close();
      await stripe.close();
    },
  };
}
