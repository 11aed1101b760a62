/**
 * The periodic jobs, each run by a Temporal Schedule (worker/schedules.ts): visible in the
 * Web UI's Schedules page, one run at a time (overlap SKIP), paused, triggered and
 * backfilled with `temporal schedule …` (docs/operating.md, "Periodic jobs"). The workflows are thin:
 * each job's pass is one activity (activities/jobs.ts). Reconciliation, the first of them, is
 * workflows/reconciliation.ts.
 */
import type { RetentionResult, SweepResult } from '../shared/jobs';
import { jobs } from './activities';

/** Deletes the idempotency records whose retention has passed. */
export async function retentionWorkflow(): Promise<RetentionResult> {
  return { deleted: await jobs.deleteExpiredIdempotencyRecords() };
}

/** Answers the operations whose workflow run ended without recording an outcome (its result's `settled`: a recorded name, kept). */
export async function abandonedRunSweepWorkflow(): Promise<SweepResult> {
  return { settled: await jobs.sweepAbandonedRuns() };
}
