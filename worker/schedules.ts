import type { Duration } from '@temporalio/common';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions, type ScheduleOptionsStartWorkflowAction, type ScheduleSpec } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import { reconciledProviderNames } from '../provider/registry';
import { periodicJobs, scheduleId, type PeriodicJob } from '../shared/jobs';
import type { ReconciliationInput } from '../shared/reconciliation';

/** The knobs of the periodic jobs (lib/config.ts; docs/operating.md, "Periodic jobs"). */
export interface ScheduleSettings {
  taskQueue: string;
  /** The providers reconciliation covers, by configured name: those whose kind has a balance report. */
  providers: string[];
  /** The hourly reconciliation covers this many whole hours before the current one. */
  reconciliationLookbackHours: number;
  retentionIntervalSeconds: number;
  abandonedRunsIntervalSeconds: number;
}

/** The settings from the environment (the worker process and `npm run schedules` read the same). */
export function scheduleSettings(config: Pick<Config, 'TASK_QUEUE' | 'PROVIDERS' | 'RECONCILIATION_LOOKBACK_HOURS' | 'RETENTION_JOB_INTERVAL_SECONDS'>): ScheduleSettings {
  return {
    taskQueue: config.TASK_QUEUE,
    providers: reconciledProviderNames(config),
    reconciliationLookbackHours: config.RECONCILIATION_LOOKBACK_HOURS,
    retentionIntervalSeconds: config.RETENTION_JOB_INTERVAL_SECONDS,
    abandonedRunsIntervalSeconds: config.RETENTION_JOB_INTERVAL_SECONDS,
  };
}

/** One Schedule as this code wants it. */
export interface DesiredSchedule {
  job: PeriodicJob;
  scheduleId: string;
  description: string;
  spec: ScheduleSpec;
  action: ScheduleOptionsStartWorkflowAction<never>;
  /** Missed actions younger than this are still taken when the server comes back (older: backfill them). */
  catchupWindow: Duration;
}

/**
 * Every periodic job's Schedule. One action at a time (overlap SKIP: a run still going when
 * the next is due makes that next one skipped, not queued or doubled); the run's workflow id
 * is the schedule id plus the scheduled time (Temporal appends it), so one scheduled time
 * starts one run however many workers there are.
 */
export function desiredSchedules(settings: ScheduleSettings): DesiredSchedule[] {
  const action = (workflowType: string, args: unknown[], job: PeriodicJob): ScheduleOptionsStartWorkflowAction<never> =>
    ({ type: 'startWorkflow', workflowType, args, taskQueue: settings.taskQueue, workflowId: scheduleId(settings.taskQueue, job) }) as never;
  const daily: ReconciliationInput = { providers: settings.providers, window: { kind: 'previous_day' } };
  const hourly: ReconciliationInput = { providers: settings.providers, window: { kind: 'trailing_hours', hours: settings.reconciliationLookbackHours } };
  const schedules: Record<PeriodicJob, Omit<DesiredSchedule, 'job' | 'scheduleId'>> = {
    'reconciliation-daily': {
      description: "Reconciles the previous UTC day with each PSP's balance-transaction report.",
      // 00:30 UTC: late balance transactions of the day before have landed by then.
      spec: { calendars: [{ hour: 0, minute: 30 }] },
      action: action('reconciliationWorkflow', [daily], 'reconciliation-daily'),
      catchupWindow: '1 day',
    },
    'reconciliation-hourly': {
      description: `Reconciles the last ${settings.reconciliationLookbackHours} whole hours with each PSP's report.`,
      // At :10, once the hour's balance transactions are in the report.
      spec: { intervals: [{ every: '1 hour', offset: '10 minutes' }] },
      action: action('reconciliationWorkflow', [hourly], 'reconciliation-hourly'),
      catchupWindow: '1 hour',
    },
    retention: {
      description: 'Deletes idempotency records whose retention has passed.',
      spec: { intervals: [{ every: `${settings.retentionIntervalSeconds} seconds` }] },
      action: action('retentionWorkflow', [], 'retention'),
      catchupWindow: '10 minutes',
    },
    'abandoned-runs': {
      description: 'Answers operations whose workflow run ended without recording an outcome.',
      spec: { intervals: [{ every: `${settings.abandonedRunsIntervalSeconds} seconds` }] },
      action: action('abandonedRunSweepWorkflow', [], 'abandoned-runs'),
      catchupWindow: '10 minutes',
    },
  };
  return periodicJobs.map((job) => ({ job, scheduleId: scheduleId(settings.taskQueue, job), ...schedules[job] }));
}

export type ScheduleOutcome = 'created' | 'updated';

/**
 * Creates each Schedule, or updates it to what this code wants if it exists. Idempotent and
 * safe when several workers start at once: one create wins, the others find it and update
 * it to the same definition. An update keeps the Schedule's state: a Schedule an operator
 * paused stays paused across deploys and restarts.
 */
export async function ensureSchedules(client: Client, settings: ScheduleSettings, logger?: Logger): Promise<Record<string, ScheduleOutcome>> {
  const outcomes: Record<string, ScheduleOutcome> = {};
  for (const desired of desiredSchedules(settings)) {
    const options: ScheduleOptions<ScheduleOptionsStartWorkflowAction<never>> = {
      scheduleId: desired.scheduleId,
      spec: desired.spec,
      action: desired.action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: desired.catchupWindow, pauseOnFailure: false },
      memo: { description: desired.description },
      state: { note: desired.description },
    };
    try {
      await client.schedule.create(options);
      outcomes[desired.scheduleId] = 'created';
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      await client.schedule.getHandle(desired.scheduleId).update((previous) => ({
        ...previous,
        spec: desired.spec,
        action: desired.action,
        policies: { ...previous.policies, overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: desired.catchupWindow },
      }));
      outcomes[desired.scheduleId] = 'updated';
    }
  }
  logger?.info({ schedules: outcomes }, 'periodic job schedules in place');
  return outcomes;
}

/** Deletes this deployment's Schedules (a test stack's, when it stops); absent ones are skipped. */
export async function deleteSchedules(client: Client, taskQueue: string): Promise<void> {
  for (const job of periodicJobs) {
    await client.schedule
      .getHandle(scheduleId(taskQueue, job))
      .delete()
      .catch(() => {});
  }
}
