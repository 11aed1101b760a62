import type { Client } from '@temporalio/client';
import { disputeWorkflowId } from '../domain/ids';
import { disputeReportSignal, type DisputeReport, type DisputeWorkflow, type DisputeWorkflowInput } from '../shared/definitions';

/** The dispute workflow's settings (DISPUTE_REMINDER_SECONDS, DISPUTE_POLL_SECONDS), in seconds. */
export interface DisputeTimes {
  reminderSeconds: readonly number[];
  pollSeconds: number;
}

/**
 * Reports a PSP dispute to its workflow (workflows/dispute.ts) with signal-with-start under
 * disputeWorkflowId(provider, dispute id): the first report starts the run, every later one
 * (a duplicate, a reordered event, the reconciliation run's find) is one more signal to it. A
 * report after the run closed starts a new run, which records it forward-only (nothing moves
 * a closed dispute) and ends. Callers: the inbound PSP webhook route and reconciliation.
 */
export async function reportDispute(client: Client, taskQueue: string, provider: string, report: DisputeReport, times: DisputeTimes): Promise<string> {
  const input: DisputeWorkflowInput = {
    provider,
    providerDisputeId: report.dispute.id,
    remindersBeforeMs: times.reminderSeconds.map((s) => s * 1000),
    pollEveryMs: times.pollSeconds * 1000,
  };
  const workflowId = disputeWorkflowId(provider, report.dispute.id);
  await client.workflow.signalWithStart<DisputeWorkflow, [DisputeReport]>('disputeWorkflow', {
    workflowId,
    taskQueue,
    args: [input],
    signal: disputeReportSignal,
    signalArgs: [report],
    staticSummary: `dispute ${report.dispute.id} of charge ${report.dispute.chargeId} at ${provider}`,
  });
  return workflowId;
}
