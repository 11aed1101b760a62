import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { consolePayment } from '../../db/console';
import { decideAudit, insertAudit, noteAudit, type AuditRow } from '../../db/operators';
import { findTenant } from '../../db/tenants';
import { ApiError } from '../../domain/errors';
import { minorFromDecimal } from '../../domain/money';
import { commandRefusal, statusesAccepting, type PaymentCommand } from '../../domain/payments';
import type { DisputeRow, PaymentRow } from '../../domain/resources';
import type { AppEnv, ApiDeps, ConsoleSignedIn } from '../context';
import { runIdempotent } from '../idempotency';
import { runAcceptDispute } from '../routes/disputes';
import { runResendEvent } from '../routes/events';
import { runPaymentCommand } from '../routes/payments';
import { createRefund, createRefundOperation } from '../routes/refunds';
import { CapturePaymentBody, CreateRefundBody } from '../schemas';

/**
 * The console's actions: refund, capture, cancel, resend an event, accept a dispute. Each is
 * proposed first (an audit row with an idempotency key the server mints; nothing runs), then
 * confirmed, which runs the API's own operation under that key (POST /v1/payments/{id}/refunds,
 * /capture, /cancel, POST /v1/events/{id}/resend, POST /v1/disputes/{id}/accept, through the
 * idempotency protocol), so a double click, a reload or a second tab does it once, and what is
 * done is the API's in every respect.
 */

export type ConsoleActionKind = 'refund' | PaymentCommand | 'event.resend' | 'dispute.accept';

/** The key of a console action: never a client's, never reused (`console-` and 128 random bits). */
const mintKey = () => `console-${randomBytes(16).toString('hex')}`;

type Proposal = Pick<Parameters<typeof insertAudit>[1], 'objectType' | 'objectId' | 'tenantId' | 'amountMinor' | 'currency' | 'outcome'> & { action: ConsoleActionKind };

function propose(deps: ApiDeps, operator: ConsoleSignedIn, proposal: Proposal): Promise<AuditRow> {
  return insertAudit(deps.sql, { ...proposal, actor: operator.operatorId, actorEmail: operator.email, idempotencyKey: mintKey(), state: 'proposed' });
}

/** A decimal amount in the payment's currency, as minor units; a clear 400 otherwise. */
function amountOf(text: string, currency: string): number {
  try {
    return minorFromDecimal(text.trim(), currency);
  } catch {
    throw new ApiError('invalid_request', `The amount must be a decimal in ${currency}, e.g. 5.00.`);
  }
}

const invalid = (what: string, issues: { path: PropertyKey[]; message: string }[]) => new ApiError('invalid_request', `The ${what} is invalid: ${issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}.`);

/** Validates the form's amount and reason as the API would, and records the proposal. */
export async function proposeRefund(deps: ApiDeps, operator: ConsoleSignedIn, payment: PaymentRow, form: { amount: string; reason: string }): Promise<AuditRow> {
  const body = CreateRefundBody.safeParse({ amount_minor: amountOf(form.amount, payment.currency), reason: form.reason.trim() === '' ? null : form.reason.trim() });
  if (!body.success) throw invalid('refund', body.error.issues);
  return propose(deps, operator, { action: 'refund', objectType: 'payment', objectId: payment.id, tenantId: payment.tenant_id, amountMinor: body.data.amount_minor, currency: payment.currency, outcome: { reason: body.data.reason } });
}

/**
 * A capture (all of the authorization, or the form's amount) or a cancel. A payment whose
 * status does not take the command is refused here already (409, as the API would answer).
 */
export async function proposePaymentCommand(deps: ApiDeps, operator: ConsoleSignedIn, payment: PaymentRow, kind: PaymentCommand, form: { amount?: string }): Promise<AuditRow> {
  if (!statusesAccepting(kind).includes(payment.status)) throw new ApiError(kind === 'capture' ? 'payment_not_capturable' : 'payment_not_cancelable', commandRefusal(payment.id, payment.status, kind));
  const given = kind === 'capture' && form.amount !== undefined && form.amount.trim() !== '';
  const body = CapturePaymentBody.safeParse(given ? { amount_minor: amountOf(form.amount!, payment.currency) } : {});
  if (!body.success) throw invalid(kind, body.error.issues);
  return propose(deps, operator, {
    action: kind,
    objectType: 'payment',
    objectId: payment.id,
    tenantId: payment.tenant_id,
    amountMinor: body.data.amount_minor ?? payment.amount_minor,
    currency: payment.currency,
    outcome: { request: body.data },
  });
}

/** A new round of delivery of an event; `paymentId`: the payment it is about, to link back to. */
export async function proposeResend(deps: ApiDeps, operator: ConsoleSignedIn, event: { id: string; tenant_id: string; type: string }, paymentId: string | null): Promise<AuditRow> {
  return propose(deps, operator, { action: 'event.resend', objectType: 'event', objectId: event.id, tenantId: event.tenant_id, outcome: { event_type: event.type, payment_id: paymentId } });
}

/** Conceding a dispute: its amount is lost. One that no longer needs a response is refused here already (409). */
export async function proposeAccept(deps: ApiDeps, operator: ConsoleSignedIn, dispute: DisputeRow): Promise<AuditRow> {
  if (dispute.status !== 'needs_response') throw new ApiError('dispute_not_open', `dispute ${dispute.id} is ${dispute.status}; it can no longer be accepted`);
  return propose(deps, operator, { action: 'dispute.accept', objectType: 'dispute', objectId: dispute.id, tenantId: dispute.tenant_id, amountMinor: dispute.amount_minor, currency: dispute.currency, outcome: { payment_id: dispute.payment_id } });
}

type Answer = { status: number; body: Record<string, unknown> & { id?: string; status?: string; error?: { type: string; message: string } } };

/** What the operation's answer means, in a sentence for the action's page. */
function describe(action: AuditRow, { status, body }: Answer): string {
  const pending = status === 202;
  switch (action.action as ConsoleActionKind) {
    case 'refund':
      return pending ? `Refund ${body.id} is ${body.status}; the PSP has not confirmed it yet.` : `Refunded: ${body.id} (${body.status}).`;
    case 'capture':
      return pending ? `Capture asked; payment ${body.id} is still ${body.status} until the PSP confirms it.` : `Captured: payment ${body.id} is ${body.status}.`;
    case 'cancel':
      return pending ? `Cancel asked; payment ${body.id} is still ${body.status} until it is decided.` : `Canceled: payment ${body.id} is ${body.status}.`;
    case 'event.resend':
      return `Resent: event ${String(body.event_id)} is due for delivery now (${String(body.attempts)} attempts so far).`;
    case 'dispute.accept':
      return pending ? `Accept asked; dispute ${body.id} is still ${body.status}.` : `Accepted: dispute ${body.id} is ${body.status}.`;
  }
}

/** Runs the action's operation under the action's key, as the tenant of its object. */
async function runOperation(c: Context<AppEnv>, deps: ApiDeps, action: AuditRow): ReturnType<typeof runIdempotent> {
  const request = (action.outcome?.request ?? {}) as { amount_minor?: number };
  switch (action.action as ConsoleActionKind) {
    case 'refund': {
      const payment = await consolePayment(deps.sql, action.object_id, action.tenant_id);
      if (!payment) throw new ApiError('not_found', `No such payment: ${action.object_id}`);
      const reason = typeof action.outcome?.reason === 'string' ? action.outcome.reason : null;
      return runIdempotent(c, deps, createRefund, createRefundOperation(deps, c, { id: payment.id, payment, body: { amount_minor: Number(action.amount_minor), reason } }));
    }
    case 'capture':
    case 'cancel':
      return runPaymentCommand(deps, c, action.action as PaymentCommand, action.object_id, request);
    case 'event.resend':
      return runResendEvent(deps, c, action.object_id, {});
    case 'dispute.accept':
      return runAcceptDispute(deps, c, action.object_id);
  }
}

/**
 * Runs a proposed action under its key and records the outcome on its audit row (the first
 * decision is kept; a second confirmation replays the same recorded answer).
 */
export async function confirmAction(c: Context<AppEnv>, deps: ApiDeps, action: AuditRow): Promise<void> {
  const tenant = action.tenant_id === null ? null : await findTenant(deps.sql, action.tenant_id);
  if (!tenant || action.idempotency_key === null) throw new ApiError('not_found', `No such action: ${action.id}`);
  c.set('tenant', tenant);
  c.set('idempotencyKey', action.idempotency_key);
  const answer = await runOperation(c, deps, action);
  const status = answer.response.status;
  const body = JSON.parse(answer.response.body) as Answer['body'];
  const kept = { ...(action.outcome ?? {}), http_status: status };
  if (status === 202 && action.action !== 'refund') {
    // Not decided yet (the PSP confirms by notification, or a recovery retry is in flight): the
    // action stays proposed, and confirming again asks under the same key. A refund's 202 is a
    // refund made and pending at the PSP: that is decided.
    await noteAudit(deps.sql, action.id, { ...kept, message: describe(action, { status, body }) });
  } else if (status >= 200 && status < 300) {
    await decideAudit(deps.sql, action.id, 'done', { ...kept, object_status: body.status ?? body.delivery_status ?? null, result_id: body.id ?? body.event_id ?? null, message: describe(action, { status, body }) });
  } else {
    await decideAudit(deps.sql, action.id, 'failed', { ...kept, error: body.error?.type, message: `Refused: ${body.error?.message ?? status}` });
  }
}
