import type { CheckoutAPI, Config, Types } from '@adyen/api-library';
import { adyen } from './library';
import {
  ProviderRejectedError,
  ProviderUnavailableError,
  type CallOptions,
  type CaptureChargeRequest,
  type CompleteChallengeRequest,
  type CreateChargeRequest,
  type CreateRefundRequest,
  type DisputeProvider,
  type PaymentProvider,
  type ProviderBalanceTransaction,
  type ProviderCharge,
  type ProviderRefund,
  type ProviderWebhookEvent,
  type VoidChargeRequest,
} from '../types';
import { ADYEN_TEST_DISPUTES_URL, AdyenDisputes } from './disputes';
import { SettlementReports } from './settlement';
import { verifyAdyenNotificationBatch, verifyAdyenWebhook } from './webhook';
import { adyenPaymentMethod, chargeFromPayment, parseAdyenSavedCardToken } from './wire';

/** Where the official library sends every Checkout call (its API_BASEPATH): our client sends it to the connection's URL instead. */
const LIBRARY_CHECKOUT_BASE = 'https://checkout-test.adyen.com';
/** Where it sends the Disputes service's calls (its DisputesApi's API_BASEPATH, less the version): our client sends them to the connection's `disputesUrl`. */
const LIBRARY_DISPUTES_BASE = 'https://ca-test.adyen.com/ca/services/DisputeService';

export interface AdyenProviderConfig {
  /** Adyen's Checkout API, or a double of it: the library's own host is replaced by this one. */
  baseUrl: string;
  /** Adyen's Disputes service (`…/ca/services/DisputeService`), or a double of it; absent: Adyen's test host. */
  disputesUrl?: string;
  apiKey: string;
  merchantAccount: string;
  /** The HMAC key of the webhook's notifications; null: they are refused. */
  hmacKey: string | null;
  /** Per HTTP call; past it the outcome is unknown (ProviderUnavailableError). */
  timeoutMs: number;
  /**
   * Where the Settlement details reports are downloaded (the report host: Adyen's, or a double)
   * and the report user's credentials (basic auth, else its API key). Absent: the balance
   * report is refused (a client made only for payments).
   */
  report?: { url: string; username: string | null; password: string | null; apiKey: string | null };
}

/** Adyen's error body (`{ status, errorCode, message, errorType, pspReference }`). */
interface AdyenErrorJson {
  status?: number;
  errorCode?: string;
  message?: string;
  errorType?: string;
}

/**
 * The official library's HTTP seam (its ClientInterface, `new Client(config, httpClient)`):
 * its own client speaks only https to Adyen's hosts, so the calls go through fetch to the
 * connection's URL (a loopback double in tests), with our timeout and the caller's abort, and
 * Adyen's answers become our errors: 5xx, 429 and a lost answer are unknown outcomes
 * (retried, under the same Idempotency-Key, which Adyen replays), any other refusal is final.
 */
class FetchHttpClient {
  /** The library's base of each service we call, and the connection's URL that replaces it. */
  private readonly bases: [library: string, ours: string][];

  constructor(bases: { checkout: string; disputes: string }, private readonly timeoutMs: number) {
    this.bases = [
      [LIBRARY_CHECKOUT_BASE, bases.checkout.replace(/\/$/, '')],
      [LIBRARY_DISPUTES_BASE, bases.disputes.replace(/\/$/, '')],
    ];
  }

  async request(endpoint: string, json: string | Buffer, config: Config, _isApiKeyRequired: boolean, options: { idempotencyKey?: string; method?: string; signal?: AbortSignal | null } = {}): Promise<string> {
    const base = this.bases.find(([library]) => endpoint.startsWith(library));
    if (!base) throw new Error(`the Adyen library asked for ${endpoint}: only its Checkout API and Disputes service are configured`);
    const url = `${base[1]}${endpoint.slice(base[0].length)}`;
    const path = new URL(url).pathname;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const method = options.method ?? 'POST';
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        headers: {
          'Content-Type': 'application/json',
          'X-API-Key': config.apiKey ?? '',
          ...(options.idempotencyKey ? { 'Idempotency-Key': options.idempotencyKey } : {}),
        },
        ...(method === 'GET' ? {} : { body: typeof json === 'string' ? json : new Uint8Array(json) }),
        signal,
      });
      // Reading the body is still part of the exchange: a lost body is a lost answer.
      text = await response.text();
    } catch (error) {
      const refused = !signal.aborted && (error as { cause?: NodeJS.ErrnoException })?.cause?.code === 'ECONNREFUSED';
      const reason = timeout.aborted ? `no answer within ${this.timeoutMs} ms` : signal.aborted ? 'aborted by the caller' : refused ? 'connection refused (nothing was sent)' : 'network error';
      throw new ProviderUnavailableError(`adyen ${method} ${path}: ${reason}`, undefined, { cause: error, notSent: refused });
    }
    if (response.ok) return text;
    let error: AdyenErrorJson | undefined;
    try {
      error = JSON.parse(text) as AdyenErrorJson;
    } catch {
      error = undefined;
    }
    const message = `adyen ${method} ${path}: ${response.status} ${error?.message ?? text.slice(0, 200)}`;
    if (response.status === 429 || response.status >= 500) throw new ProviderUnavailableError(message, response.status);
    throw new ProviderRejectedError(message, response.status, error?.errorCode ?? 'unknown');
  }
}

/**
 * Adyen through its official Node library (Checkout API: payments, captures, cancels, refunds).
 * Its modifications are asynchronous: a capture, cancel or refund is answered `received`, and
 * only its notification (CAPTURE, CAPTURE_FAILED, CANCELLATION, REFUND) says what it came to
 * (the kind's `modifications: 'notified'`). So a capture's answer is the charge still
 * `requires_capture`, never `succeeded`; a refund's answer is `pending`, never `succeeded`.
 * There is no lookup by our key: a lost answer is resolved by sending the same request again
 * under its Idempotency-Key (`unknownOutcome: 'replay'`).
 */
export class AdyenProvider implements PaymentProvider {
  readonly kind = 'adyen';
  /** Its disputes through the Disputes service: answered and conceded, never read (the kind's disputeSource `notification`). */
  readonly disputes: DisputeProvider;
  private readonly checkout: CheckoutAPI;
  private readonly reports: SettlementReports | null;

  constructor(private readonly config: AdyenProviderConfig) {
    const http = new FetchHttpClient({ checkout: config.baseUrl, disputes: config.disputesUrl ?? ADYEN_TEST_DISPUTES_URL }, config.timeoutMs);
    const client = new adyen.Client(new adyen.Config({ apiKey: config.apiKey, environment: 'TEST' as never }), http);
    this.checkout = new adyen.CheckoutAPI(client);
    this.disputes = new AdyenDisputes(new adyen.DisputesAPI(client), config.merchantAccount);
    // A report is one download of a whole batch: it gets a minute at least.
    this.reports = config.report ? new SettlementReports({ ...config.report, merchantAccount: config.merchantAccount, timeoutMs: Math.max(config.timeoutMs, 60_000) }) : null;
  }

  async createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const body: Types.checkout.PaymentRequest = {
      merchantAccount: this.config.merchantAccount,
      amount: { value: request.amountMinor, currency: request.currency.toUpperCase() },
      reference: request.reference,
      ...this.chargedMethod(request),
      // A manual capture is asked for per payment; otherwise the account's automatic capture applies.
      ...(request.capture ? {} : { additionalData: { manualCapture: 'true' } }),
      // Where Adyen sends the shopper back from a 3-D Secure challenge, with `redirectResult`: our
      // return route (the charge step sends it: the kind's challengeReturn is `orchestrator`).
      // Adyen's model requires it; a card without 3-D Secure never goes there.
      returnUrl: request.returnUrl ?? '',
    };
    const payment = await this.checkout.PaymentsApi.payments(body, this.options(request.idempotencyKey, options));
    return chargeFromPayment(payment, request);
  }

  /**
   * The shopper is back from the challenge: /payments/details with the `redirectResult` Adyen
   * appended to our returnUrl answers the payment's outcome (Authorised, Refused), under its
   * Idempotency-Key like every call. A result Adyen does not know is its refusal (422).
   */
  async completeChallenge(request: CompleteChallengeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const details: Types.checkout.PaymentDetailsRequest = { details: { redirectResult: request.redirectResult } };
    const answer = await this.checkout.PaymentsApi.paymentsDetails(details, this.options(request.idempotencyKey, options));
    return chargeFromPayment(answer, request);
  }

  /**
   * What the payment charges, and how: a saved card by its stored payment method id and shopper,
   * merchant-initiated (`ContAuth`, unscheduled card on file); a card to store for later charges
   * without the customer, stored for a shopper of its own (our payment id, so a replay stores it
   * for the same one; `storePaymentMethod`, the customer present: `Ecommerce`, the first of an
   * unscheduled card-on-file chain); else the test card alone. Adyen takes another processor's
   * network transaction id only with the card's full number (its `networkTxReference` with
   * card details), which we never hold: such a saved card is refused, nothing charged (the kind
   * says networkTransactionIds: false, and routing sends it elsewhere).
   */
  private chargedMethod(request: CreateChargeRequest): Pick<Types.checkout.PaymentRequest, 'paymentMethod' | 'shopperInteraction' | 'shopperReference' | 'storePaymentMethod' | 'recurringProcessingModel'> {
    const { ShopperInteractionEnum, RecurringProcessingModelEnum } = adyen.Types.checkout.PaymentRequest;
    const saved = request.savedMethod;
    if (saved) {
      if (saved.token === null) throw new ProviderRejectedError('Adyen cannot charge a card saved at another PSP by its network transaction id without the card number', 400, 'network_transaction_id_unsupported');
      const stored = parseAdyenSavedCardToken(saved.token);
      if (!stored) throw new ProviderRejectedError(`"${saved.token}" is not a card stored at Adyen (shopperReference/storedPaymentMethodId)`, 400, 'invalid_saved_card_token');
      return {
        paymentMethod: { type: adyen.Types.checkout.CardDetails.TypeEnum.Scheme, storedPaymentMethodId: stored.storedPaymentMethodId },
        shopperReference: stored.shopperReference,
        shopperInteraction: ShopperInteractionEnum.ContAuth,
        recurringProcessingModel: RecurringProcessingModelEnum.UnscheduledCardOnFile,
      };
    }
    const paymentMethod = adyenPaymentMethod(request.paymentMethod);
    if (!paymentMethod) throw new ProviderRejectedError(`adyen: no Adyen test card for payment method "${request.paymentMethod}"`, 400, 'invalid_payment_method');
    if (request.setupFutureUsage !== 'off_session') return { paymentMethod, shopperInteraction: ShopperInteractionEnum.Ecommerce };
    return {
      paymentMethod,
      shopperInteraction: ShopperInteractionEnum.Ecommerce,
      shopperReference: request.reference,
      storePaymentMethod: true,
      recurringProcessingModel: RecurringProcessingModelEnum.UnscheduledCardOnFile,
    };
  }

  /** Adyen has no lookup by our key: its kind replays the request instead (the steps never call this). */
  findChargeByIdempotencyKey(): Promise<ProviderCharge | null> {
    return Promise.reject(new Error('Adyen has no lookup by idempotency key: the same request is replayed under its key (unknownOutcome: replay)'));
  }

  /**
   * Adyen has no search of payments by merchant reference (nor a payment retrieval): a payment
   * is known by its answers, its notifications and, once settled, its settlement report lines.
   * The kind says `chargeSearch: false`, so no step asks; refused for good if one did.
   */
  listChargesByReference(): Promise<ProviderCharge[]> {
    return Promise.reject(new ProviderRejectedError('adyen: Adyen has no search of payments by merchant reference (chargeSearch: false)', 405, 'search_unsupported'));
  }

  /** The capture as Adyen received it: the charge stays `requires_capture` until its CAPTURE notification. */
  async captureCharge(request: CaptureChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    if (request.amountMinor === undefined || !request.currency) throw new ProviderRejectedError('adyen: a capture names its amount and currency', 400, 'invalid_request');
    const received = await this.checkout.ModificationsApi.captureAuthorisedPayment(
      request.chargeId,
      { merchantAccount: this.config.merchantAccount, amount: { value: request.amountMinor, currency: request.currency.toUpperCase() }, reference: request.idempotencyKey },
      this.options(request.idempotencyKey, options),
    );
    return this.unconfirmed(request.chargeId, received.amount.value ?? request.amountMinor, received.amount.currency, 'requires_capture');
  }

  /**
   * The cancel as Adyen received it: the charge stays `requires_capture` until its CANCELLATION
   * notification. A charge Adyen has not named yet (a redirect answered without its pspReference)
   * is cancelled by our reference (/cancels), confirmed by TECHNICAL_CANCEL.
   */
  async voidCharge(request: VoidChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    if (request.chargeId === '') {
      if (!request.reference) throw new ProviderRejectedError('adyen: a charge not named yet is cancelled by its reference, and none was given', 400, 'invalid_request');
      await this.checkout.ModificationsApi.cancelAuthorisedPayment(
        { merchantAccount: this.config.merchantAccount, paymentReference: request.reference, reference: request.idempotencyKey },
        this.options(request.idempotencyKey, options),
      );
      return this.unconfirmed('', 0, '', 'requires_capture');
    }
    await this.checkout.ModificationsApi.cancelAuthorisedPaymentByPspReference(
      request.chargeId,
      { merchantAccount: this.config.merchantAccount, reference: request.idempotencyKey },
      this.options(request.idempotencyKey, options),
    );
    return this.unconfirmed(request.chargeId, 0, '', 'requires_capture');
  }

  /**
   * The refund as Adyen received it: `pending` until its REFUND notification says `succeeded`
   * (or REFUND with success false, or REFUND_FAILED, says `failed`). A refusal of the request
   * itself is a ProviderRejectedError.
   */
  async createRefund(request: CreateRefundRequest, options?: CallOptions): Promise<ProviderRefund> {
    if (!request.currency) throw new ProviderRejectedError('adyen: a refund names its currency', 400, 'invalid_request');
    const received = await this.checkout.ModificationsApi.refundCapturedPayment(
      request.chargeId,
      { merchantAccount: this.config.merchantAccount, amount: { value: request.amountMinor, currency: request.currency.toUpperCase() }, reference: request.reference },
      this.options(request.idempotencyKey, options),
    );
    return { id: received.pspReference, chargeId: request.chargeId, status: 'pending', amountMinor: received.amount.value ?? request.amountMinor, failureCode: null, failureMessage: null, reference: request.reference };
  }

  findRefundByIdempotencyKey(): Promise<ProviderRefund | null> {
    return Promise.reject(new Error('Adyen has no lookup by idempotency key: the same request is replayed under its key (unknownOutcome: replay)'));
  }

  /**
   * Adyen has no payment retrieval: a payment is known by its answers and its signed
   * notifications (which the charge event step acts on at this kind). Refused for good, so a
   * step that would ask ends rather than retrying a call that cannot succeed.
   */
  retrieveCharge(): Promise<ProviderCharge> {
    return Promise.reject(new ProviderRejectedError('adyen: Adyen has no payment retrieval; a payment is known by its answers and notifications', 405, 'retrieval_unsupported'));
  }

  verifyWebhook(rawBody: string): ProviderWebhookEvent {
    return verifyAdyenWebhook(rawBody, { hmacKey: this.config.hmacKey });
  }

  verifyWebhookBatch(rawBody: string): { event: ProviderWebhookEvent; payload: unknown }[] {
    return verifyAdyenNotificationBatch(rawBody, { hmacKey: this.config.hmacKey });
  }

  /**
   * The money Adyen moved, from its Settlement details reports (./settlement.ts): the lines of
   * the closed batches created in [from, to), a batch at a time. A line appears only once its
   * batch has closed (Adyen closes payable batches by the account's payout frequency).
   */
  listBalanceTransactions(query: { from: Date; to: Date; startingAfter?: string; limit?: number }, options?: CallOptions): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }> {
    if (!this.reports) return Promise.reject(new ProviderRejectedError('adyen: this client has no settlement report configured', 400, 'report_unconfigured'));
    return this.reports.list(query, options);
  }

  private options(idempotencyKey: string, options?: CallOptions) {
    return { idempotencyKey, ...(options?.signal ? { signal: options.signal } : {}) };
  }

  private unconfirmed(chargeId: string, amountMinor: number, currency: string, status: 'requires_capture'): ProviderCharge {
    return { id: chargeId, status, amountMinor, amountCapturedMinor: 0, amountRefundedMinor: 0, currency: currency.toUpperCase(), declineCode: null, declineMessage: null, nextAction: null, reference: '', received: true };
  }
}
