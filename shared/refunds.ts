/** A refund's workflow input and events, shared by the API, the worker and the workflows (no I/O). */
import { defineSignal } from '@temporalio/workflow';
import type { ScopedKey } from './definitions';

export { refundStatuses, type RefundStatus } from '../domain/payments';

/** A refund's events (shared/events.ts has every area's). */
export const refundEventTypes = ['refund.succeeded', 'refund.failed'] as const;

/** Input of refundWorkflow: one refund of a captured payment. */
export interface RefundWorkflowInput {
  refundId: string;
  tenantId: string;
  paymentId: string;
  amountMinor: number;
  reason: string | null;
  idempotency: ScopedKey;
  requestId: string;
  /**
   * How long a refund the PSP answered `pending` (a kind whose modifications are notified) waits
   * for its REFUND notification; default REFUND_CONFIRMATION_WINDOW_SECONDS. Tests shorten it.
   */
  confirmationWindowSeconds?: number;
}

/** Seven days: a PSP that confirms refunds by notification sends it within hours, and redelivers it for days. */
export const REFUND_CONFIRMATION_WINDOW_SECONDS = 7 * 24 * 3600;

/** A refund as the PSP reports it (provider/types.ts ProviderRefund has this shape). */
export interface RefundReport {
  id: string;
  chargeId: string;
  status: 'succeeded' | 'failed' | 'pending';
  amountMinor: number;
  failureCode: string | null;
  failureMessage: string | null;
  reference?: string;
}

/**
 * The PSP's confirmation of a refund it answered `pending` (its REFUND or REFUND_FAILED
 * notification, sent by its refund event's step, activities/refunds-events.ts); fire-and-forget.
 */
export const refundReportSignal = defineSignal<[RefundReport]>('refundReport');

/**
 * Input of refundEventWorkflow (workflows/refunds.ts): one PSP report of a refund (its
 * confirmation or refusal), as the webhook route stored it (provider_events), handed over for its decision
 * under refundEventWorkflowId(provider, event id).
 */
export interface RefundEventInput {
  provider: string;
  eventId: string;
  refund: RefundReport;
}

/**
 * What the report did: `forward` passed to the run of the pending refund it names (or to the
 * late-charge run of its charge, which waits for it); `held_for_operator` a refusal of a
 * payment's compensation, the payment flagged `compensation_failed`; `ignored` nothing of ours
 * waits for it.
 */
export interface RefundEventResult {
  disposition: 'forward' | 'ignored' | 'held_for_operator';
}

export type RefundEventWorkflow = (input: RefundEventInput) => Promise<RefundEventResult>;
