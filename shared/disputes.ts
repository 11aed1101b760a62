/**
 * A PSP dispute as the API, the worker and the workflows share it: the dispute's workflow input,
 * standing, reports and commands, its events, and the refund it answers with. Imported by
 * workflow code, so it must stay free of Node, I/O and clocks.
 */
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { DisputeStage, DisputeStatus } from '../domain/disputes';
import type { FinalResponse, ScopedKey } from './definitions';

/**
 * A dispute's facts (workflows/disputes.ts), each delivered once: opened, its funds withdrawn,
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

/** The PSP's word on a dispute: a verified webhook (re-read from the PSP) or the run's own poll. */
export interface DisputeReport {
  source: 'webhook' | 'poll' | 'reconciliation';
  eventId: string | null;
  dispute: ProviderDispute;
}

/**
 * Input of disputeEventWorkflow (workflows/disputes-events.ts): one PSP dispute event, as the
 * webhook route stored it (provider_events), handed over under disputeEventWorkflowId(provider,
 * event id). `dispute` is the event's (a hint, re-read from the PSP unless its kind has no read
 * of a dispute); `times` the dispute workflow's settings of the API that received it
 * (DISPUTE_REMINDER_SECONDS, DISPUTE_POLL_SECONDS).
 */
export interface DisputeEventInput {
  provider: string;
  eventId: string;
  dispute: ProviderDispute;
  times: DisputeTimes;
}

/** The dispute workflow's settings (DISPUTE_REMINDER_SECONDS, DISPUTE_POLL_SECONDS), in seconds. */
export interface DisputeTimes {
  reminderSeconds: readonly number[];
  pollSeconds: number;
}

/** What the event did: `dispute` reported to its dispute's workflow; `ignored` the PSP holds no such dispute. */
export interface DisputeEventResult {
  disposition: 'dispute' | 'ignored';
}

export type DisputeEventWorkflow = (input: DisputeEventInput) => Promise<DisputeEventResult>;

/** Input of disputeWorkflow (workflows/disputes.ts): one PSP dispute, under disputeWorkflowId(provider, dispute id). */
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

/** Where a dispute stands after a step of its run (activities/disputes.ts), as the run needs it. */
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
  /**
   * `notification`: the PSP has no read of a dispute (its kind's disputeSource): the run never
   * asks it, neither on its schedule nor at the deadline, and waits for its notifications.
   * Absent: the PSP is read.
   */
  disputeSource?: 'notification';
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
  /** Reports that arrived but were not recorded yet (a flood): the new run records them first. */
  reports?: DisputeReport[];
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
