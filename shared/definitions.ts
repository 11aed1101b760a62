/**
 * What the API, the worker and the workflows share: task queue, workflow inputs and
 * results, update and query definitions, search attribute keys. Imported by workflow code,
 * so it must stay free of Node, I/O and clocks.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

export const DEFAULT_TASK_QUEUE = 'payments';

/**
 * The vocabularies, each defined once: the TypeScript types, the zod enums (api/schemas.ts)
 * and so the OpenAPI document are derived from these lists.
 */
// The statuses, capture methods and payment events come from the lifecycle table (domain/payment-lifecycle.ts).
import { paymentEventTypes, paymentWindows, type CaptureMethod, type ChargeState, type PaymentEventType, type PaymentStatus } from '../domain/payment-lifecycle';
import type { FinalResponse } from '../domain/errors';
import type { DisputeStage, DisputeStatus } from '../domain/disputes';
export {
  captureMethods,
  paymentStatuses,
  paymentEventTypes,
  refundStatuses,
  type CaptureMethod,
  type PaymentStatus,
  type PaymentEventType,
  type RefundStatus,
} from '../domain/payment-lifecycle';

/** The events the outbox records and delivers (docs/CONTRACT.md, webhooks). */
export const refundEventTypes = ['refund.succeeded', 'refund.failed'] as const;
/**
 * Facts about a payment that are not a status of its own (the lifecycle table's events are):
 * a success the PSP reported after the payment had ended without money (expired, canceled,
 * declined, failed) was given back (workflows/late-charge.ts).
 */
export const paymentNoticeEventTypes = ['payment.late_success_refunded'] as const;
/**
 * A dispute's facts (workflows/dispute.ts), each delivered once: opened, its funds withdrawn,
 * evidence staged or submitted, its deadline near, its funds reinstated, closed with the outcome.
 */
export const disputeEventTypes = [
  'dispute.created',
  'dispute.funds_withdrawn',
  'dispute.updated',
  'dispute.evidence_due_soon',
  'dispute.funds_reinstated',
  'dispute.closed',
] as const;
export type DisputeEventType = (typeof disputeEventTypes)[number];
/** A customer's saved payment method was saved (a payment with setup_future_usage succeeded) or detached. */
export const paymentMethodEventTypes = ['payment_method.attached', 'payment_method.detached'] as const;
export const eventTypes = [...paymentEventTypes, ...paymentNoticeEventTypes, ...refundEventTypes, ...disputeEventTypes, ...paymentMethodEventTypes] as [EventType, ...EventType[]];
export type EventType = PaymentEventType | (typeof paymentNoticeEventTypes)[number] | (typeof refundEventTypes)[number] | DisputeEventType | (typeof paymentMethodEventTypes)[number];

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

/** A final HTTP response, recorded once in the idempotency store and replayed byte for byte (domain/errors.ts). */
export type { FinalResponse };

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
  /** The customer the payment is for (cus_…): its card is saved for them, or charged from what they saved. */
  customerId?: string | null;
  /** Save the card for the customer once the payment succeeds (docs/CONTRACT.md §3.9). */
  setupFutureUsage?: 'off_session' | null;
  /** The customer is not there: a challenge cannot be answered, so the PSP declines instead of asking. */
  offSession?: boolean;
  /** The saved method charged, as the API found it (absent: paymentMethod is the PSP's own token). */
  savedMethod?: SavedMethodCharge | null;
}

/** A card as a saved payment method shows it: nothing more of the card is kept. */
export interface CardDetails {
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/**
 * What charging a saved payment method needs at any PSP: the token a PSP saved the card as
 * (by provider name) where it has one; elsewhere, the card network's transaction id of the
 * card's first payment and the card's details (a merchant-initiated transaction).
 */
export interface SavedMethodCharge {
  /** Our id (pm_…). */
  id: string;
  tokens: Record<string, string>;
  networkTransactionId: string;
  card: CardDetails;
}

/** What routing may look at: the input of the route's plan in the first charge attempt (activities/route-steps.ts, planRouteFor by default). */
export interface RouteRequest {
  paymentId: string;
  tenantId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  /**
   * The payment's input: the first attempt persists the intent again if a start in doubt left
   * the run without it (db/payments.ts ensureIntent).
   */
  intent: PaymentWorkflowInput;
}

/**
 * The defaults of the waits, for runs whose input lacks them: the windows are the lifecycle
 * table's defaults (as lib/config.ts's), the status poll lib/config.ts's PROVIDER_POLL_* defaults.
 */
export const WAIT_DEFAULTS = {
  authenticationWindowMs: paymentWindows.authentication.defaultSeconds * 1000,
  settlementWindowMs: paymentWindows.settlement.defaultSeconds * 1000,
  statusPoll: { firstMs: 30_000, maxMs: 3600_000 },
  // Outlasts a PSP restart or a short outage; the customer's answer is not lost meanwhile.
  decisionGraceMs: 300_000,
} as const;

/** Where the customer goes to authenticate, and where the PSP sends them back afterwards. */
export interface ProviderNextAction {
  type: 'redirect_to_url';
  url: string;
  returnUrl: string | null;
}

/** A charge as the PSP holds it (provider/types.ts PaymentProvider answers with it; webhooks and polls report it). */
export interface ProviderCharge {
  id: string;
  status: ChargeState;
  amountMinor: number;
  amountCapturedMinor: number;
  amountRefundedMinor: number;
  currency: string;
  /** Set when status is 'declined': e.g. 'card_declined', 'insufficient_funds'. */
  declineCode: string | null;
  declineMessage: string | null;
  /** Set while status is 'requires_action'. */
  nextAction: ProviderNextAction | null;
  /** Our reference (payment id) as the PSP stored it. */
  reference: string;
  /**
   * When the charge took the money and when it was authorized, by the PSP's own clock (ISO 8601);
   * null or absent when the PSP does not say. A wait's window is decided by these, not by when
   * a webhook or poll brought the news (workflows/payment.ts decideAtDeadline).
   */
  succeededAt?: string | null;
  authorizedAt?: string | null;
  /**
   * Once the charge is authorized, the card as the PSP can charge it again: the token it saved
   * the card as (null when it saved none) and the card network's transaction id. Absent when
   * the PSP says nothing of the sort.
   */
  savedCard?: { token: string | null; networkTransactionId: string; card: CardDetails } | null;
}

/**
 * A dispute as the PSP holds it (provider/types.ts: the optional dispute capability answers with
 * it; the dispute workflow records it). Times are ISO 8601 strings by the PSP's clock.
 */
export interface ProviderDispute {
  id: string;
  chargeId: string;
  /** The disputed charge's reference (our payment id) as the PSP stored it. */
  reference: string | null;
  amountMinor: number;
  /** Upper-case ISO 4217. */
  currency: string;
  reason: string;
  stage: DisputeStage;
  status: DisputeStatus;
  evidenceDueBy: string;
  evidenceSubmittedAt: string | null;
  createdAt: string;
  /** The dispute fee the PSP withdrew with the amount (0 for an inquiry). */
  feeMinor: number;
}

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

/** What lateChargeWorkflow did, for the Web UI and the tests. */
export interface LateChargeResult {
  action: 'refunded' | 'voided' | 'refund_failed' | 'nothing';
  reason: string;
  refundId: string | null;
}

/**
 * lateChargeWorkflow's signature (workflows/late-charge.ts): what a client that starts it types
 * the start with (lib/late-charge.ts), so that no client imports workflow code.
 */
export type LateChargeWorkflow = (input: LateChargeInput) => Promise<LateChargeResult>;

/** Capture a manual-capture payment. Rejected by its validator unless the payment awaits capture. */
export const captureUpdate = defineUpdate<FinalResponse, [CaptureRequest]>('capture');
/** Cancel (void) a manual-capture payment. Rejected by its validator unless it awaits capture. */
export const cancelUpdate = defineUpdate<FinalResponse, [CancelRequest]>('cancel');
/**
 * The create request's first answer, once the run has recorded it (the stored response the
 * API would otherwise learn from the record's completion notification). Sent with the start as
 * Update-With-Start when PAYMENT_ANSWER=update (docs/ARCHITECTURE.md).
 */
export const firstAnswerUpdate = defineUpdate<FinalResponse>('firstAnswer');
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

/** The PSP's word on a dispute: a verified webhook (re-read from the PSP) or the run's own poll. */
export interface DisputeReport {
  source: 'webhook' | 'poll' | 'reconciliation';
  eventId: string | null;
  dispute: ProviderDispute;
}

/** Input of disputeWorkflow (workflows/dispute.ts): one PSP dispute, under disputeWorkflowId(provider, dispute id). */
export interface DisputeWorkflowInput {
  provider: string;
  providerDisputeId: string;
  /** Reminders (dispute.evidence_due_soon) this long before the evidence deadline, in ms (DISPUTE_REMINDER_SECONDS). */
  remindersBeforeMs: number[];
  /** While the dispute is open the run asks the PSP this often (DISPUTE_POLL_SECONDS): a lost webhook delays it by at most this. */
  pollEveryMs: number;
  /** The run continues as new at its next quiet point past this many history events (default 2 000), or sooner when Temporal suggests it. */
  continueAfterEvents?: number;
  /** Where the run that continued as new left the dispute: the new run goes on from here, without asking the PSP first. */
  continued?: DisputeCarried;
}

/** Where a dispute stands after a step of its run (activities/dispute-steps.ts), as the run needs it. */
export interface DisputeStanding {
  /** null: no payment of ours has the disputed charge; nothing was recorded. */
  disputeId: string | null;
  paymentId: string | null;
  stage: DisputeStage | null;
  status: DisputeStatus | null;
  evidenceDueBy: string | null;
  closed: boolean;
  /** The disputed payment was refunded in full before the dispute came. */
  paymentRefundedInFull: boolean;
  /**
   * What of the disputed payment was refunded and captured, in its currency's minor units: any
   * refund before the dispute came is the evidence. Absent from the results of steps recorded
   * before the field existed; those runs go by paymentRefundedInFull.
   */
  paymentRefund?: RefundBeforeDispute;
}

/** What a dispute's run carries into the run it continues as: its standing and what it has done. */
export interface DisputeCarried {
  /** The dispute as the last step left it. */
  standing: DisputeStanding;
  /** The reminders sent, as `{stage}:{beforeMs}`. */
  reminded: string[];
  refundEvidenceSent: boolean;
  /** The next scheduled look at the PSP (epoch ms). */
  nextPollAt: number;
}

export interface DisputeWorkflowResult {
  /** null: no payment of ours has the disputed charge (nothing recorded). */
  disputeId: string | null;
  status: DisputeStatus | null;
}

export type DisputeWorkflow = (input: DisputeWorkflowInput) => Promise<DisputeWorkflowResult>;

/** A report about the run's dispute, sent with signal-with-start (a duplicate is one more report, applied forward-only). */
export const disputeReportSignal = defineSignal<[DisputeReport]>('disputeReport');

/**
 * POST /v1/disputes/{id}/evidence: evidence staged, or submitted to the PSP (`submit`). The API
 * stores the evidence first (db/disputes.ts admitEvidence) and sends its digest: the run's
 * history never holds the evidence itself. `evidence` inline is the form of updates that runs
 * accepted from API processes that sent it so; the run still serves it.
 */
export interface DisputeEvidenceRequest {
  evidenceDigest?: string;
  evidence?: Record<string, string>;
  submit: boolean;
  idempotency: ScopedKey;
  requestId: string;
}

/** POST /v1/disputes/{id}/accept: the merchant concedes. */
export interface DisputeAcceptRequest {
  idempotency: ScopedKey;
  requestId: string;
}

/** The merchant's commands to a dispute's run; each answers the operation's final response (recorded by the run). */
export const disputeEvidenceUpdate = defineUpdate<FinalResponse, [DisputeEvidenceRequest]>('disputeEvidence');
export const disputeAcceptUpdate = defineUpdate<FinalResponse, [DisputeAcceptRequest]>('disputeAccept');

/**
 * Defaults of DISPUTE_REMINDER_SECONDS (3 days and 1 day before the deadline), DISPUTE_POLL_SECONDS
 * (1 hour), DISPUTE_EVIDENCE_MAX_REQUESTS (50) and DISPUTE_EVIDENCE_MAX_BYTES (2 MiB).
 */
export const DISPUTE_DEFAULTS = { reminderSeconds: [3 * 24 * 3600, 24 * 3600], pollSeconds: 3600, evidenceMaxRequests: 50, evidenceMaxBytes: 2 * 1024 * 1024 } as const;

/** What of a disputed payment was refunded before its dispute came, in its currency's minor units. */
export interface RefundBeforeDispute {
  refundedMinor: number;
  capturedMinor: number;
  currency: string;
}

/** "the payment was refunded in full (3000 EUR minor units)" or "800 of the payment's 3000 EUR minor units were refunded". */
export function refundSummary(refund: RefundBeforeDispute): string {
  return refund.refundedMinor >= refund.capturedMinor
    ? `the payment was refunded in full (${refund.capturedMinor} ${refund.currency} minor units)`
    : `${refund.refundedMinor} of the payment's ${refund.capturedMinor} ${refund.currency} minor units were refunded`;
}

/**
 * The evidence a refund makes (submitted on the merchant's behalf when a dispute comes for a
 * payment already refunded, in full or in part): the network reads what the cardholder has back.
 * Without the amounts (a run's step recorded before they were known): a refund in full.
 */
export function refundEvidence(paymentId: string, refund?: RefundBeforeDispute): Record<string, string> {
  if (!refund || refund.refundedMinor >= refund.capturedMinor) {
    return {
      uncategorized_text: `Payment ${paymentId} was refunded in full before this dispute was opened; the cardholder has the money back.`,
    };
  }
  return {
    uncategorized_text: `Payment ${paymentId}: ${refundSummary(refund)} before this dispute was opened; the cardholder has that money back.`,
  };
}
