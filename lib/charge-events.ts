import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { chargeEventWorkflowId } from '../domain/ids';
import type { ChargeEventInput, ChargeEventWorkflow } from '../shared/payments';

/**
 * Hands one stored PSP charge event to chargeEventWorkflow (workflows/payments-charge-events.ts),
 * once: its id is derived from the provider and the event, a running one is the same decision
 * (USE_EXISTING) and a completed one made it (ALLOW_DUPLICATE_FAILED_ONLY: only a run that failed
 * is started again). Every delivery of the event gets the handle of that one run.
 */
export async function handOverChargeEvent(client: Client, taskQueue: string, input: ChargeEventInput): Promise<WorkflowHandle<ChargeEventWorkflow>> {
  const workflowId = chargeEventWorkflowId(input.provider, input.eventId);
  try {
    return await client.workflow.start<ChargeEventWorkflow>('chargeEventWorkflow', {
      workflowId,
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      staticSummary: `PSP event ${input.eventId} about charge ${input.chargeId} (payment ${input.paymentId})`,
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return client.workflow.getHandle<ChargeEventWorkflow>(workflowId);
    throw error;
  }
}
