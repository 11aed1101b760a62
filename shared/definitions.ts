/**
 * What the API, the worker and the workflows share: task queue, workflow inputs and
 * results, update and query definitions, search attribute keys. Imported by workflow code,
 * so it must stay free of Node, I/O and clocks.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ProviderCharge } from '../provider/types';

export const DEFAULT_TASK_QUEUE = 'payments';

/**
 * The vocabularies, each defined once: the TypeScript types, the zod enums (api/schemas.ts)
 * and so the OpenAPI document are derived from these lists.
 */
// The payment statuses and their events come from the lifecycle table (domain/payment-lifecycle.ts).
import { paymentEventTypes, type PaymentEventType, type PaymentStatus } from '../domain/payment-lifecycle';
export { paymentStatuses, paymentEventTypes, type PaymentStatus, type PaymentEventType } from '../domain/payment-lifecycle';

export const captureMethods = ['automatic', 'manual'] as const;
export type CaptureMethod = (typeof captureMethods)[number];

export const refundStatuses = ['pending', 'succeeded', 'failed'] as const;
export type RefundStatus = (typeof refundStatuses)[number];

/** The events the outbox records and delivers (docs/CONTRACT.md, webhooks). */
export const refundEventTypes = ['refund.succeeded', 'refund.failed'] as const;
/**
 * Facts about a payment that are not a status of its own (the lifecycle table's events are):
 * a success the PSP reported after the payment had ended without money (expired, canceled,
 * declined, failed) was given back (workflows/late-charge.ts).
 */
export const paymentNoticeEventTypes = ['payment.late_success_refunded'] as const;
export const eventTypes = [...paymentEventTypes, ...paymentNoticeEventTypes, ...refundEventTypes] as [EventType, ...EventType[]];
export type EventType = PaymentEventType | (typeof paymentNoticeEventTypes)[number] | (typeof refundEventTypes)[number];

/** Where an event's webhook delivery stands: being tried, acknowledged, given up, or no endpoint. */
export const deliveryStatuses = ['pending', 'delivered', 'failed', 'skipped'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

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

/** A final HTTP response, recorded once in the idempotency store and replayed byte for byte. */
export interface FinalResponse {
  status: number;
  body: string;
  location: string | null;
}

/** Input of paymentWorkflow: one payment, as validated by the API. */
/** The idempotency operation of POST /v1/payments (api/typed-route.ts operationName; a test checks they agree). */
export const CREATE_PAYMENT_OPERATION = 'POST /v1/payments';

export interface PaymentWorkflowInput {
  paymentId: string;
  tenantId: string;
  orderId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  captureMethod: CaptureMethod;
  description: string | null;
  metadata: Record<string, string>;
  idempotency: ScopedKey;
  requestId: string;
  /** How long a manual-capture authorization may wait before it is voided. */
  authorizationWindowMs: number;
  /**
   * The waits' configuration. Optional: a missing value takes the default below (a constant, so
   * replay agrees).
   */
  /** Where the PSP's challenge page sends the customer back (the merchant's return_url). */
  returnUrl?: string | null;
  /** How long the customer has to authenticate (3-D Secure) before the payment expires. */
  authenticationWindowMs?: number;
  /** How long an asynchronous method's outcome is awaited before the payment expires. */
  settlementWindowMs?: number;
  /** The status poll while a payment waits: first after firstMs, then growing to maxMs. */
  statusPoll?: { firstMs: number; maxMs: number };
  /**
   * When a wait's window ends, how long the run keeps asking an unreachable PSP for the charge
   * before it decides without its answer (PROVIDER_DECISION_GRACE_SECONDS).
   */
  decisionGraceMs?: number;
}

/** The defaults of the waits (lib/config.ts has the same ones for the API's input). */
export const WAIT_DEFAULTS = {
  authenticationWindowMs: 900_000,
  settlementWindowMs: 7 * 24 * 3600_000,
  statusPoll: { firstMs: 30_000, maxMs: 3600_000 },
  // Outlasts a PSP restart or a short outage; the customer's answer is not lost meanwhile.
  decisionGraceMs: 300_000,
} as const;

/**
 * What the PSP reported about the payment's charge, by webhook (verified by the API and stored
 * once in provider_events) or by the workflow's own status poll. The charge as the PSP held it.
 */
export interface ChargeReport {
  source: 'webhook' | 'poll';
  /** The PSP's event id (webhooks), for the log and the memo. */
  eventId: string | null;
  charge: ProviderCharge;
}


/** Input of the capture update: capture all (amountMinor omitted) or part of an authorization. */
export interface CaptureRequest {
  amountMinor: number | null;
  idempotency: ScopedKey;
  requestId: string;
}

/** Input of the cancel update: void an uncaptured authorization. */
export interface CancelRequest {
  idempotency: ScopedKey;
  requestId: string;
}

/** Input of refundWorkflow: one refund of a captured payment. */
export interface RefundWorkflowInput {
  refundId: string;
  tenantId: string;
  paymentId: string;
  amountMinor: number;
  reason: string | null;
  idempotency: ScopedKey;
  requestId: string;
}

/**
 * Input of lateChargeWorkflow: the PSP reported money (a success, or an authorization) for a
 * charge of a payment that had already ended without money. Started by
 * POST /provider_webhooks/{provider} under lateChargeWorkflowId(provider, chargeId).
 */
export interface LateChargeInput {
  provider: string;
  chargeId: string;
  paymentId: string;
  /** The PSP event that reported it (for the record and the log). */
  eventId: string;
}

/** Capture a manual-capture payment. Rejected by its validator unless the payment awaits capture. */
export const captureUpdate = defineUpdate<FinalResponse, [CaptureRequest]>('capture');
/** Cancel (void) a manual-capture payment. Rejected by its validator unless it awaits capture. */
export const cancelUpdate = defineUpdate<FinalResponse, [CancelRequest]>('cancel');
/** A PSP webhook about the payment's charge (sent by POST /provider_webhooks/{provider}); fire-and-forget. */
export const chargeReportSignal = defineSignal<[ChargeReport]>('chargeReport');
/** The payment's current status, as the workflow knows it. */
export const paymentStatusQuery = defineQuery<PaymentStatus>('paymentStatus');

export const TenantIdKey = defineSearchAttributeKey('TenantId', SearchAttributeType.KEYWORD);
export const OrderIdKey = defineSearchAttributeKey('OrderId', SearchAttributeType.KEYWORD);
export const PaymentStatusKey = defineSearchAttributeKey('PaymentStatus', SearchAttributeType.KEYWORD);

/**
 * Failure types that cross the workflow boundary (ApplicationFailure.type). One closed set;
 * the API maps update rejections of these types to HTTP responses in one place.
 */
export const FailureType = {
  /** The ledger refuses the posting for good (e.g. a frozen account): compensate. */
  LedgerRejected: 'LedgerRejected',
  /** The provider refused the request itself; nothing happened there. */
  ProviderRejected: 'ProviderRejected',
  /** Update validator: the payment is not in a state that allows this command. */
  PaymentNotCapturable: 'PaymentNotCapturable',
  PaymentNotCancelable: 'PaymentNotCancelable',
  /** Update validator: capture amount above what was authorized. */
  CaptureExceedsAuthorized: 'CaptureExceedsAuthorized',
  /**
   * The first charge attempt found the payment's intent missing (a start in doubt) and the order
   * guard refused it again: another payment holds the order (details[0]: its id). Nothing was charged.
   */
  OrderTaken: 'OrderTaken',
  /** PostgreSQL refused a step's statement in a way no retry cures (db/sqlstate.ts); set by worker/database-refusals.ts. */
  DatabaseRefused: 'DatabaseRefused',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];
