import type { CheckoutAPI, Config, Types } from '@adyen/api-library';
import { adyen } from './library';
import {
  ProviderRejectedError,
  ProviderUnavailableError,
  type CallOptions,
  type CaptureChargeRequest,
  type CreateChargeRequest,
  type CreateRefundRequest,
  type PaymentProvider,
  type ProviderBalanceTransaction,
  type ProviderCharge,
  type ProviderRefund,
  type ProviderWebhookEvent,
  type VoidChargeRequest,
} from '../types';
import { verifyAdyenNotificationBatch, verifyAdyenWebhook } from './webhook';
import { adyenPaymentMethod, chargeFromPayment, parseAdyenSavedCardToken } from './wire';

/** Where the official library sends every Checkout call (its API_BASEPATH): our client sends it to the connection's URL instead. */
const LIBRARY_CHECKOUT_BASE = 'https://checkout-test.adyen.com';

export interface AdyenProviderConfig {
  /** Adyen's Checkout API, or a double of it: the library's own host is replaced by this one. */
  baseUrl: string;
  apiKey: string;
  merchantAccount: string;
  /** The HMAC key of the webhook's notifications; null: they are refused. */
  hmacKey: string | null;
  /** Per HTTP call; past it the outcome is unknown (ProviderUnavailableError). */
  timeoutMs: number;
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
  constructor(private readonly baseUrl: string, private readonly timeoutMs: number) {}

  async request(endpoint: string, json: string | Buffer, config: Config, _isApiKeyRequired: boolean, options: { idempotencyKey?: string; method?: string; signal?: AbortSignal | null } = {}): Promise<string> {
    if (!endpoint.startsWith(LIBRARY_CHECKOUT_BASE)) throw new Error(`the Adyen library asked for ${endpoint}: only its Checkout API is configured`);
    const url = `${this.baseUrl.replace(/\/$/, '')}${endpoint.slice(LIBRARY_CHECKOUT_BASE.length)}`;
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
  private readonly checkout: CheckoutAPI;

  constructor(private readonly config: AdyenProviderConfig) {
    const client = new adyen.Client(new adyen.Config({ apiKey: config.apiKey, environment: 'TEST' as never }), new FetchHttpClient(config.baseUrl, config.timeoutMs));
    this.checkout = new adyen.CheckoutAPI(client);
  }

  async createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
    const body: Types.checkout.PaymentRequest = {
      merchantAccount: this.config.merchantAccount,
      amount: { value: request.amountMinor, currency: request.currency.toUpperCase() },
      reference: request.reference,
      ...this.chargedMethod(request),
      // A manual capture is asked for per payment; otherwise the account's automatic capture applies.
      ...(request.capture ? {} : { additionalData: { manualCapture: 'true' } }),
      // Adyen's model requires it; a card without 3-D Secure never goes there.
      returnUrl: request.returnUrl ?? '',
    };
    const payment = await this.checkout.PaymentsApi.payments(body, this.options(request.idempotencyKey, options));
    return chargeFromPayment(payment, request);
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

  listChargesByReference(): Promise<ProviderCharge[]> {
    return Promise.reject(new Error('Adyen has no search by merchant reference: its settlement report reconciles it (not yet built)'));
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

  /** The cancel as Adyen received it: the charge stays `requires_capture` until its CANCELLATION notification. */
  async voidCharge(request: VoidChargeRequest, options?: CallOptions): Promise<ProviderCharge> {
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

  listBalanceTransactions(): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }> {
    return Promise.reject(new Error('Adyen reports money moved in its settlement details report (not yet built; the kind has no balanceReport)'));
  }

  private options(idempotencyKey: string, options?: CallOptions) {
    return { idempotencyKey, ...(options?.signal ? { signal: options.signal } : {}) };
  }

  private unconfirmed(chargeId: string, amountMinor: number, currency: string, status: 'requires_capture'): ProviderCharge {
    return { id: chargeId, status, amountMinor, amountCapturedMinor: 0, amountRefundedMinor: 0, currency: currency.toUpperCase(), declineCode: null, declineMessage: null, nextAction: null, reference: '' };
  }
}
