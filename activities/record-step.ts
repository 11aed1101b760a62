import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { Db, Sql } from '../db/connect';
import { isLedgerRefusal } from '../db/ledger';
import type { WorkerMetrics } from '../lib/metrics';
import { FailureType, type FinalResponse } from '../shared/definitions';
import { killPoint } from '../lib/kill-points';

/**
 * What the database steps of the workflows (payments.ts, refunds.ts, disputes.ts) share.
 * Each step is one PostgreSQL transaction that records a business fact together with everything that follows from it: the payment's new state,
 * its ledger transaction, its outbox event and the operation's final response. Replaying
 * a step is a no-op: every write is guarded by a state transition or a unique constraint,
 * and the stored response is returned unchanged.
 */

export function workflowId(): string {
  return Context.current().info.workflowExecution!.workflowId;
}

/** Runs one step's transaction; a ledger refusal becomes a non-retryable LedgerRejected. */
export async function step<T>(sql: Sql, work: (tx: Db) => Promise<T>): Promise<T> {
  try {
    const result = (await sql.begin(work)) as T;
    killPoint('after-record-commit');
    return result;
  } catch (error) {
    if (isLedgerRefusal(error)) {
      throw ApplicationFailure.create({ type: FailureType.LedgerRejected, message: (error as Error).message, nonRetryable: true });
    }
    throw error;
  }
}

/** One log line and one count per recorded outcome (a replayed step may count twice; the data never does). */
export function outcomeRecorder(metrics?: WorkerMetrics) {
  return (kind: 'payment' | 'refund', id: string, status: string, response: FinalResponse): FinalResponse => {
    (kind === 'payment' ? metrics?.paymentOutcomes : metrics?.refundOutcomes)?.inc({ status });
    log.info(`${kind} ${status}`, { [`${kind}_id`]: id, status, http_status: response.status });
    return response;
  };
}
