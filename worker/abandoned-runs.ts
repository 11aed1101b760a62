import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import { settleAbandonedRun, unfinishedRecords } from '../db/abandoned';
import type { Logger } from '../lib/logger';
import type { PaymentProvider } from '../provider/types';

/**
 * Finds operations whose run ended without recording an outcome (failed, terminated, timed
 * out, or never started and long since given up) and settles each with one stable answer
 * (db/abandoned.ts), so no idempotency record stays `running` for good, whether or not the
 * client ever retries. The API does the same when a retry finds such a run first; the
 * first recording wins either way. Run by abandonedRunSweepWorkflow on its Temporal Schedule
 * (worker/schedules.ts), never by a timer in the process.
 */
export class AbandonedRunSweeper {
  constructor(
    private readonly deps: { sql: Sql; temporal: Client; provider: PaymentProvider; logger: Logger; retentionSeconds: number },
    /** A run younger than this may still be starting: left alone. */
    private readonly minAgeSeconds = 60,
  ) {}

  /** Settles what it finds (at most `limit` records looked at); returns how many were settled. */
  async runOnce(limit = 200, minAgeSeconds = this.minAgeSeconds): Promise<number> {
    const { sql, temporal, logger, retentionSeconds } = this.deps;
    let settled = 0;
    for (const record of await unfinishedRecords(sql, minAgeSeconds, limit)) {
      let status: string;
      try {
        status = (await temporal.workflow.getHandle(record.workflow_id).describe()).status.name;
      } catch (error) {
        if (!(error instanceof WorkflowNotFoundError)) throw error;
        status = 'NOT_FOUND';
      }
      // Running: its outcome will come. Completed: the run recorded it, or the client's retry
      // takes it from the run's result (the update of a capture/cancel answers from its own run).
      if (status === 'RUNNING' || status === 'COMPLETED') continue;
      const moneyMoved = record.resource_id.startsWith('pay_') ? await this.chargeExists(record.resource_id) : null;
      const { flagged } = await settleAbandonedRun(sql, record, status, retentionSeconds, moneyMoved);
      settled++;
      logger.error(
        { workflow_id: record.workflow_id, resource_id: record.resource_id, operation: record.operation, status, flagged },
        flagged ? 'run ended without an outcome; payment flagged for an operator' : 'run ended without an outcome; operation_failed recorded',
      );
    }
    return settled;
  }

  /** Whether the provider holds a live charge of the payment (its reference), or null if it cannot say. */
  private async chargeExists(paymentId: string): Promise<boolean | null> {
    try {
      const charges = await this.deps.provider.listChargesByReference(paymentId);
      return charges.some((charge) => charge.status === 'succeeded' || charge.status === 'requires_capture');
    } catch (error) {
      this.deps.logger.warn({ err: error, payment_id: paymentId }, 'provider lookup failed; the payment will be flagged');
      return null;
    }
  }
}
