/** A final HTTP response, recorded once in the idempotency store and replayed byte for byte. */
export interface FinalResponse {
  status: number;
  body: string;
  location: string | null;
}

/**
 * Every error this API answers with: its HTTP status, in one place. Handlers, the
 * idempotency layer and the activities that record business outcomes all build error
 * bodies through apiError(), so a type always carries the same status.
 */
export const errorStatus = {
  invalid_request: 400,
  idempotency_key_missing: 400,
  idempotency_key_invalid: 400,
  /** An inbound PSP webhook whose signature is missing, wrong or stale, or whose body is not an event. */
  webhook_signature_invalid: 400,
  unauthorized: 401,
  /** Signed in, but not allowed to do this: a console viewer's write, or a write without its form's CSRF token. */
  forbidden: 403,
  card_declined: 402,
  payment_failed: 402,
  /** An off-session payment whose card asks the customer to authenticate: it failed; charge it with the customer present. */
  authentication_required: 402,
  refund_failed: 402,
  not_found: 404,
  order_already_paid: 409,
  refund_exceeds_captured: 409,
  payment_not_capturable: 409,
  payment_not_cancelable: 409,
  payment_not_refundable: 409,
  /** The payment has an open chargeback: the network holds its money, and a refund would pay the customer twice. */
  payment_disputed: 409,
  /** Evidence or a concession for a dispute that no longer takes it: submitted, past its deadline, or closed. */
  dispute_not_open: 409,
  dispute_not_held: 409,
  /** An operator with this email already exists. */
  operator_email_taken: 409,
  /** Evidence for a dispute that has taken all the evidence requests or bytes one dispute takes (DISPUTE_EVIDENCE_MAX_*). */
  dispute_evidence_limit: 409,
  capture_exceeds_authorized: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  misdirected_request: 421,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal_error: 500,
  operation_failed: 500,
  service_unavailable: 503,
  temporal_unavailable: 503,
} as const;

export type ApiErrorType = keyof typeof errorStatus;

export interface ApiErrorBody {
  error: { type: ApiErrorType; message: string; [extra: string]: unknown };
}

export function apiErrorBody(type: ApiErrorType, message: string, extra: Record<string, unknown> = {}): ApiErrorBody {
  return { error: { type, message, ...extra } };
}

/** An error as a final response, ready to be recorded in the idempotency store. */
export function errorResponse(type: ApiErrorType, message: string, extra: Record<string, unknown> = {}): FinalResponse {
  return { status: errorStatus[type], body: JSON.stringify(apiErrorBody(type, message, extra)), location: null };
}

/** The order guard's answer: the order already has a live or paid payment (decided by the API's claim, or by the first charge attempt when it persists an intent a start in doubt left out). */
export function orderAlreadyPaid(orderId: string, holderPaymentId: string): FinalResponse {
  return errorResponse('order_already_paid', `order ${orderId} already has a payment in progress or paid`, { payment_id: holderPaymentId });
}

/** Thrown anywhere in the API to answer with this error; the one error handler renders it. */
export class ApiError extends Error {
  constructor(
    readonly type: ApiErrorType,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
  get status(): number {
    return errorStatus[this.type];
  }
}
