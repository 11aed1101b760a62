import { errorResponse } from '../domain/errors';
import type { FinalResponse } from '../shared/definitions';
import type { Sql } from './connect';
import type { Db } from './connect';
import { completeRecord, type IdempotencyRecord } from './idempotency-records';

/** Unfinished operations older than `minAgeSeconds`, oldest first: candidates for a closed run. */
export async function unfinishedRecords(db: Db, minAgeSeconds: number, limit: number): Promise<IdempotencyRecord[]> {
  return db<IdempotencyRecord[]>`
    SELECT * FROM idempotency_records
    WHERE state = 'running' AND created_at < now() - make_interval(secs => ${minAgeSeconds})
    ORDER BY created_at
    LIMIT ${limit}`;
}

/**
 * Settles an operation whose run ended without recording an outcome (the workflow failed, was
 * terminated or timed out): one stable answer under its key, 500 `operation_failed`, which
 * every retry replays byte for byte, and the payment says what happened. A payment still
 * `processing` of which the provider holds no charge (`moneyMoved` answered false) becomes
 * `failed` and frees its order. One that may hold money (a charge at the provider, an
 * authorization, or nobody could ask: `moneyMoved` null) keeps its status, so its order stays
 * taken, and is flagged `needs_operator`: the run that would have booked or given the money
 * back is gone, and only a person can decide what it should have done. A refund still
 * `pending` is flagged the same way (the provider may have sent it; its amount stays reserved).
 */
export async function settleAbandonedRun(
  sql: Sql,
  record: Pick<IdempotencyRecord, 'tenant_id' | 'operation' | 'idempotency_key' | 'fingerprint' | 'workflow_id' | 'resource_id'>,
  runStatus: string,
  retentionSeconds: number,
  moneyMoved: boolean | null,
): Promise<{ response: FinalResponse; flagged: boolean }> {
  return sql.begin(async (tx) => {
    let flagged = false;
    let note = '';
    if (record.resource_id.startsWith('pay_')) {
      const reason = `The payment's run ended without an outcome (${runStatus}).`;
      const [failed] =
        moneyMoved === false
          ? await tx<{ id: string }[]>`
              UPDATE payments SET status = 'failed', failure_code = 'run_ended', failure_message = ${reason}, updated_at = now()
              WHERE id = ${record.resource_id} AND status = 'processing' AND provider_charge_id IS NULL
              RETURNING id`
          : [];
      const [held] = failed
        ? []
        : await tx<{ id: string }[]>`
            UPDATE payments SET failure_code = 'needs_operator',
              failure_message = ${`${reason} Money may have moved: an operator must reconcile it with the provider.`}, updated_at = now()
            WHERE id = ${record.resource_id} AND status IN ('processing', 'requires_capture')
            RETURNING id`;
      flagged = held !== undefined;
      note = failed ? ` Payment ${record.resource_id} is failed; no money moved.` : held ? ` Payment ${record.resource_id} is flagged for an operator.` : '';
    }
    if (record.resource_id.startsWith('re_')) {
      // The provider may or may not have sent the refund; its amount stays reserved until a person decides.
      const [held] = await tx<{ id: string }[]>`
        UPDATE refunds SET failure_code = 'needs_operator',
          failure_message = ${`The refund's run ended without an outcome (${runStatus}); the provider may have sent it: an operator must reconcile it.`},
          updated_at = now()
        WHERE id = ${record.resource_id} AND status = 'pending'
        RETURNING id`;
      flagged = held !== undefined;
      note = held ? ` Refund ${record.resource_id} is flagged for an operator.` : '';
    }
    const response = errorResponse(
      'operation_failed',
      `The operation ended without an outcome (its workflow ${runStatus.toLowerCase()}); it will not run again under this key.${note}`,
      { resource_id: record.resource_id },
    );
    const stored = await completeRecord(
      tx,
      { tenantId: record.tenant_id, operation: record.operation, key: record.idempotency_key, fingerprint: record.fingerprint, retentionSeconds },
      { workflowId: record.workflow_id, resourceId: record.resource_id },
      response,
    );
    return { response: stored, flagged };
  }) as Promise<{ response: FinalResponse; flagged: boolean }>;
}
