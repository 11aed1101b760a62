import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { chargeEventWorkflowId, disputeEventWorkflowId, refundEventWorkflowId } from '../domain/ids';
import type { DisputeEventInput, DisputeEventResult } from '../shared/disputes';
import type { ChargeEventInput, ChargeEventResult } from '../shared/payments';
import type { RefundEventInput, RefundEventResult } from '../shared/refunds';

/**
 * One stored PSP event, for the workflow of its area that decides what it does: a charge's
 * (workflows/payments-charge-events.ts), a refund's report (workflows/refunds.ts
 * refundEventWorkflow), a dispute's (workflows/disputes-events.ts).
 */
export type ProviderEventHandOver =
  | { area: 'charge'; input: ChargeEventInput }
  | { area: 'refund'; input: RefundEventInput }
  | { area: 'dispute'; input: DisputeEventInput };

/** The decision of an event's workflow: what the webhook route answers as `disposition`. */
export type ProviderEventDecision = ChargeEventResult | RefundEventResult | DisputeEventResult;

/** The three workflows, as the route starts and awaits them. */
type ProviderEventWorkflow = (input: ProviderEventHandOver['input']) => Promise<ProviderEventDecision>;

const workflowOf = {
  charge: { type: 'chargeEventWorkflow', id: chargeEventWorkflowId },
  refund: { type: 'refundEventWorkflow', id: refundEventWorkflowId },
  dispute: { type: 'disputeEventWorkflow', id: disputeEventWorkflowId },
} as const;

/** What the Web UI says of the run: ids only, never an amount. */
function summaryOf(handOver: ProviderEventHandOver): string {
  if (handOver.area === 'charge') return `PSP event ${handOver.input.eventId} about charge ${handOver.input.chargeId} (payment ${handOver.input.paymentId})`;
  if (handOver.area === 'refund') return `PSP event ${handOver.input.eventId} about refund ${handOver.input.refund.id} of charge ${handOver.input.refund.chargeId}`;
  return `PSP event ${handOver.input.eventId} about dispute ${handOver.input.dispute.id} of charge ${handOver.input.dispute.chargeId}`;
}

/**
 * Hands one stored PSP event to the workflow of its area, once: its id is derived from the
 * provider and the event, a running one is the same decision (USE_EXISTING) and a completed one
 * made it (ALLOW_DUPLICATE_FAILED_ONLY: only a run that failed is started again). Every delivery
 * of the event gets the handle of that one run.
 */
export async function handOverProviderEvent(client: Client, taskQueue: string, handOver: ProviderEventHandOver): Promise<WorkflowHandle<ProviderEventWorkflow>> {
  const { type, id } = workflowOf[handOver.area];
  const workflowId = id(handOver.input.provider, handOver.input.eventId);
  try {
    return await client.workflow.start<ProviderEventWorkflow>(type, {
      workflowId,
      taskQueue,
      args: [handOver.input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      staticSummary: summaryOf(handOver),
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return client.workflow.getHandle<ProviderEventWorkflow>(workflowId);
    throw error;
  }
}
