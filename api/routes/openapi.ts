import { z } from '@hono/zod-openapi';
import type { ZodType } from 'zod';
import { ApiError, errorStatus, type ApiErrorType } from '../../domain/errors';
import { ErrorBody } from '../schemas';
import { RETENTION_HEADER } from '../idempotency';

/** Shared pieces of the OpenAPI route definitions, so every route documents the same contract. */

export const paymentIdExample = 'pay_01jd6w8b3m4x0c2q7yk5h9t1ve';

export function jsonContent<T extends ZodType>(schema: T) {
  return { 'application/json': { schema } };
}

/**
 * The body of a route whose body is optional (`required: false`). @hono/zod-openapi validates
 * a JSON body when one is sent, but hands a request without one `{}` *unvalidated*, typed as
 * the schema's output: its defaults never applied (a webhook secret rotation without a body
 * would send `undefined` to PostgreSQL, a 500). Every optional body is read through here, so
 * no body, an empty body and `{}` are the same request, with the same defaults and fingerprint.
 */
export function optionalBody<T extends ZodType>(schema: T, given: unknown): z.output<T> {
  const parsed = schema.safeParse(given ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), code: issue.code, message: issue.message }));
    throw new ApiError('invalid_request', 'The request is invalid; see issues.', { issues });
  }
  return parsed.data;
}

/**
 * The Idempotency-Key request header of every mutating endpoint, as documentation: the
 * idempotency middleware validates it (with its own error types), not the route schema.
 */
export const idempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header' as const,
  required: true,
  description: 'A unique value per operation (e.g. a UUID), reused on every retry of it. 8–255 printable ASCII characters, no spaces.',
  schema: { type: 'string' as const, minLength: 8, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
  example: '9c7c96d4-812e-47c1-b712-2899a5947f64',
};

const responseHeaders = {
  'Idempotent-Replayed': { description: '`true` when this is the stored response of an earlier delivery.', schema: { type: 'string' as const, enum: ['true'] } },
  [RETENTION_HEADER]: { description: 'How long (seconds) the outcome of this key is remembered.', schema: { type: 'integer' as const } },
  'X-Request-Id': { description: 'The request id, for support and logs.', schema: { type: 'string' as const } },
};

export const idempotentResponses = {
  headers: responseHeaders,
  pending: <T extends ZodType>(schema: T) => ({
    202: {
      description: 'Still processing: not a final response and never stored. Retry with the same key after `Retry-After` seconds, or poll `Location`.',
      content: jsonContent(schema),
      headers: {
        ...responseHeaders,
        Location: { description: 'The resource.', schema: { type: 'string' as const } },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' as const } },
      },
    },
  }),
};

const errorDescriptions: Record<ApiErrorType, string> = {
  invalid_request: 'The request is invalid (the zod issues are listed in `error.issues`). Nothing was executed.',
  idempotency_key_missing: 'The Idempotency-Key header is missing.',
  idempotency_key_invalid: 'The Idempotency-Key header is malformed.',
  webhook_signature_invalid: 'The webhook’s signature is missing, wrong or stale, or its body is not JSON. Nothing was stored.',
  unauthorized: 'Missing or invalid API key (or admin token).',
  forbidden: 'Not allowed: a console viewer\'s write, or a console form without its CSRF token. Nothing changed.',
  card_declined: 'The card was declined; `error.payment` is the declined payment. Retry the order with a new key.',
  payment_failed: 'The payment failed for good; `error.payment` says why (money that moved was given back).',
  authentication_required: 'An off-session payment: the card issuer asks the customer to authenticate, and they are not there. The payment (`error.payment`) failed and nothing was charged; charge the customer on-session.',
  refund_failed: 'The provider refused the refund; `error.refund` says why.',
  not_found: 'No such object for this tenant.',
  order_already_paid: 'The order already has a live or paid payment (`error.payment_id`). No charge was made.',
  refund_exceeds_captured: 'The refund would take the refunded total above the captured amount.',
  payment_not_capturable: 'The payment is not awaiting capture.',
  payment_not_cancelable: 'The payment is not awaiting capture, so it cannot be voided.',
  payment_not_refundable: 'Only captured payments can be refunded.',
  payment_disputed: 'A chargeback took part or all of the money through the card network (waiting, under review or lost): a refund may return at most what it left (`amount_refundable_minor`).',
  dispute_not_open: 'The dispute takes no more evidence: it was submitted, its deadline passed, or it is closed (the message says which).',
  dispute_not_held: 'The dispute is not held for an operator: there is nothing to release.',
  operator_email_taken: 'An operator with this email already exists. Nothing changed.',
  dispute_evidence_limit: 'The dispute has taken all the evidence one dispute takes (DISPUTE_EVIDENCE_MAX_REQUESTS requests, DISPUTE_EVIDENCE_MAX_BYTES bytes; the message says which). Nothing was stored or sent; the answer is recorded under the key.',
  capture_exceeds_authorized: 'The capture amount is above the authorized amount.',
  payload_too_large: 'The body is larger than 64 KiB.',
  unsupported_media_type: 'The body is not `application/json`.',
  misdirected_request: 'The `Host` header names no host this service answers for (`HTTP_ALLOWED_HOSTS`): a defence against DNS rebinding.',
  idempotency_key_reused: 'This key was used for a different request (another body or path). Nothing was executed.',
  rate_limited: 'Over the rate limit (per tenant: reads and writes apart; per client address: failed authentications). Retry after `Retry-After` seconds; `RateLimit-Policy` and `RateLimit` give the quota and what is left. Never recorded as an operation\'s outcome: a retry with the same Idempotency-Key runs normally.',
  internal_error: 'An unexpected error; quote the request id.',
  operation_failed: 'The operation\'s run ended without an outcome (failed, terminated or timed out). This answer is recorded: every retry with the key replays it. `error.resource_id` names the payment or refund, which says what happened (`failure.code` `run_ended`, or `needs_operator` when money may have moved).',
  service_unavailable: 'PostgreSQL is unreachable: nothing was executed. Retry after `Retry-After` seconds.',
  temporal_unavailable: 'The workflow engine (Temporal) could not be reached or did not answer in time (connection refused or closing, deadline, overload): nothing was recorded for the Idempotency-Key. Retry after `Retry-After` seconds with the same key.',
};

const rateLimitHeaders = {
  'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' as const } },
  'RateLimit-Policy': { description: 'The quota (IETF RateLimit fields), e.g. `"write";q=100;w=1`: 100 writes per second.', schema: { type: 'string' as const } },
  RateLimit: { description: 'What is left of it, e.g. `"write";r=0;t=1`: none, for 1 more second.', schema: { type: 'string' as const } },
};

/** One error status of a route: the error body, and the types it can carry. */
interface ErrorResponse {
  description: string;
  content: { 'application/json': { schema: typeof ErrorBody } };
  headers?: Record<string, { description: string; schema: { type: 'integer' | 'string' } }>;
}

/** The statuses of these error types; whatever authenticates can also be rate-limited (429). */
type ErrorStatuses<T extends ApiErrorType> = (typeof errorStatus)[T] | ('unauthorized' extends T ? (typeof errorStatus)['rate_limited'] : never);

/**
 * The error responses a route can give, grouped by status, each type listed in the
 * description. Keyed by the literal statuses, so a handler's typed responses (api/typed-route.ts)
 * hold exactly these and no other error status.
 */
export function errorResponses<const T extends ApiErrorType>(given: readonly T[]): { [S in ErrorStatuses<T>]: ErrorResponse } {
  // Whatever authenticates can be rate-limited (per tenant, or failed attempts per address).
  const withLimits: ApiErrorType[] = given.includes('unauthorized' as T) && !given.includes('rate_limited' as T) ? [...given, 'rate_limited'] : [...given];
  // Whatever can find a dependency unreachable can find Temporal so (api/middleware.ts maps both).
  const types: ApiErrorType[] = withLimits.includes('service_unavailable') && !withLimits.includes('temporal_unavailable') ? [...withLimits, 'temporal_unavailable'] : withLimits;
  const byStatus = new Map<number, ApiErrorType[]>();
  for (const type of types) byStatus.set(errorStatus[type], [...(byStatus.get(errorStatus[type]) ?? []), type]);
  const responses: Record<number, ErrorResponse> = {};
  for (const [status, group] of byStatus) {
    responses[status] = {
      description: group.map((t) => `\`${t}\`: ${errorDescriptions[t]}`).join(' '),
      content: jsonContent(ErrorBody),
      ...(status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' as const } } } } : {}),
      ...(status === 429 ? { headers: rateLimitHeaders } : {}),
    };
  }
  return responses as { [S in ErrorStatuses<T>]: ErrorResponse };
}
