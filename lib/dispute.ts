import type { Client } from '@temporalio/client';
import { disputeWorkflowId } from '../domain/ids';
import { DISPUTE_DEFAULTS, disputeReportSignal, type DisputeReport, type DisputeTimes, type DisputeWorkflow, type DisputeWorkflowInput } from '../shared/disputes';

export type { DisputeTimes };

/** The dispute workflow's settings from a process's configuration (the defaults where it leaves them out). */
export function disputeTimesOf(config: { DISPUTE_REMINDER_SECONDS?: readonly number[] | undefined; DISPUTE_POLL_SECONDS?: number | undefined }): DisputeTimes {
  return { reminderSeconds: config.DISPUTE_REMINDER_SECONDS ?? DISPUTE_DEFAULTS.reminderSeconds, pollSeconds: config.DISPUTE_POLL_SECONDS ?? DISPUTE_DEFAULTS.pollSeconds };
}

/**
 * Reports a PSP dispute to its workflow (workflows/disputes.ts) with signal-with-start under
 * disputeWorkflowId(provider, dispute id): the first report starts the run, every later one
 * (a duplicate, a reordered event, the reconciliation run's find) is one more signal to it. A
 * report after the run closed (completed, or terminated, failed or timed out) starts a new run,
 * which records it forward-only (nothing moves a closed dispute) and ends, or goes on with a
 * dispute still open. Callers: a dispute event's step (activities/disputes-events.ts) and reconciliation.
 */
export async function reportDispute(client: Client, taskQueue: string, provider: string, report: DisputeReport, times: DisputeTimes): Promise<string> {
  const input = disputeInput(provider, report.dispute.id, times);
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

function disputeInput(provider: string, providerDisputeId: string, times: DisputeTimes): DisputeWorkflowInput {
  return { provider, providerDisputeId, remindersBeforeMs: times.reminderSeconds.map((s) => s * 1000), pollEveryMs: times.pollSeconds * 1000 };
}

/**
 * Starts the dispute's run again when it ended without the PSP closing the dispute (terminated,
 * failed, timed out): a run started without a report asks the PSP first. A run that is running
 * already (another request restarted it) is left as it is.
 */
export async function restartDispute(client: Client, taskQueue: string, provider: string, providerDisputeId: string, times: DisputeTimes): Promise<void> {
  await client.workflow.start<DisputeWorkflow>('disputeWorkflow', {
    workflowId: disputeWorkflowId(provider, providerDisputeId),
    taskQueue,
    args: [disputeInput(provider, providerDisputeId, times)],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    staticSummary: `dispute ${providerDisputeId} at ${provider}, started again`,
  });
}
