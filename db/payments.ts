import type postgres from 'postgres';
import type { Db } from './connect';
import { activeTraceparent } from '../lib/tracing';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';
import { paymentResource, type PaymentRow } from '../domain/resources';
import { insertEvent } from './outbox';
import { businessEventKey } from '../shared/keys';
import type { ScopedKey } from '../shared/definitions';
import type { CaptureMethod, PaymentStatus, PaymentWorkflowInput } from '../shared/payments';
import { claimExpiry, type IdempotencyRecord } from './idempotency-records';
import type { AttemptRow } from './payments-attempts';
import { fromStatuses, orderHoldingStatuses, waitingStatuses } from '../domain/payments';

/** The statuses that hold an order: a second payment for it is refused (payments_one_live_per_order). */
export const liveStatuses: PaymentStatus[] = orderHoldingStatuses;
/** The statuses a payment waits in: its run is expected to be open (domain/payments.ts). */
export { waitingStatuses };

/**
 * The one INSERT of a payment's intent (status processing), with its rows taken `from` the
 * statement's source (the key's claim in claimPaymentIntent; none in ensureIntent). ON CONFLICT
 * DO NOTHING covers the id only when `conflict` says so; the partial unique index refuses a
 * second live payment for the order (payments_one_live_per_order) whatever the key.
 */
function insertIntent(db: Db, input: PaymentWorkflowInput, workflowId: string, from: postgres.PendingQuery<postgres.Row[]>, conflict: postgres.PendingQuery<postgres.Row[]>) {
  return db`
    INSERT INTO payments
      (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method,
       description, metadata, workflow_id, return_url, customer_id, setup_future_usage, off_session, traceparent)
    SELECT ${input.paymentId}, ${input.tenantId}, ${input.orderId}, ${input.amountMinor}, ${input.currency},
      'processing', ${input.captureMethod}, ${input.paymentMethod}, ${input.description},
      ${db.json(input.metadata)}, ${workflowId}, ${input.returnUrl ?? null}, ${input.customerId ?? null},
      ${input.setupFutureUsage ?? null}, ${input.offSession === true}, ${activeTraceparent()}
    ${from}
    ON CONFLICT ${conflict} DO NOTHING`;
}

/**
 * The claim of a new payment's idempotency key and the payment's intent, in one statement (so
 * one round trip and one commit): the intent row exists exactly when the claim was made here.
 * Returns null when another request holds the key. `intent: false`: the key is claimed but the
 * order guard refused the intent (another live or paid payment holds the order); the caller
 * records the 409 as the key's answer. The workflow then starts at the charge.
 */
export async function claimPaymentIntent(
  db: Db,
  claim: { scope: ScopedKey; workflowId: string; requestHash?: string | null },
  input: PaymentWorkflowInput,
): Promise<{ record: IdempotencyRecord; intent: boolean } | null> {
  const { scope, workflowId } = claim;
  const [row] = await db<(IdempotencyRecord & { intent: boolean })[]>`
    WITH claim AS (
      INSERT INTO idempotency_records
        (tenant_id, operation, idempotency_key, fingerprint, request_hash, state, workflow_id, resource_id, expires_at, traceparent)
      VALUES
        (${scope.tenantId}, ${scope.operation}, ${scope.key}, ${scope.fingerprint}, ${claim.requestHash ?? null}, 'running',
         ${workflowId}, ${input.paymentId}, ${claimExpiry(db, scope.retentionSeconds)}, ${activeTraceparent()})
      ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
      RETURNING *
    ), intent AS (
      ${insertIntent(db, input, workflowId, db`FROM claim`, db``)}
      RETURNING id
    )
    SELECT claim.*, EXISTS (SELECT 1 FROM intent) AS intent FROM claim`;
  if (!row) return null;
  const { intent, ...record } = row;
  return { record, intent };
}

/** Another payment took the order while this one's intent was given back (ensureIntent). */
export class OrderTakenError extends Error {
  override readonly name = 'OrderTakenError';
}

/**
 * Persists the intent again if it is missing, in one statement (a no-op when it exists, as it
 * always should: the API keeps a claim's intent when its start fails, and payments are never
 * deleted); a run whose row is missing all the same gets it back here rather than failing. The run's first charge attempt
 * calls this when it finds no row (activities/routing.ts).
 */
export async function ensureIntent(db: Db, input: PaymentWorkflowInput, workflowId: string): Promise<void> {
  try {
    await insertIntent(db, input, workflowId, db``, db`(id)`);
  } catch (error) {
    // unique_violation of the order guard's index (not the id's: that conflict is DO NOTHING)
    if ((error as { code?: string }).code === '23505') throw new OrderTakenError(`order ${input.orderId} was taken by another payment while this one's start was in doubt`);
    throw error;
  }
}

/** The live or paid payment that holds an order (the order guard's 409 names it). */
export async function orderHolder(db: Db, tenantId: string, orderId: string): Promise<{ id: string; workflow_id: string } | null> {
  const [holder] = await db<{ id: string; workflow_id: string }[]>`
    SELECT id, workflow_id FROM payments WHERE tenant_id = ${tenantId} AND order_id = ${orderId} AND status IN ${db(liveStatuses)}`;
  return holder ?? null;
}

export async function getPayment(db: Db, tenantId: string, paymentId: string): Promise<PaymentRow | null> {
  const [payment] = await db<PaymentRow[]>`SELECT * FROM payments WHERE id = ${paymentId} AND tenant_id = ${tenantId}`;
  return payment ?? null;
}

/** The tenant's payment with its charge attempts, first first, in one read (GET /v1/payments/{id}). */
export async function getPaymentWithAttempts(db: Db, tenantId: string, paymentId: string): Promise<{ payment: PaymentRow; attempts: AttemptRow[] } | null> {
  type Stored = Omit<AttemptRow, 'started_at' | 'finished_at'> & { started_at: string; finished_at: string | null };
  const [row] = await db<(PaymentRow & { attempts: Stored[] })[]>`
    SELECT p.*, COALESCE((SELECT json_agg(a ORDER BY a.attempt) FROM payment_attempts a WHERE a.payment_id = p.id), '[]'::json) AS attempts
    FROM payments p WHERE p.id = ${paymentId} AND p.tenant_id = ${tenantId}`;
  if (!row) return null;
  const { attempts, ...payment } = row;
  return {
    payment: payment as PaymentRow,
    attempts: attempts.map((a) => ({ ...a, started_at: new Date(a.started_at), finished_at: a.finished_at === null ? null : new Date(a.finished_at) })),
  };
}

/** The payment's status, without tenant scope (the caller holds the payment's own record). */
export async function paymentStatus(db: Db, paymentId: string): Promise<PaymentStatus | null> {
  const [row] = await db<{ status: PaymentStatus }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
  return row?.status ?? null;
}

/** The figures a PSP's charge must agree with (what the payment asked for), and what its run recorded of the charge. */
export interface PaymentFigures {
  amount_minor: number;
  currency: string;
  capture_method: CaptureMethod;
  /** What the payment's run has recorded of its charge so far. */
  status: PaymentStatus;
  provider_charge_id: string | null;
  amount_captured_minor: number;
}

export async function paymentIntentFigures(db: Db, paymentId: string): Promise<PaymentFigures | null> {
  const [row] = await db<PaymentFigures[]>`
    SELECT amount_minor, currency, capture_method, status, provider_charge_id, amount_captured_minor FROM payments WHERE id = ${paymentId}`;
  return row ?? null;
}

/** The traceparent of the span that wrote the payment's intent (db/migrations/021; null: written untraced or unsampled). */
export async function paymentTraceparent(db: Db, paymentId: string): Promise<string | null> {
  const [row] = await db<{ traceparent: string | null }[]>`SELECT traceparent FROM payments WHERE id = ${paymentId}`;
  return row?.traceparent ?? null;
}

/**
 * Flags a waiting payment for an operator (failure.code `needs_operator`, as every payment only a
 * person can decide is): its status stays, so nothing is booked. True when this call flagged it.
 */
export async function flagWaitingPaymentForOperator(db: Db, paymentId: string, message: string): Promise<boolean> {
  const flagged = await db`
    UPDATE payments SET failure_code = 'needs_operator', failure_message = ${message}, updated_at = now()
    WHERE id = ${paymentId} AND status = ANY(${[...waitingStatuses]}) AND failure_code IS DISTINCT FROM 'needs_operator'
    RETURNING id`;
  return flagged.length > 0;
}

/** The failures of a payment whose own run gave its captured charge back by a refund (a compensation). */
export const compensatedByRefund: readonly string[] = ['ledger_rejected', 'capture_failed', 'capture_unconfirmed'];

/**
 * A payment whose own run refunded its charge (a compensation: failed `ledger_rejected`,
 * `capture_failed` or `capture_unconfirmed`) and whose refund the PSP then refused by
 * notification (a notified refund's failure, after the run counted the refund given back on its
 * receipt): failed `compensation_failed`, `message` added to its failure's, as a compensation
 * refused in its answer is, and the merchant told again (`payment.failed`, once). The payment is the refund's
 * reference (the PSP's signed word), at that PSP, holding that charge or none (the ledger's
 * refusal left the charge unrecorded), as db/provider-events.ts paymentOfCharge matches one.
 * The payment as flagged; null when no such payment of ours, or it was flagged before. Run in a
 * transaction.
 */
export async function flagCompensationRefused(db: Db, input: { provider: string; paymentId: string; chargeId: string; message: string }): Promise<PaymentRow | null> {
  // Waits for a run recording the payment's failure (its step holds the row): the update then
  // reads the failure it committed. That step reads the stored refusal after taking the row, so
  // one of the two sees the other (activities/payments.ts recordPaymentFailure).
  await db`SELECT 1 FROM payments WHERE id = ${input.paymentId} FOR UPDATE`;
  const [row] = await db<PaymentRow[]>`
    UPDATE payments SET failure_code = 'compensation_failed', failure_message = concat_ws(' ', failure_message, ${input.message}::text), updated_at = now()
    WHERE id = ${input.paymentId} AND status = 'failed' AND failure_code = ANY(${[...compensatedByRefund]})
      AND provider = ${input.provider} AND (provider_charge_id IS NULL OR provider_charge_id = ${input.chargeId})
    RETURNING *`;
  if (!row) return null;
  await insertEvent(db, { tenantId: row.tenant_id, type: 'payment.failed', eventKey: businessEventKey.paymentEvent(row.id, 'payment.failed:compensation_failed'), object: paymentResource(row) });
  return row;
}

export async function markRefundedIfFullyRefunded(db: Db, paymentId: string): Promise<void> {
  await db`
    UPDATE payments p SET status = 'refunded', updated_at = now()
    WHERE p.id = ${paymentId} AND p.status = 'succeeded'
      AND p.amount_captured_minor = (SELECT coalesce(sum(amount_minor), 0) FROM refunds r
                                     WHERE r.payment_id = p.id AND r.status = 'succeeded')`;
}

/** Locks the payment row for the rest of the transaction (state transitions serialize on it). */
export async function lockPayment(db: Db, paymentId: string): Promise<PaymentRow> {
  const [payment] = await db<PaymentRow[]>`SELECT * FROM payments WHERE id = ${paymentId} FOR UPDATE`;
  if (!payment) throw new Error(`payment ${paymentId} not found`);
  return payment;
}

export interface PaymentChange {
  status: PaymentStatus;
  /** The PSP holding the charge (the attempt that made it); unchanged when absent. */
  provider?: string;
  providerChargeId?: string | null;
  amountCapturedMinor?: number;
  failure?: { code: string; message: string } | null;
  /** What the customer must do (requires_action); cleared on every other move. */
  nextAction?: NextAction | null;
}

/** The payment's next_action while it is requires_action (api/schemas.ts NextAction). */
export interface NextAction {
  type: 'redirect_to_url';
  redirect_to_url: { url: string; return_url: string | null };
}

/**
 * Moves a payment to `change.status` from one of the statuses the lifecycle table allows it to
 * come from (domain/payments.ts); returns null if it was in none of them (already
 * moved, or final: a final status is never left).
 */
export async function transitionPayment(db: Db, paymentId: string, change: PaymentChange): Promise<PaymentRow | null> {
  const from = fromStatuses(change.status);
  if (from.length === 0) return null;
  const [payment] = await db<PaymentRow[]>`
    UPDATE payments SET
      status = ${change.status},
      next_action = ${change.nextAction ? db.json(change.nextAction as never) : null},
      provider_charge_id = ${change.providerChargeId === undefined ? db`provider_charge_id` : change.providerChargeId || null}, -- '': not named by the PSP yet
      provider = ${change.provider ?? db`provider`},
      amount_captured_minor = ${change.amountCapturedMinor ?? db`amount_captured_minor`},
      failure_code = ${change.failure === undefined ? db`failure_code` : (change.failure?.code ?? null)},
      failure_message = ${change.failure === undefined ? db`failure_message` : (change.failure?.message ?? null)},
      updated_at = now()
    WHERE id = ${paymentId} AND status IN ${db(from)}
    RETURNING *`;
  return payment ?? null;
}

/** Newest first, paged by id (ids sort by creation time). */
export async function listPayments(db: Db, tenantId: string, query: PageQuery & { orderId?: string }): Promise<Page<PaymentRow>> {
  const rows = await db<PaymentRow[]>`
    SELECT * FROM payments
    WHERE tenant_id = ${tenantId}
      ${query.orderId !== undefined ? db`AND order_id = ${query.orderId}` : db``}
      ${keysetPage(db, 'id', query)}`;
  return toPage(rows, query);
}

/** What the return route (api/routes/payments-return.ts) reads of a payment: where it stands, its PSP, its run and where its customer goes next. */
export interface PaymentReturnRow {
  id: string;
  status: PaymentStatus;
  provider: string | null;
  workflow_id: string;
  return_url: string | null;
}

export async function paymentForReturn(db: Db, paymentId: string): Promise<PaymentReturnRow | null> {
  const [row] = await db<PaymentReturnRow[]>`SELECT id, status, provider, workflow_id, return_url FROM payments WHERE id = ${paymentId}`;
  return row ?? null;
}

/**
 * Takes one of the payment's details calls for a customer's return from its challenge, if it has
 * one left: one statement that adds one to the payment's count only while it is below `max`
 * (migrations/024), so concurrent returns cannot take more than `max` between them. True: taken.
 */
export async function takeChallengeReturnCall(db: Db, paymentId: string, max: number): Promise<boolean> {
  const taken = await db`
    INSERT INTO challenge_return_calls (payment_id, calls) VALUES (${paymentId}, 1)
    ON CONFLICT (payment_id) DO UPDATE SET calls = challenge_return_calls.calls + 1, last_at = now()
      WHERE challenge_return_calls.calls < ${max}
    RETURNING calls`;
  return taken.length === 1;
}

/** The workflow id of the payment's run (null: no such payment). */
export async function paymentWorkflowId(db: Db, paymentId: string): Promise<string | null> {
  const [row] = await db<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${paymentId}`;
  return row?.workflow_id ?? null;
}

/** Where a payment's recovery stands (domain/recovery.ts recoveryView), as the payment resource shows it; `whileRecovering`: only a payment still `recovering`. */
export async function setPaymentRecovery(db: Db, paymentId: string, recovery: unknown, options: { whileRecovering?: boolean } = {}): Promise<void> {
  const json = db.json(recovery as never);
  if (options.whileRecovering) await db`UPDATE payments SET recovery = ${json} WHERE id = ${paymentId} AND status = 'recovering'`;
  else await db`UPDATE payments SET recovery = ${json} WHERE id = ${paymentId}`;
}

/** Names the charge of a payment persisted `processing` before its PSP named it. */
export async function nameProcessingCharge(db: Db, paymentId: string, chargeId: string): Promise<void> {
  await db`UPDATE payments SET provider_charge_id = ${chargeId}, updated_at = now() WHERE id = ${paymentId}`;
}

/** A recovering payment's declined attempt: its recovery, and the PSP and charge of that attempt. The payment; null when it no longer recovers. */
export async function noteRecoveryAttempt(db: Db, input: { paymentId: string; recovery: unknown; provider: string; providerChargeId: string | null }): Promise<PaymentRow | null> {
  const [payment] = await db<PaymentRow[]>`
    UPDATE payments SET recovery = ${db.json(input.recovery as never)}, provider = ${input.provider}, provider_charge_id = ${input.providerChargeId}, updated_at = now()
    WHERE id = ${input.paymentId} AND status = 'recovering' RETURNING *`;
  return payment ?? null;
}

/** Sets the failure of a payment that ended in one of `statuses` (its status stays). The payment; null when it is in none of them. */
export async function setFailureOfEnded(db: Db, paymentId: string, failure: { code: string; message: string }, statuses: readonly PaymentStatus[]): Promise<PaymentRow | null> {
  const [payment] = await db<PaymentRow[]>`
    UPDATE payments SET failure_code = ${failure.code}, failure_message = ${failure.message}, updated_at = now()
    WHERE id = ${paymentId} AND status = ANY (${[...statuses]})
    RETURNING *`;
  return payment ?? null;
}

/** Flags a payment for an operator whatever its status (failure.code `needs_operator`; nothing else changes), once. */
export async function flagPaymentForOperator(db: Db, paymentId: string, message: string): Promise<void> {
  await db`
    UPDATE payments SET failure_code = 'needs_operator', failure_message = ${message}, updated_at = now()
    WHERE id = ${paymentId} AND failure_code IS DISTINCT FROM 'needs_operator'`;
}

/** What a payment captured and refunded, in its currency. */
export async function paymentRefundFigures(db: Db, paymentId: string): Promise<{ amount_refunded_minor: number; amount_captured_minor: number; currency: string } | null> {
  const [row] = await db<{ amount_refunded_minor: number; amount_captured_minor: number; currency: string }[]>`
    SELECT amount_refunded_minor, amount_captured_minor, currency FROM payments WHERE id = ${paymentId}`;
  return row ?? null;
}

/** Where a payment stands with its charge: status, PSP, the charge it names and its failure. */
export async function paymentChargeStanding(db: Db, paymentId: string): Promise<Pick<PaymentRow, 'status' | 'provider_charge_id' | 'provider' | 'failure_code'> | null> {
  const [row] = await db<Pick<PaymentRow, 'status' | 'provider_charge_id' | 'provider' | 'failure_code'>[]>`
    SELECT status, provider_charge_id, provider, failure_code FROM payments WHERE id = ${paymentId}`;
  return row ?? null;
}

/**
 * Records a payment's routing decision once (its first charge step; a retried step keeps the
 * first try's) and returns the one recorded.
 */
export async function recordRoutingDecision<T>(db: Db, paymentId: string, decision: T): Promise<T> {
  const [written] = await db<{ routing: T }[]>`
    UPDATE payments SET routing = ${db.json(decision as never)} WHERE id = ${paymentId} AND routing IS NULL RETURNING routing`;
  if (written) return written.routing;
  const [stored] = await db<{ routing: T | null }[]>`SELECT routing FROM payments WHERE id = ${paymentId}`;
  return stored?.routing ?? decision;
}
