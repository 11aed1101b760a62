import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { decideAudit, insertAudit, type AuditRow } from '../../db/operators';
import { findTenant } from '../../db/tenants';
import { ApiError } from '../../domain/errors';
import { minorFromDecimal } from '../../domain/money';
import type { PaymentRow } from '../../domain/resources';
import type { AppEnv, ApiDeps, ConsoleSignedIn } from '../context';
import { runIdempotent } from '../idempotency';
import { createRefund, createRefundOperation } from '../routes/refunds';
import { CreateRefundBody } from '../schemas';
import { consolePaymentOr404 } from './scope';

/**
 * The console's refund: proposed (an audit row with an idempotency key the server mints), then
 * confirmed, which runs POST /v1/payments/{id}/refunds's own operation under that key
 * (api/routes/refunds.ts createRefundOperation through the idempotency protocol), so a double
 * click, a reload or a second tab refunds once, and the refund is the API's in every respect.
 */

/** The key of a console action: never a client's, never reused (`console-` and 128 random bits). */
const mintKey = () => `console-${randomBytes(16).toString('hex')}`;

/** Validates the form's amount and reason as the API would, and records the proposal. */
export async function proposeRefund(deps: ApiDeps, operator: ConsoleSignedIn, payment: PaymentRow, form: { amount: string; reason: string }): Promise<AuditRow> {
  let amountMinor: number;
  try {
    amountMinor = minorFromDecimal(form.amount.trim(), payment.currency);
  } catch {
    throw new ApiError('invalid_request', `The amount must be a decimal in ${payment.currency}, e.g. 5.00.`);
  }
  const body = CreateRefundBody.safeParse({ amount_minor: amountMinor, reason: form.reason.trim() === '' ? null : form.reason.trim() });
  if (!body.success) throw new ApiError('invalid_request', `The refund is invalid: ${body.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}.`);
  return insertAudit(deps.sql, {
    actor: operator.operatorId,
    actorEmail: operator.email,
    action: 'refund',
    objectType: 'payment',
    objectId: payment.id,
    tenantId: payment.tenant_id,
    idempotencyKey: mintKey(),
    amountMinor: body.data.amount_minor,
    currency: payment.currency,
    state: 'proposed',
    outcome: { reason: body.data.reason },
  });
}

/**
 * Runs a proposed refund under its key and records the outcome on its audit row (the first
 * decision is kept; a second confirmation replays the same recorded answer).
 */
export async function confirmRefund(c: Context<AppEnv>, deps: ApiDeps, action: AuditRow): Promise<void> {
  const payment = await consolePaymentOr404(deps, c, action.object_id);
  const tenant = await findTenant(deps.sql, payment.tenant_id);
  if (!tenant || action.idempotency_key === null || action.amount_minor === null) throw new ApiError('not_found', `No such action: ${action.id}`);
  const reason = typeof action.outcome?.reason === 'string' ? action.outcome.reason : null;
  c.set('tenant', tenant);
  c.set('idempotencyKey', action.idempotency_key);
  const answer = await runIdempotent(c, deps, createRefund, createRefundOperation(deps, c, { id: payment.id, payment, body: { amount_minor: Number(action.amount_minor), reason } }));
  const body = JSON.parse(answer.response.body) as { id?: string; status?: string; error?: { type: string; message: string } };
  const status = answer.response.status;
  if (status === 201 || status === 202) {
    const message = status === 201 ? `Refunded: ${body.id} (${body.status}).` : `Refund ${body.id} is ${body.status}; the PSP has not confirmed it yet.`;
    await decideAudit(deps.sql, action.id, 'done', { reason, http_status: status, refund_id: body.id, refund_status: body.status, message });
  } else {
    await decideAudit(deps.sql, action.id, 'failed', { reason, http_status: status, error: body.error?.type, message: `Refused: ${body.error?.message ?? status}` });
  }
}
