/**
 * The periodic jobs (docs/CONTRACT.md, "Periodic jobs"): their results and failure types,
 * and the schedule ids; reconciliation's own definitions are shared/reconciliation.ts. Imported by workflow code (no Node, no I/O,
 * no clock: times come in as arguments) and by the worker, `npm run schedules` and the API.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Failure types of the periodic jobs (ApplicationFailure.type): one closed set. */
export const JobFailureType = {
  /** A job step that retrying cannot fix: a provider this worker has no client for, no Temporal client. */
  Misconfigured: 'JobMisconfigured',
  /** The reconciliation window asked for is empty or malformed. */
  InvalidWindow: 'InvalidReconciliationWindow',
  /** At least one provider's reconciliation failed for good (its run is recorded as failed). */
  ReconciliationFailed: 'ReconciliationFailed',
} as const;

/** Result of retentionWorkflow. */
export interface RetentionResult {
  deleted: number;
}

/** Result of abandonedRunSweepWorkflow. */
export interface SweepResult {
  /**
   * How many operations were answered, waits ended or dispute runs started again. The name is
   * the recorded result's and is kept (docs/ARCHITECTURE.md, Glossary): it means "dealt with".
   */
  settled: number;
}

/**
 * Set by the Temporal server on every run a Schedule starts: the time the action was scheduled
 * for (for a backfill, the backfilled time, not now). The reconciliation's window is relative
 * to it, so a backfill of a past day reconciles that day's window.
 */
export const TemporalScheduledStartTimeKey = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** The periodic jobs, each one Schedule per deployment (its task queue). */
export const periodicJobs = ['reconciliation-daily', 'reconciliation-hourly', 'retention', 'abandoned-runs'] as const;
export type PeriodicJob = (typeof periodicJobs)[number];

/**
 * The Schedule id of a job. Schedules are per namespace; the task queue names the
 * deployment, so two deployments (or two test stacks) on one namespace never share one.
 */
export function scheduleId(taskQueue: string, job: PeriodicJob): string {
  return `${taskQueue}.${job}`;
}
