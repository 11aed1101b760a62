/** A refund's workflow input and events, shared by the API, the worker and the workflows (no I/O). */
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
}
