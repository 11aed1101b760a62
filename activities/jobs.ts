import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import { failRun } from '../db/reconciliation';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import { ProviderRejectedError, ProviderReportUnreadableError, type PaymentProvider, type ProviderDispute } from '../provider/types';
import { JobFailureType } from '../shared/jobs';
import type { ReconcileProviderInput, ReconciliationRunSummary } from '../shared/reconciliation';
import type { LateChargeInput } from '../shared/payments';
import { startLateChargeWorkflow } from '../lib/late-charge';
import { disputeTimesOf, reportDispute, restartDispute, type DisputeTimes } from '../lib/dispute';
import { AbandonedRunSweeper } from './abandoned-runs';
import { Reconciliation, UnknownProviderError } from './reconciliation';
import { RetentionJob } from './retention';

/** What the periodic jobs' activities need beyond the payment steps' dependencies. */
export interface JobDeps {
  sql: Sql;
  /** The PSP clients by configured name (PROVIDERS, the default first: provider/registry.ts). */
  providers: Record<string, PaymentProvider>;
  metrics?: WorkerMetrics;
  logger: Logger;
  /** The abandoned-run sweeper asks Temporal how each run ended. */
  temporal?: Client;
  /** How long an idempotency key's outcome is kept (the sweeper's answers keep it as long). */
  retentionSeconds: number;
  /** The settings of dispute workflows reconciliation starts (DISPUTE_REMINDER_SECONDS, DISPUTE_POLL_SECONDS); their defaults when omitted. */
  disputeTimes?: DisputeTimes;
}

/**
 * The periodic jobs' activities (workflows/jobs.ts): each is the job's whole pass, as the
 * timers of old ran it. Their names are the activity types histories record: never rename one.
 */
export function createJobSteps(deps: JobDeps) {
  const reconciliation = new Reconciliation(deps);
  const disputeTimes = deps.disputeTimes ?? disputeTimesOf({});
  return {
    /** One provider's reconciliation of one window (activities/reconciliation.ts); heartbeats per report page. */
    async reconcileProviderWindow(input: ReconcileProviderInput): Promise<ReconciliationRunSummary> {
      const context = Context.current();
      // A late success whose webhook was lost is given back by the late-charge workflow, on this worker's task queue.
      const temporal = deps.temporal;
      const giveBack = temporal ? (late: LateChargeInput) => startLateChargeWorkflow(temporal, context.info.taskQueue, late) : undefined;
      // A dispute whose webhook was lost is started as the webhook would have started it.
      const startDispute = temporal
        ? (dispute: ProviderDispute) => reportDispute(temporal, context.info.taskQueue, input.provider, { source: 'reconciliation', eventId: null, dispute }, disputeTimes)
        : undefined;
      try {
        return await reconciliation.run(input, (details) => context.heartbeat(details), giveBack, startDispute);
      } catch (error) {
        if (error instanceof UnknownProviderError) throw ApplicationFailure.nonRetryable(error.message, JobFailureType.Misconfigured);
        // A report that cannot be read, or a download the PSP refuses (credentials, role): the
        // same read again cannot help, so the run fails now, for an operator.
        if (error instanceof ProviderReportUnreadableError || error instanceof ProviderRejectedError) throw ApplicationFailure.nonRetryable(error.message, error.name);
        throw error;
      }
    },

    /** Marks the run failed once its activity has given up, with the last error. */
    async recordReconciliationFailure(input: ReconcileProviderInput & { error: string }): Promise<ReconciliationRunSummary> {
      const run = await failRun(deps.sql, input, input.error);
      deps.metrics?.reconciliationRuns.inc({ provider: input.provider, status: 'failed' });
      deps.logger.error({ alert: 'reconciliation_failed', provider: input.provider, run_id: run.id, window: input.window, error: input.error }, 'reconciliation run failed');
      return { runId: run.id, provider: input.provider, window: input.window, status: 'failed', discrepancyCount: 0, newDiscrepancyCount: 0 };
    },

    /** Deletes the idempotency records whose retention has passed (activities/retention.ts); returns how many. */
    async deleteExpiredIdempotencyRecords(): Promise<number> {
      return new RetentionJob(deps.sql, deps.logger).runOnce();
    },

    /** Answers the operations whose run ended without an outcome, and ends the wait of payments whose run closed (activities/abandoned-runs.ts); returns how many. */
    async sweepAbandonedRuns(): Promise<number> {
      if (!deps.temporal) throw ApplicationFailure.nonRetryable('this worker has no Temporal client for the abandoned-run sweep', JobFailureType.Misconfigured);
      const provider = Object.values(deps.providers)[0];
      if (!provider) throw ApplicationFailure.nonRetryable('this worker has no provider configured', JobFailureType.Misconfigured);
      const { temporal } = deps;
      const { taskQueue } = Context.current().info;
      return new AbandonedRunSweeper({
        sql: deps.sql,
        temporal,
        provider,
        providers: deps.providers,
        logger: deps.logger,
        retentionSeconds: deps.retentionSeconds,
        // A dispute's run that ended while the dispute was open starts again on this worker's task queue.
        restartDispute: (dispute) => restartDispute(temporal, taskQueue, dispute.provider, dispute.providerDisputeId, disputeTimes),
      }).runOnce();
    },
  };
}

export type JobSteps = ReturnType<typeof createJobSteps>;
