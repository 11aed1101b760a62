/**
 * A payment as the API, the worker and the workflows share it: its workflow's input, updates,
 * signal, query and search attributes, the PSP's charge as reports bring it, and the late
 * charge's workflow. Imported by workflow code, so it must stay free of Node, I/O and clocks.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { RecoveryPolicy } from '../domain/recovery';
import type { AttemptMemo, RoutePlan } from '../domain/payments-attempts';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
// The statuses, capture methods and payment events come from the lifecycle table (domain/payments.ts).
import { paymentWindows, type CaptureMethod, type ChargeFigures, type ChargeState, type PaymentStatus } from '../domain/payments';
import type { FinalResponse, ScopedKey } from './definitions';
import type { CardDetails, SavedMethodCharge } from './customers';
export { captureMethods, paymentStatuses, paymentEventTypes, type CaptureMethod, type PaymentStatus, type PaymentEventType } from '../domain/payments';

/**
 * Facts about a payment that are not a status of its own (the lifecycle table's events are):
 * a success the PSP reported after the payment had ended without money (expired, canceled,
 * declined, failed) was given back (workflows/payments-late-charge.ts).
 */
export const paymentNoticeEventTypes = ['payment.late_success_refunded', 'payment.recovery_attempt_failed'] as const;

/** The idempotency operation of POST /v1/payments (api/typed-route.ts operationName; a test checks they agree). */
export const CREATE_PAYMENT_OPERATION = 'POST /v1/payments';

/** Input of paymentWorkflow: one payment, as validated by the API. */
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
  /**
   * Revenue recovery (docs/recovery.md), set only when asked for: a soft decline of the first
   * attempt is retried within `policy` (already scaled) until `windowMs` after it, each retry
   * reserved in the budget of the saved method `paymentMethodId`.
   */
  recovery?: { windowMs: number; policy: RecoveryPolicy; paymentMethodId: string } | null;
  /**
   * The run continues as new during a wait once it has taken this many updates (default
   * PAYMENT_CONTINUE_AFTER.updates), or its history this many events (PAYMENT_CONTINUE_AFTER.events),
   * or Temporal suggests it: well before the server's limits on a run, so a merchant's command
   * always finds room (PAYMENT_CONTINUE_AFTER_UPDATES and _EVENTS set them lower, for tests).
   */
  continueAfterUpdates?: number;
  continueAfterEvents?: number;
  /** Where the run that continued as new left its wait: this run resumes it (workflows/payments/run.ts). */
  continued?: PaymentCarried;
}

/** A payment's charge budget when its route plan carries none (PAYMENT_CHARGE_BUDGET_SECONDS' default; workflows/payments/charge.ts). */
export const DEFAULT_CHARGE_BUDGET_MS = 60_000;

/**
 * The error code of a charge attempt that ended "not charged" after the PSP answered its sends
 * with errors (5xx) and its lookups found no charge: certain, so the route may start again at
 * that PSP under a new key (workflows/payments/charge.ts). After sends the PSP never answered
 * (a timeout, a reset) the code is `outcome_unknown_none_found`: that request may still be
 * running there, so the route does not start again at it.
 */
export const PSP_ERROR_NONE_FOUND = 'psp_error_none_found';

/** When a payment's run continues as new, unless its input says otherwise (Temporal's limits: 2 000 updates, 51 200 events or 50 MB of history). */
export const PAYMENT_CONTINUE_AFTER = { updates: 1000, events: 10_000, bytes: 4 * 1024 * 1024 } as const;

/**
 * What a payment's run carries into the run it continues as, during a wait: where the payment
 * stands, the wait and its deadline, and what the run knew. No command is ever carried: a
 * command ends the wait it arrives in, so a run continues as new only with none pending and no
 * handler running.
 */
export interface PaymentCarried {
  /** The wait the new run resumes: the PSP's (the customer's challenge, the bank's debit) or the merchant's capture. */
  wait: 'psp' | 'capture';
  status: PaymentStatus;
  /** The charge waited on (its id '' while the PSP has not named it); an authorization's void is the compensation it carries. */
  charge: ProviderCharge;
  /** When the wait's window ends (epoch ms, workflow time): the same deadline in every run. */
  deadline: number;
  /** The status poll's next interval (the PSP's wait). */
  pollIntervalMs?: number;
  firstAnswer: FinalResponse;
  chargingAttempt: { provider?: string; attempt?: number };
  routeMemo: { provider?: string; attempts?: AttemptMemo[]; route?: string[]; route_reason?: string };
  routePlan?: RoutePlan;
  /** What the PSP reported about the charge, oldest first (at most the run keeps). */
  reports: ProviderCharge[];
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

/** A charge as the PSP holds it (provider/types.ts PaymentProvider answers with it; webhooks and polls report it): its figures (domain/payments.ts) and more. */
export interface ProviderCharge extends ChargeFigures {
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
   * a webhook or poll brought the news (workflows/payments/wait.ts decideAtDeadline).
   */
  succeededAt?: string | null;
  authorizedAt?: string | null;
  /**
   * Once the charge is authorized, the card as the PSP can charge it again: the token it saved
   * the card as (null when it saved none) and the card network's transaction id; and the card's
   * fingerprint where the PSP gives one (one per card number: the card's budget of attempts is
   * kept by it, docs/recovery.md). Absent when the PSP says nothing of the sort.
   */
  savedCard?: { token: string | null; networkTransactionId: string; card: CardDetails; fingerprint?: string | null } | null;
  /**
   * A decline's signal from the card scheme, when the PSP passes it on: the scheme's response
   * code, Visa's decline category, Mastercard's Merchant Advice Code (domain/recovery.ts reads
   * them to decide whether and when a retry is allowed). Absent when the PSP says nothing.
   */
  declineSignal?: { networkCode: string; category: number | null; adviceCode: string | null } | null;
  /**
   * true: the answer to a capture or void that a PSP whose modifications are `notified` has only
   * received (its status is the charge's before it); its notification says what it came to.
   * Absent: the PSP's answer is final.
   */
  received?: boolean;
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
  /** The PSP that reported it (webhooks): a charge the PSP had not named is named only by its own reports. */
  provider?: string;
}


/** Input of the capture update: capture all (amountMinor omitted) or part of an authorization. */
export interface CaptureRequest {
  amountMinor: number | null;
  idempotency: ScopedKey;
  requestId: string;
}

/**
 * The decline code of an authorization whose void the PSP refused (its notification of the cancel
 * that is not a success): the charge is reported still `requires_capture` with it, and a payment whose
 * cancel it answers fails with it as `failure.code`.
 */
export const CANCEL_FAILED = 'cancel_failed';

/** Input of the cancel update: void an uncaptured authorization. */
export interface CancelRequest {
  idempotency: ScopedKey;
  requestId: string;
}

/**
 * Input of lateChargeWorkflow: the PSP reported money (a success, or an authorization) for a
 * charge of a payment that had already ended without money. Started by the PSP's charge event
 * (activities/payments-charge-events.ts) or reconciliation, under lateChargeWorkflowId(provider, chargeId).
 */
export interface LateChargeInput {
  provider: string;
  chargeId: string;
  paymentId: string;
  /** The PSP event that reported it (for the record and the log). */
  eventId: string;
  /**
   * The charge as the PSP's signed notification reports it, at a kind that has no retrieval
   * (modifications `notified`): the run acts on it instead of asking the PSP.
   */
  charge?: ProviderCharge;
}

/** What lateChargeWorkflow did, for the Web UI and the tests. */
export interface LateChargeResult {
  action: 'refunded' | 'voided' | 'refund_failed' | 'void_failed' | 'nothing';
  reason: string;
  refundId: string | null;
}

/**
 * lateChargeWorkflow's signature (workflows/payments-late-charge.ts): what a client that starts it types
 * the start with (lib/late-charge.ts), so that no client imports workflow code.
 */
export type LateChargeWorkflow = (input: LateChargeInput) => Promise<LateChargeResult>;

/** Capture a manual-capture payment. Rejected by its validator unless the payment awaits capture. */
export const captureUpdate = defineUpdate<FinalResponse, [CaptureRequest]>('capture');
/** Cancel (void) a manual-capture payment. Rejected by its validator unless it awaits capture. */
export const cancelUpdate = defineUpdate<FinalResponse, [CancelRequest]>('cancel');
/**
 * The create request's first answer, once the run has recorded it (the stored response the
 * API would otherwise learn from the record's completion NOTIFY). Sent with the start as
 * Update-With-Start when PAYMENT_ANSWER=update (docs/ARCHITECTURE.md).
 */
export const firstAnswerUpdate = defineUpdate<FinalResponse>('firstAnswer');
/**
 * What the customer came back to our return route with after a 3-D Secure challenge at a PSP
 * whose challengeReturn is `orchestrator` (its redirect result), for the PSP's details call.
 */
export interface ChallengeReturn {
  redirectResult: string;
  requestId: string;
}

/** Our return route for a payment under the API's public URL (API_PUBLIC_URL): the returnUrl a PSP whose challengeReturn is `orchestrator` is given. */
export function challengeReturnUrl(apiPublicUrl: string, paymentId: string): string {
  return `${apiPublicUrl.replace(/\/+$/, '')}/return/${encodeURIComponent(paymentId)}`;
}

/** What the return route's update answers: the payment's status once the details call's answer was applied (or the run moved on). */
export interface ChallengeReturnOutcome {
  status: PaymentStatus;
}

/**
 * The customer is back from the challenge (GET /return/{payment_id}): the run asks the PSP for the
 * outcome with the details call, and applies it as it applies a webhook's report. Refused by its
 * validator unless the payment waits for its customer's authentication and no other return is
 * being completed.
 */
export const challengeReturnUpdate = defineUpdate<ChallengeReturnOutcome, [ChallengeReturn]>('challengeReturn');
/** A PSP webhook about the payment's charge (sent by its charge event's step, activities/payments-charge-events.ts); fire-and-forget. */
export const chargeReportSignal = defineSignal<[ChargeReport]>('chargeReport');
/** The payment's current status, as the workflow knows it. */
export const paymentStatusQuery = defineQuery<PaymentStatus>('paymentStatus');
/**
 * The capture the run asked its PSP for (the charge, the amount and currency sent), null before
 * it asked one: what a PSP's report of a capture (its notification of it) is compared with before it is
 * passed on (activities/payments-charge-events.ts).
 */
export interface CaptureAsked {
  chargeId: string;
  amountMinor: number;
  currency: string;
}
export const captureAskedQuery = defineQuery<CaptureAsked | null>('captureAsked');
export const OrderIdKey = defineSearchAttributeKey('OrderId', SearchAttributeType.KEYWORD);
export const PaymentStatusKey = defineSearchAttributeKey('PaymentStatus', SearchAttributeType.KEYWORD);

/**
 * Input of chargeEventWorkflow: one PSP event about a charge of ours, as the webhook route
 * stored it (provider_events), handed over for its decision. The event's figures are the
 * sender's word, kept only to log how they differ from the charge the PSP holds.
 */
export interface ChargeEventInput {
  provider: string;
  eventId: string;
  paymentId: string;
  chargeId: string;
  reported: { status: ChargeState; amountCapturedMinor: number };
  /**
   * The event's own charge, handed over with it: at a kind whose modifications are `notified`
   * the signed notification is the PSP's word on its charge (it has no retrieval), so
   * the step acts on it; elsewhere the step retrieves the charge. Absent in events handed over
   * before it was added.
   */
  charge?: ProviderCharge;
}

/**
 * What a charge event did to its payment: `forward`, the charge as the PSP holds it was passed to
 * the payment's run (or the run had it already, or had closed); `held_for_operator`, the PSP's
 * charge disagrees with the payment (or the PSP does not hold it) and the payment is flagged
 * `needs_operator`; plus, either way, whether money the PSP holds for a payment that ended
 * without it is being given back (lateChargeWorkflow started).
 */
export interface ChargeEventResult {
  disposition: 'forward' | 'held_for_operator';
  reason: string | null;
  lateCharge: boolean;
}

export type ChargeEventWorkflow = (input: ChargeEventInput) => Promise<ChargeEventResult>;
