import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { lateChargeWorkflowId } from '../domain/ids';
import type { LateChargeInput, LateChargeWorkflow } from '../shared/payments';

/**
 * Starts lateChargeWorkflow (workflows/payments-late-charge.ts) for one PSP charge, once: its id is
 * derived from the provider and the charge, a running one is the same job (USE_EXISTING) and a
 * completed one decided (ALLOW_DUPLICATE_FAILED_ONLY: only a run that failed, e.g. one that gave
 * up while the payment still waited, is started again; every run looks at the PSP before acting
 * and refunds under the one compensation sub-key). Callers: a PSP's charge event
 * (activities/payments-charge-events.ts: a late success the PSP reported) and reconciliation (a
 * late success whose webhook was lost).
 * Returns false when it had been started before.
 */
export async function startLateChargeWorkflow(client: Client, taskQueue: string, input: LateChargeInput): Promise<boolean> {
  try {
    await client.workflow.start<LateChargeWorkflow>('lateChargeWorkflow', {
      workflowId: lateChargeWorkflowId(input.provider, input.chargeId),
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      staticSummary: `late money of charge ${input.chargeId} (payment ${input.paymentId})`,
    });
    return true;
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw error;
  }
}
