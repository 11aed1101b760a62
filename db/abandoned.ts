import { errorResponse } from '../domain/errors';
import { waitingStatuses, type PaymentStatus } from '../domain/payments';
import { paymentResource, type PaymentRow } from '../domain/resources';
import type { FinalResponse } from '../shared/definitions';
import { CREATE_PAYMENT_OPERATION } from '../shared/payments';
import { businessEventKey } from '../shared/keys';
import { constantLiterals, type Db, type Sql } from './connect';
import { completeRecord, type IdempotencyRecord } from './idempotency-records';
import { insertEvent } from './outbox';
import { transitionPayment } from './payments';

/**
 * What an operation acts on, said by whoever knows it (the workflow type of its run, or the
 * route that started it), never guessed from an id's prefix. null: no run ever existed, so
 * nothing was reserved or charged under it.
 */
export type OperationKind = 'payment' | 'refund' | null;

/** The kind of resource each workflow type's operations act on. */
export const operationKindOfWorkflow: Record<string, Exclude<OperationKind, null>> = {
  paymentWorkflow: 'payment',
  refundWorkflow: 'refund',
};

/**
 * The kind of an operation whose run was never found: a payment's create persists the intent
 * with its claim (the API), so a claim whose run never started leaves a payment row to answer for.
 */
export const operationKindOfOperation: Record<string, Exclude<OperationKind, null>> = {
  [CREATE_PAYMENT_OPERATION]: 'payment',
};

/** Unfinished operations older than `minAgeSeconds`, oldest first: candidates for a closed run. */
export async function unfinishedRecords(db: Db, minAgeSeconds: number, limit: number): Promise<IdempotencyRecord[]> {
  return db<IdempotencyRecord[]>`
    SELECT * FROM idempotency_records
    WHERE state = 'running' AND created_at < now() - make_interval(secs => ${minAgeSeconds})
    ORDER BY created_at
    LIMIT ${limit}`;
}

/**
 * Answers an operation whose run ended without recording an outcome (the workflow failed, was
 * terminated or timed out): one stable answer under its key, 500 `operation_failed`, which
 * every retry replays byte for byte, and the payment says what happened. A payment still
 * `processing` of which the provider holds no charge (`moneyMoved` answered false) becomes
 * `failed` and frees its order. One that may hold money (a charge at the provider, an
 * authorization, or nobody could ask: `moneyMoved` null) keeps its status, so its order stays
 * taken, and is flagged `needs_operator`: the run that would have booked or given the money
 * back is gone, and only a person can decide what it should have done. A refund still
 * `pending` is flagged the same way (the provider may have sent it; its amount stays reserved).
 */
export async function answerAbandonedRun(
  sql: Sql,
  record: Pick<IdempotencyRecord, 'tenant_id' | 'operation' | 'idempotency_key' | 'fingerprint' | 'workflow_id' | 'resource_id'>,
  run: { kind: OperationKind; status: string },
  retentionSeconds: number,
  moneyMoved: boolean | null,
): Promise<{ response: FinalResponse; flagged: boolean }> {
  const runStatus = run.status;
  return sql.begin(async (tx) => {
    let flagged = false;
    let note = '';
    if (run.kind === 'payment') {
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
    if (run.kind === 'refund') {
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

/** A payment in a waiting status (domain/payments.ts), as the sweep that ends its wait needs it. */
export type WaitingPayment = Pick<PaymentRow, 'id' | 'tenant_id' | 'status' | 'workflow_id' | 'provider_charge_id' | 'provider'>;

/**
 * Payments that wait (every non-final status of the lifecycle table) and have not changed
 * for `minAgeSeconds`, oldest first, not yet flagged: candidates for a run that closed while
 * they waited (terminated from the Web UI or the CLI, or failed).
 */
export async function waitingPayments(db: Db, minAgeSeconds: number, limit: number, statuses: readonly PaymentStatus[] = waitingStatuses): Promise<WaitingPayment[]> {
  return db<WaitingPayment[]>`
    SELECT id, tenant_id, status, workflow_id, provider_charge_id, provider FROM payments
    WHERE status IN (${constantLiterals(db, waitingStatuses)}) AND status = ANY(${[...statuses]}) AND failure_code IS DISTINCT FROM 'needs_operator'
      AND updated_at < now() - make_interval(secs => ${minAgeSeconds})
    ORDER BY updated_at
    LIMIT ${limit}`;
}

/** What the PSP holds for a payment whose run closed while it waited, and what the sweep did there. */
export interface HeldAtProvider {
  /** The charge as the PSP holds it now (after the void, if one was made); null if it holds none; undefined if it could not be asked. */
  charge?: { id: string; status: string } | null;
  /** The sweep voided the authorization (safe: nothing was captured, and no run is left to capture it). */
  voided: boolean;
}

/**
 * Ends the wait of a payment whose run closed while it waited: it is flagged `needs_operator` with what
 * the PSP holds, in one transaction. If its authorization was voided, the payment is
 * `canceled` (an allowed move from every status that can be voided) with the merchant's
 * `payment.canceled` event, under the same event key a cancel by its run would have used;
 * otherwise it keeps its status (the PSP may have captured, or could not be asked) and its
 * order stays taken until a person decides. Returns the payment as it is now, or null if it
 * moved meanwhile (its run was not closed after all, or another sweep came first).
 */
export async function endWaitOfClosedRun(sql: Sql, payment: WaitingPayment, runStatus: string, held: HeldAtProvider): Promise<PaymentRow | null> {
  const pspSays =
    held.charge === undefined
      ? 'the PSP could not be asked'
      : held.charge === null
        ? 'the PSP holds no charge for it'
        : `the PSP holds charge ${held.charge.id} as ${held.charge.status}${held.voided ? ' (the authorization was voided by the sweep: no money was captured)' : ''}`;
  const failure = {
    code: 'needs_operator',
    message: `The payment's run ended (${runStatus}) while it was ${payment.status}; ${pspSays}. An operator must reconcile it.`,
  };
  return sql.begin(async (tx) => {
    if (held.voided) {
      const canceled = await transitionPayment(tx, payment.id, { status: 'canceled', failure });
      if (canceled) {
        await insertEvent(tx, { tenantId: canceled.tenant_id, type: 'payment.canceled', eventKey: businessEventKey.paymentEvent(canceled.id, 'payment.canceled'), object: paymentResource(canceled) });
        return canceled;
      }
    }
    const [flagged] = await tx<PaymentRow[]>`
      UPDATE payments SET failure_code = ${failure.code}, failure_message = ${failure.message}, updated_at = now()
      WHERE id = ${payment.id} AND status = ${payment.status} AND failure_code IS DISTINCT FROM 'needs_operator'
      RETURNING *`;
    return flagged ?? null;
  }) as Promise<PaymentRow | null>;
}
