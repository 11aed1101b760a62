import Stripe from 'stripe';
import {
  ProviderRejectedError,
  ProviderUnavailableError,
  type CallOptions,
  type ProviderBalanceTransaction,
  type ProviderWebhookEvent,
  type CaptureChargeRequest,
  type CreateChargeRequest,
  type CreateRefundRequest,
  type DisputeProvider,
  type PaymentProvider,
  type ProviderCharge,
  type ProviderRefund,
  type VoidChargeRequest,
} from '../types';
import { verifyStripeWebhook } from './webhook';
import { evidenceOf, parseSavedCardToken, toBalanceTransaction, toCharge, toDispute, toRefund } from './wire';

export interface StripeProviderConfig {
  apiKey: string;
  /** host/port/protocol point the SDK elsewhere than api.stripe.com (tests use a local fake). */
  host?: string;
  port?: number;
  protocol?: 'http' | 'https';
  /** Per HTTP call; past it the outcome is unknown (ProviderUnavailableError). */
  timeoutMs?: number;
  /**
   * The SDK's own retries. 0 by default: the orchestrator's activity retries already
   * repeat the call with the same key after looking the operation up, and a second retry
   * loop hidden in here would only stretch the activity past its timeout.
   */
  maxNetworkRetries?: number;
  /** The endpoint's signing secret ('whsec_…', STRIPE_WEBHOOK_SECRET); verifyWebhook refuses everything without it. */
  webhookSecret?: string | null;
  /** How old a signature's timestamp may be, in seconds (default: the Stripe library's, 300). */
  webhookToleranceSeconds?: number;
}

/** How far back a refund lookup scans; Stripe prunes idempotency keys after 24 hours. */
const refundLookupWindowSeconds = 48 * 3600;

/**
 * Stripe behind the PaymentProvider interface. A "charge" here is a PaymentIntent: it is
 * created and confirmed in one call, with capture_method manual for authorize-only, and
 * its id is the charge id the orchestrator stores. Our idempotency key goes to Stripe as
 * the `idempotencyKey` request option of every mutating call.
 */
export class StripeProvider implements PaymentProvider {
  readonly kind = 'stripe';
  private readonly stripe: Stripe;
  private readonly webhookSecret: string | null;
  private readonly webhookToleranceSeconds: number | undefined;

  constructor(config: StripeProviderConfig) {
    this.webhookSecret = config.webhookSecret ?? null;
    this.webhookToleranceSeconds = config.webhookToleranceSeconds;
    this.stripe = new Stripe(config.apiKey, {
      host: config.host,
      port: config.port,
      protocol: config.protocol,
      timeout: config.timeoutMs ?? 30_000,
      maxNetworkRetries: config.maxNetworkRetries ?? 0,
      telemetry: false,
    });
  }

  async createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    // Stripe's API takes no network transaction id of another processor (its kind says
    // networkTransactionIds: false, and routing sends such a card elsewhere): refused, nothing charged.
    if (request.savedMethod && request.savedMethod.token === null) {
      throw new ProviderRejectedError('Stripe cannot charge a card saved at another PSP by its network transaction id', 400, 'network_transaction_id_unsupported');
    }
    try {
      const method = await this.chargedMethod(request, options);
      const intent = await this.send(options, () =>
        this.stripe.paymentIntents.create(
          {
            amount: request.amountMinor,
            currency: request.currency.toLowerCase(),
            ...method,
            // The customer is not there: Stripe declines with authentication_required rather than ask.
            ...(request.offSession ? { off_session: true } : {}),
            confirm: true,
            capture_method: request.capture ? 'automatic' : 'manual',
            // With a return_url the customer can be sent to authenticate (3-D Secure, bank
            // redirects) and comes back there: next_action.redirect_to_url. Without one nobody
            // can follow a redirect, so methods that need one are not offered.
            ...(request.returnUrl != null
              ? { return_url: request.returnUrl, automatic_payment_methods: { enabled: true } }
              : { automatic_payment_methods: { enabled: true, allow_redirects: 'never' as const } }),
            ...(request.description != null ? { description: request.description } : {}),
            // idempotency_key is what findChargeByIdempotencyKey searches for.
            metadata: { reference: request.reference, idempotency_key: request.idempotencyKey },
            expand: ['latest_charge'],
          },
          { idempotencyKey: request.idempotencyKey },
        ),
      );
      return toCharge(intent);
    } catch (error) {
      // Stripe answers a decline with 402 and the PaymentIntent it left behind; a decline
      // is a normal result for us.
      if (error instanceof Stripe.errors.StripeCardError && error.payment_intent) {
        return toCharge(error.payment_intent, error);
      }
      throw toProviderError(error, 'create PaymentIntent');
    }
  }

  /**
   * What the PaymentIntent charges: a saved card by its Customer and PaymentMethod (our token,
   * ./wire.ts savedCardToken); a card to save with a Customer of its own, made first under a key
   * derived from the charge's (a repeated call finds the same Customer), to which Stripe attaches
   * the PaymentMethod once confirmed (setup_future_usage); else the payment method alone.
   */
  private async chargedMethod(request: CreateChargeRequest, options: CallOptions | undefined): Promise<Pick<Stripe.PaymentIntentCreateParams, 'customer' | 'payment_method' | 'setup_future_usage'>> {
    const token = request.savedMethod?.token;
    if (token) {
      const saved = parseSavedCardToken(token);
      if (!saved) throw new ProviderRejectedError(`"${token}" is not a card saved at Stripe (cus_…/pm_…)`, 400, 'invalid_saved_card_token');
      return { customer: saved.customer, payment_method: saved.paymentMethod };
    }
    if (request.setupFutureUsage !== 'off_session') return { payment_method: request.paymentMethod };
    const customer = await this.send(options, () =>
      this.stripe.customers.create({ metadata: { reference: request.reference } }, { idempotencyKey: `${request.idempotencyKey}:customer` }),
    );
    return { customer: customer.id, payment_method: request.paymentMethod, setup_future_usage: 'off_session' };
  }

  /**
   * Stripe cannot look a request up by its idempotency key, so createCharge stores the key
   * in the PaymentIntent's metadata and this searches on it. Search is eventually
   * consistent (Stripe documents up to about a minute): a PaymentIntent created moments ago
   * may not be found yet. That is safe, because the caller then retries createCharge with
   * the same key and Stripe replays the original PaymentIntent instead of making another.
   */
  async findChargeByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderCharge | null> {
    try {
      const result = await this.send(options, () =>
        this.stripe.paymentIntents.search({
          query: `metadata['idempotency_key']:'${escapeSearchValue(idempotencyKey)}'`,
          limit: 1,
          expand: ['data.latest_charge'],
        }),
      );
      const [intent] = result.data;
      return intent ? toCharge(intent) : null;
    } catch (error) {
      throw toProviderError(error, 'search PaymentIntents');
    }
  }

  /** PaymentIntents created for this reference (metadata set by createCharge); search is eventually consistent. */
  async listChargesByReference(reference: string, options?: CallOptions): Promise<ProviderCharge[]> {
    try {
      const result = await this.send(options, () =>
        this.stripe.paymentIntents.search({
          query: `metadata['reference']:'${escapeSearchValue(reference)}'`,
          limit: 100,
          expand: ['data.latest_charge'],
        }),
      );
      return result.data.map((intent) => toCharge(intent));
    } catch (error) {
      throw toProviderError(error, 'search PaymentIntents');
    }
  }

  async captureCharge(request: CaptureChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    try {
      const intent = await this.send(options, () =>
        this.stripe.paymentIntents.capture(
          request.chargeId,
          {
            ...(request.amountMinor !== undefined ? { amount_to_capture: request.amountMinor } : {}),
            expand: ['latest_charge'],
          },
          { idempotencyKey: request.idempotencyKey },
        ),
      );
      return toCharge(intent);
    } catch (error) {
      throw toProviderError(error, 'capture PaymentIntent');
    }
  }

  async voidCharge(request: VoidChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    try {
      const intent = await this.send(options, () =>
        this.stripe.paymentIntents.cancel(
          request.chargeId,
          { expand: ['latest_charge'] },
          { idempotencyKey: request.idempotencyKey },
        ),
      );
      return toCharge(intent);
    } catch (error) {
      throw toProviderError(error, 'cancel PaymentIntent');
    }
  }

  async createRefund(request: CreateRefundRequest, options?: CallOptions): Promise<ProviderRefund> {
    try {
      const refund = await this.send(options, () =>
        this.stripe.refunds.create(
          {
            payment_intent: request.chargeId,
            amount: request.amountMinor,
            metadata: { reference: request.reference, idempotency_key: request.idempotencyKey },
          },
          { idempotencyKey: request.idempotencyKey },
        ),
      );
      return toRefund(refund);
    } catch (error) {
      throw toProviderError(error, 'create Refund');
    }
  }

  /**
   * Refunds have no search API, so this scans the refunds created within the idempotency
   * window for the key createRefund put in their metadata. Past the window Stripe would not
   * dedupe a retried create either, so nothing older is worth finding.
   */
  async findRefundByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderRefund | null> {
    try {
      const since = Math.floor(Date.now() / 1000) - refundLookupWindowSeconds;
      const found = await this.send(options, async () => {
        for await (const refund of this.stripe.refunds.list({ created: { gte: since }, limit: 100 })) {
          if (refund.metadata?.['idempotency_key'] === idempotencyKey) return refund;
        }
        return null;
      });
      return found ? toRefund(found) : null;
    } catch (error) {
      throw toProviderError(error, 'list Refunds');
    }
  }

  async retrieveCharge(chargeId: string, options?: CallOptions): Promise<ProviderCharge> {
    try {
      const intent = await this.send(options, () => this.stripe.paymentIntents.retrieve(chargeId, { expand: ['latest_charge'] }));
      return toCharge(intent);
    } catch (error) {
      throw toProviderError(error, 'retrieve PaymentIntent');
    }
  }

  /**
   * Stripe's Disputes API. Each dispute is read with its PaymentIntent expanded (our reference);
   * evidence is staged or submitted by updating the dispute (`submit`); conceding is closing it. A dispute no longer open is refused by Stripe
   * (400: ProviderRejectedError).
   */
  readonly disputes: DisputeProvider = {
    retrieveDispute: async (disputeId, options) => toDispute(await this.dispute(disputeId, options), new Date()),
    retrieveEvidence: async (disputeId, options) => evidenceOf(await this.dispute(disputeId, options)),
    /** Newest first, as Stripe lists them; only those created in the window when one is given. */
    listDisputes: async (query, options) => {
      try {
        const page = await this.send(options, () =>
          this.stripe.disputes.list({
            limit: query.limit ?? 100,
            ...(query.startingAfter !== undefined ? { starting_after: query.startingAfter } : {}),
            ...(query.created ? { created: { gte: Math.floor(query.created.from.getTime() / 1000), lt: Math.ceil(query.created.to.getTime() / 1000) } } : {}),
            expand: ['data.payment_intent'],
          }),
        );
        return { data: page.data.map((dispute) => toDispute(dispute, new Date())), hasMore: page.has_more };
      } catch (error) {
        throw toProviderError(error, 'list Disputes');
      }
    },
    updateDispute: async (request, options) => {
      try {
        const dispute = await this.send(options, () =>
          this.stripe.disputes.update(
            request.disputeId,
            {
              evidence: request.evidence,
              submit: request.submit,
              expand: ['payment_intent'],
            },
            { idempotencyKey: request.idempotencyKey },
          ),
        );
        return toDispute(dispute, new Date());
      } catch (error) {
        throw toProviderError(error, 'update Dispute');
      }
    },
    closeDispute: async (request, options) => {
      try {
        return toDispute(await this.send(options, () => this.stripe.disputes.close(request.disputeId, { expand: ['payment_intent'] }, { idempotencyKey: request.idempotencyKey })), new Date());
      } catch (error) {
        throw toProviderError(error, 'close Dispute');
      }
    },
  };

  private async dispute(disputeId: string, options: CallOptions | undefined): Promise<Stripe.Dispute> {
    try {
      return await this.send(options, () => this.stripe.disputes.retrieve(disputeId, { expand: ['payment_intent'] }));
    } catch (error) {
      throw toProviderError(error, 'retrieve Dispute');
    }
  }

  /** Stripe's webhook, verified on its raw body (provider/stripe/webhook.ts). */
  verifyWebhook(rawBody: string, headers: Record<string, string | undefined>, now: Date = new Date()): ProviderWebhookEvent {
    return verifyStripeWebhook(rawBody, headers, { secret: this.webhookSecret, toleranceSeconds: this.webhookToleranceSeconds }, now);
  }

  /**
   * Balance transactions of type charge/payment and refund/payment_refund, and the adjustments
   * of disputes (a withdrawal, with the dispute fee, and a reinstatement), created in
   * [from, to), newest first as Stripe lists them. The source is expanded so each line carries
   * the PaymentIntent (our charge id) and our reference from the metadata createCharge and
   * createRefund set. Other types (payouts, fees, other adjustments) are skipped: they are not
   * payments; hasMore still pages over them.
   */
  async listBalanceTransactions(
    query: { from: Date; to: Date; startingAfter?: string; limit?: number },
    options?: CallOptions,
  ): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }> {
    try {
      const page = await this.send(options, () =>
        this.stripe.balanceTransactions.list({
          created: { gte: Math.floor(query.from.getTime() / 1000), lt: Math.ceil(query.to.getTime() / 1000) },
          limit: query.limit ?? 100,
          ...(query.startingAfter !== undefined ? { starting_after: query.startingAfter } : {}),
          expand: ['data.source', 'data.source.payment_intent'],
        }),
      );
      const data = page.data.flatMap((txn) => {
        const line = toBalanceTransaction(txn);
        return line ? [line] : [];
      });
      return { data, hasMore: page.has_more };
    } catch (error) {
      throw toProviderError(error, 'list BalanceTransactions');
    }
  }

  /**
   * The SDK takes no AbortSignal, so the caller's signal is honoured by giving up on the
   * call (its outcome is then unknown, as with any timeout); the request itself runs on.
   */
  private send<T>(options: CallOptions | undefined, call: () => Promise<T>): Promise<T> {
    const signal = options?.signal;
    if (!signal) return call();
    if (signal.aborted) return Promise.reject(abortedByCaller());
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(abortedByCaller());
      signal.addEventListener('abort', onAbort, { once: true });
      call()
        .then(resolve, reject)
        .finally(() => signal.removeEventListener('abort', onAbort));
    });
  }
}

const abortedByCaller = () => new ProviderUnavailableError('Stripe call aborted by the caller');

/** Search values are single-quoted; a quote or backslash inside must be escaped. */
const escapeSearchValue = (value: string) => value.replace(/[\\']/g, (c) => `\\${c}`);

/**
 * Unknown outcome (retry with the same key after a lookup): connection errors and
 * timeouts, 5xx, 429, and 409 (another request with the same key still in flight).
 * Refusals that changed nothing: invalid requests, a key reused with other parameters,
 * authentication and permission errors.
 */
function toProviderError(error: unknown, what: string): Error {
  if (error instanceof ProviderUnavailableError || error instanceof ProviderRejectedError) return error;
  if (!(error instanceof Stripe.errors.StripeError)) {
    return new ProviderUnavailableError(`Stripe ${what}: ${String(error)}`, undefined, { cause: error });
  }
  const status = error.statusCode;
  const message = `Stripe ${what}: ${error.message}`;
  if (
    error instanceof Stripe.errors.StripeConnectionError ||
    error instanceof Stripe.errors.StripeRateLimitError ||
    status === undefined ||
    status === 409 ||
    status === 429 ||
    status >= 500
  ) {
    return new ProviderUnavailableError(message, status, { cause: error });
  }
  // The same code the sandbox uses, so callers need not know which PSP refused the key.
  if (error instanceof Stripe.errors.StripeIdempotencyError) {
    return new ProviderRejectedError(message, status, 'idempotency_key_reused');
  }
  return new ProviderRejectedError(message, status, error.code ?? error.rawType ?? 'unknown');
}
