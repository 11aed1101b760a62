/**
 * Reconciliation with the PSPs, a periodic job (workflows/jobs.ts): run hourly and daily by its
 * Schedules (worker/schedules.ts), or once by an operator's trigger; its pass per PSP is one
 * activity (activities/jobs.ts, over activities/reconciliation.ts).
 */
import { ActivityFailure, ApplicationFailure, workflowInfo } from '@temporalio/workflow';
import { JobFailureType, TemporalScheduledStartTimeKey } from '../shared/jobs';
import { reconciliationWindow, type ReconciliationInput, type ReconciliationResult, type ReconciliationRunSummary, type TimeWindow } from '../shared/reconciliation';
import { jobs } from './activities';

/**
 * Reconciles each provider over one window: the one the Schedule's time calls for (the
 * previous day, or the last hours), so a backfill of a past time reconciles the window of
 * that time. One provider failing does not stop the others; the run fails at the end if
 * any did (red in the Web UI), with every provider's run recorded.
 */
export async function reconciliationWorkflow(input: ReconciliationInput): Promise<ReconciliationResult> {
  const info = workflowInfo();
  const scheduledAt = info.typedSearchAttributes.get(TemporalScheduledStartTimeKey) ?? info.startTime;
  let window: TimeWindow;
  try {
    window = reconciliationWindow(input.window, scheduledAt);
  } catch (error) {
    // A plain error would fail the workflow task and retry it forever.
    throw ApplicationFailure.nonRetryable((error as Error).message, JobFailureType.InvalidWindow);
  }
  const runs: ReconciliationRunSummary[] = [];
  for (const provider of input.providers) {
    const step = { provider, window, runKey: `${info.workflowId}/${info.runId}/${provider}`, workflowId: info.workflowId };
    try {
      runs.push(await jobs.reconcileProviderWindow(step));
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      runs.push(await jobs.recordReconciliationFailure({ ...step, error: error.cause?.message ?? error.message }));
    }
  }
  const failed = runs.filter((r) => r.status === 'failed').map((r) => r.provider);
  if (failed.length > 0) throw ApplicationFailure.nonRetryable(`reconciliation failed for ${failed.join(', ')} (window ${window.from} to ${window.to})`, JobFailureType.ReconciliationFailed);
  return { window, runs };
}
