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

/** Seven days: a PSP that confirms refunds by notification (Adyen) sends it within hours, and redelivers it for days. */
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
 * The PSP's settlement of a refund it answered `pending` (its REFUND or REFUND_FAILED
 * notification, sent by POST /provider_webhooks/{provider}); fire-and-forget.
 */
export const refundReportSignal = defineSignal<[RefundReport]>('refundReport');
