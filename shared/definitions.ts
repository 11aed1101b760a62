/**
 * What every area shares across the API, the worker and the workflows: the task queue, the
 * request id header, the scoped idempotency key, the final response and the failure types
 * that cross the workflow boundary. Each area's own definitions are beside it (shared/payments.ts,
 * refunds.ts, disputes.ts, customers.ts, routing.ts; the events in events.ts, the periodic
 * jobs in jobs.ts). Imported by workflow code, so it must stay free of Node, I/O and clocks.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { FinalResponse } from '../domain/errors';

export const DEFAULT_TASK_QUEUE = 'payments';

/**
 * The activity header that carries the HTTP request id from a workflow to its activities
 * (workflows/interceptors.ts sets it, worker/interceptors.ts reads it).
 */
export const REQUEST_ID_HEADER = 'request-id';

/** The scoped idempotency key an operation runs under, and the fingerprint of its input. */
export interface ScopedKey {
  tenantId: string;
  /** "METHOD /route/template", e.g. "POST /v1/payments". */
  operation: string;
  key: string;
  fingerprint: string;
  /** How long the outcome is remembered after it is recorded (advertised by the API). */
  retentionSeconds: number;
}

/** A final HTTP response, recorded once in the idempotency store and replayed byte for byte (domain/errors.ts). */
export type { FinalResponse };

/** The tenant every run belongs to (a search attribute of every workflow the API starts). */
export const TenantIdKey = defineSearchAttributeKey('TenantId', SearchAttributeType.KEYWORD);

/**
 * Failure types that cross the workflow boundary (ApplicationFailure.type). One closed set;
 * the API maps update rejections of these types to HTTP responses in one place.
 */
export const FailureType = {
  /** The ledger refuses the posting for good (e.g. a frozen account): compensate. */
  LedgerRejected: 'LedgerRejected',
  /** The provider refused the request itself; nothing happened there. */
  ProviderRejected: 'ProviderRejected',
  /** The provider refused the connection: nothing was sent (a charge attempt's try, tried again at that PSP). */
  ProviderNotReached: 'ProviderNotReached',
  /**
   * No PSP of the payment's route charges its payment method (the first charge attempt's plan,
   * activities/routing.ts): nothing was sent anywhere; the run fails the payment
   * `payment_method_unsupported`.
   */
  PaymentMethodUnsupported: 'PaymentMethodUnsupported',
  /** Update validator: the payment is not in a state that allows this command. */
  PaymentNotCapturable: 'PaymentNotCapturable',
  PaymentNotCancelable: 'PaymentNotCancelable',
  /** Update validator: capture amount above what was authorized. */
  CaptureExceedsAuthorized: 'CaptureExceedsAuthorized',
  /** The return route's update: the payment does not wait for its customer's challenge (or another return is being completed). */
  ChallengeNotOpen: 'ChallengeNotOpen',
  /** The return route's update: the PSP refused the details call (a result it does not know); nothing changed. */
  ChallengeReturnRefused: 'ChallengeReturnRefused',
  /**
   * The first charge attempt found the payment's intent missing (a start in doubt) and the order
   * guard refused it again: another payment holds the order (details[0]: its id). Nothing was charged.
   */
  OrderTaken: 'OrderTaken',
  /**
   * The first charge attempt found the off-session payment's saved card held by a hard decline
   * (docs/recovery.md): nothing was charged, nothing recorded at any PSP. details[0]: how the
   * payment ends (OffSessionRefusal).
   */
  OffSessionRefused: 'OffSessionRefused',
  /** PostgreSQL refused a step's statement in a way no retry cures (db/sqlstate.ts); set by worker/database-refusals.ts. */
  DatabaseRefused: 'DatabaseRefused',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];
