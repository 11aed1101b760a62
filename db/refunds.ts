import type { Db } from './connect';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';
import type { RefundRow } from '../domain/resources';
import type { RefundWorkflowInput } from '../shared/refunds';

/**
 * Reserves the refund's amount on the payment and inserts it as pending, in the caller's
 * transaction, which must hold the payment row lock (lockPayment): concurrent refunds of
 * one payment are decided one after the other, and the CHECK on payments keeps the total
 * under the captured amount even if this code were wrong.
 * Idempotent: the refund already exists on a replay, and nothing is reserved twice.
 */
export async function reserveRefund(db: Db, input: RefundWorkflowInput, currency: string, workflowId: string): Promise<RefundRow> {
  const [existing] = await db<RefundRow[]>`SELECT * FROM refunds WHERE id = ${input.refundId}`;
  if (existing) return existing;
  const [refund] = await db<RefundRow[]>`
    INSERT INTO refunds (id, tenant_id, payment_id, amount_minor, currency, status, reason, refund_key, workflow_id)
    VALUES (${input.refundId}, ${input.tenantId}, ${input.paymentId}, ${input.amountMinor}, ${currency},
            'pending', ${input.reason}, ${input.idempotency.key}, ${workflowId})
    RETURNING *`;
  await db`
    UPDATE payments SET amount_refunded_minor = amount_refunded_minor + ${input.amountMinor}, updated_at = now()
    WHERE id = ${input.paymentId}`;
  return refund!;
}

export async function getRefund(db: Db, tenantId: string, refundId: string): Promise<RefundRow | null> {
  const [refund] = await db<RefundRow[]>`SELECT * FROM refunds WHERE id = ${refundId} AND tenant_id = ${tenantId}`;
  return refund ?? null;
}

export async function listRefunds(db: Db, tenantId: string, paymentId: string, query: PageQuery): Promise<Page<RefundRow>> {
  const rows = await db<RefundRow[]>`
    SELECT * FROM refunds
    WHERE tenant_id = ${tenantId} AND payment_id = ${paymentId}
      ${keysetPage(db, 'id', query)}`;
  return toPage(rows, query);
}

/** The refund by id alone (a workflow step, which owns the refund), or null. */
export async function findRefund(db: Db, refundId: string): Promise<RefundRow | null> {
  const [refund] = await db<RefundRow[]>`SELECT * FROM refunds WHERE id = ${refundId}`;
  return refund ?? null;
}

/**
 * The currency of the money a refund under `reference` gives back: our refund's (a refund's
 * reference at the PSP is its id), else the payment's (a compensation's or a late charge's
 * reference is the payment's id); null when neither exists.
 */
export async function currencyOfRefundReference(db: Db, reference: string): Promise<string | null> {
  const [row] = await db<{ currency: string }[]>`
    SELECT currency FROM refunds WHERE id = ${reference}
    UNION ALL
    SELECT currency FROM payments WHERE id = ${reference}
    LIMIT 1`;
  return row?.currency ?? null;
}

/**
 * The pending refunds a PSP's report may settle, of a payment at this provider whose charge is
 * the one reported: the refund whose id is the report's reference, or (a PSP that names the
 * payment's reference instead) each pending refund of that payment for the reported amount.
 * Each one's run takes only the report of the refund the PSP answered it (by the PSP's id).
 */
export async function pendingRefundsReported(
  db: Db,
  report: { provider: string; reference: string; chargeId: string; amountMinor: number },
): Promise<{ id: string; workflow_id: string }[]> {
  return db<{ id: string; workflow_id: string }[]>`
    SELECT r.id, r.workflow_id FROM refunds r JOIN payments p ON p.id = r.payment_id
    WHERE r.status = 'pending'
      AND (r.id = ${report.reference} OR (r.payment_id = ${report.reference} AND r.amount_minor = ${report.amountMinor}))
      AND p.provider_charge_id = ${report.chargeId} AND (p.provider IS NULL OR p.provider = ${report.provider})
    ORDER BY r.created_at, r.id
    LIMIT 20`;
}

/** Finishes a pending refund (succeeded or failed); null if it was finished before (a replayed activity). */
export async function finishRefund(
  db: Db,
  refundId: string,
  outcome: { status: 'succeeded'; providerRefundId: string } | { status: 'failed'; providerRefundId: string | null; failure: { code: string; message: string } },
): Promise<RefundRow | null> {
  const failure = outcome.status === 'failed' ? outcome.failure : null;
  const [refund] = await db<RefundRow[]>`
    UPDATE refunds SET
      status = ${outcome.status},
      provider_refund_id = ${outcome.providerRefundId},
      failure_code = ${failure?.code ?? null},
      failure_message = ${failure?.message ?? null},
      updated_at = now()
    WHERE id = ${refundId} AND status = 'pending'
    RETURNING *`;
  if (refund && outcome.status === 'failed') {
    // A failed refund gives its reservation back.
    await db`
      UPDATE payments SET amount_refunded_minor = amount_refunded_minor - ${refund.amount_minor}, updated_at = now()
      WHERE id = ${refund.payment_id}`;
  }
  return refund ?? null;
}
