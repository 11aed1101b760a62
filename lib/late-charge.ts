import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { lateChargeWorkflowId } from '../domain/ids';
import type { LateChargeInput } from '../shared/definitions';
import type { lateChargeWorkflow } from '../workflows';

/**
 * Starts lateChargeWorkflow (workflows/late-charge.ts) for one PSP charge, once: its id is
 * derived from the provider and the charge, a running one is the same job (USE_EXISTING) and a
 * closed one did it (REJECT_DUPLICATE). Callers: the inbound PSP webhook route (a late success
 * reported by the PSP) and reconciliation (a late success whose webhook was lost).
 * Returns false when it had been started before.
 */
export async function startLateChargeWorkflow(client: Client, taskQueue: string, input: LateChargeInput): Promise<boolean> {
  try {
    await client.workflow.start<typeof lateChargeWorkflow>('lateChargeWorkflow', {
      workflowId: lateChargeWorkflowId(input.provider, input.chargeId),
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `late money of charge ${input.chargeId} (payment ${input.paymentId})`,
    });
    return true;
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw error;
  }
}
