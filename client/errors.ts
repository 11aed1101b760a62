import type { Payment, Refund } from './types';

/** The API's error body: `{"error":{"type","message",...}}`. */
export interface ApiErrorBody {
  error: { type: string; message: string; [extra: string]: unknown };
}

/**
 * An answer of the API that is not a success. `type` is the API's error type; every type a
 * caller acts on has its own subclass, so `catch (e) { if (e instanceof CardDeclinedError) … }`.
 */
export class PaymentsApiError extends Error {
  override readonly name: string = 'PaymentsApiError';
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly body: ApiErrorBody | null,
    /** The X-Request-Id of the answer, to quote to support. */
    readonly requestId: string | null,
  ) {
    super(message);
  }

  /** A field of the error body beside `type` and `message` (`payment`, `refund`, `issues`…), or null. */
  protected detail<T>(field: string): T | null {
    return (this.body?.error[field] as T | undefined) ?? null;
  }
}

/** 400 invalid_request: the request was refused at validation; `issues` says what to fix. Nothing ran. */
export class InvalidRequestError extends PaymentsApiError {
  override readonly name = 'InvalidRequestError';
  get issues(): { path: string; code: string; message: string }[] {
    return this.detail<{ path: string; code: string; message: string }[]>('issues') ?? [];
  }
}
/** 401: the API key is missing, wrong or revoked. */
export class AuthenticationError extends PaymentsApiError {
  override readonly name = 'AuthenticationError';
}
/** 404: no such object for this tenant. */
export class NotFoundError extends PaymentsApiError {
  override readonly name = 'NotFoundError';
}
/** 402 card_declined: `payment` is the declined payment. Retry the order with a new key (and card). */
export class CardDeclinedError extends PaymentsApiError {
  override readonly name = 'CardDeclinedError';
  get payment(): Payment | null {
    return this.detail<Payment>('payment');
  }
}
/**
 * 402 payment_failed: the payment failed for good (money that moved was given back); also 402
 * authentication_required: an off-session payment whose card issuer asks for the customer
 * (nothing charged: charge them on-session).
 */
export class PaymentFailedError extends PaymentsApiError {
  override readonly name = 'PaymentFailedError';
  get payment(): Payment | null {
    return this.detail<Payment>('payment');
  }
}
/** 402 refund_failed: the provider refused the refund. */
export class RefundFailedError extends PaymentsApiError {
  override readonly name = 'RefundFailedError';
  get refund(): Refund | null {
    return this.detail<Refund>('refund');
  }
}
/** 409 order_already_paid: the order has a live or paid payment (`paymentId`); no charge was made. */
export class OrderAlreadyPaidError extends PaymentsApiError {
  override readonly name = 'OrderAlreadyPaidError';
  get paymentId(): string | null {
    return this.detail<string>('payment_id');
  }
}
/** 409 refund_exceeds_captured: the refunds would exceed the captured amount. */
export class RefundExceedsCapturedError extends PaymentsApiError {
  override readonly name = 'RefundExceedsCapturedError';
}
/** 409: the payment is not in a state that allows this (capture, cancel, refund, capture amount). */
export class PaymentStateError extends PaymentsApiError {
  override readonly name = 'PaymentStateError';
}
/** 422 idempotency_key_reused: this key went with another request. A programming error: never retried. */
export class IdempotencyKeyReusedError extends PaymentsApiError {
  override readonly name = 'IdempotencyKeyReusedError';
}
/** 429 rate_limited, once the retries ran out. `retryAfterSeconds` is the server's last advice. */
export class RateLimitedError extends PaymentsApiError {
  override readonly name = 'RateLimitedError';
  retryAfterSeconds: number | null = null;
}
/** 503 (or 5xx) once the retries ran out: nothing is known to have run; retrying later with the same key is safe. */
export class ServiceUnavailableError extends PaymentsApiError {
  override readonly name = 'ServiceUnavailableError';
}
/** A 202 that did not reach its final state within the client's patience; the operation goes on server-side. */
export class OperationPendingError extends PaymentsApiError {
  override readonly name = 'OperationPendingError';
  constructor(
    readonly resource: unknown,
    readonly location: string | null,
    readonly idempotencyKey: string,
    requestId: string | null,
  ) {
    super(202, 'pending', `Still processing after the client stopped waiting; retry with Idempotency-Key ${idempotencyKey} or poll ${location}.`, null, requestId);
  }
}

/** No answer at all (connection refused or cut, timeout) once the retries ran out. */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
  }
}

const byType: Record<string, typeof PaymentsApiError> = {
  invalid_request: InvalidRequestError,
  idempotency_key_missing: InvalidRequestError,
  idempotency_key_invalid: InvalidRequestError,
  payload_too_large: InvalidRequestError,
  unsupported_media_type: InvalidRequestError,
  unauthorized: AuthenticationError,
  not_found: NotFoundError,
  card_declined: CardDeclinedError,
  payment_failed: PaymentFailedError,
  authentication_required: PaymentFailedError,
  refund_failed: RefundFailedError,
  order_already_paid: OrderAlreadyPaidError,
  refund_exceeds_captured: RefundExceedsCapturedError,
  payment_not_capturable: PaymentStateError,
  payment_not_cancelable: PaymentStateError,
  payment_not_refundable: PaymentStateError,
  payment_disputed: PaymentStateError,
  dispute_not_open: PaymentStateError,
  capture_exceeds_authorized: PaymentStateError,
  idempotency_key_reused: IdempotencyKeyReusedError,
  rate_limited: RateLimitedError,
  service_unavailable: ServiceUnavailableError,
  temporal_unavailable: ServiceUnavailableError,
};

/** The typed error for an API answer (an unknown type still gets the base class, never lost). */
export function errorFromResponse(status: number, text: string, requestId: string | null): PaymentsApiError {
  let body: ApiErrorBody | null = null;
  try {
    const parsed = JSON.parse(text) as ApiErrorBody;
    if (parsed && typeof parsed.error?.type === 'string') body = parsed;
  } catch {
    // not the API's error shape (e.g. a proxy's HTML page)
  }
  const type = body?.error.type ?? (status === 429 ? 'rate_limited' : status >= 500 ? 'service_unavailable' : 'http_error');
  const message = body?.error.message ?? `HTTP ${status}: ${text.slice(0, 200)}`;
  const ErrorClass = byType[type] ?? (status >= 500 ? ServiceUnavailableError : PaymentsApiError);
  return new ErrorClass(status, type, message, body, requestId);
}
