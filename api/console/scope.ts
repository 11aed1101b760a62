import type { Context } from 'hono';
import { consoleDispute, consoleEvent, consolePayment } from '../../db/console';
import { findAudit, type AuditRow } from '../../db/operators';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import type { DisputeRow, PaymentRow } from '../../domain/resources';
import type { ApiDeps, AppEnv } from '../context';
import { signedIn } from './session';

/**
 * What a console operator may see: an operator with a tenant sees that tenant's objects only;
 * another tenant's payment, dispute, event or action is 404, as if it did not exist.
 */

export async function consolePaymentOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<PaymentRow> {
  const payment = looksLikeId('pay', id) ? await consolePayment(deps.sql, id, signedIn(c).tenantId) : null;
  if (!payment) throw new ApiError('not_found', `No such payment: ${id}`);
  return payment;
}

export async function consoleDisputeOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<DisputeRow> {
  const dispute = looksLikeId('dsp', id) ? await consoleDispute(deps.sql, id, signedIn(c).tenantId) : null;
  if (!dispute) throw new ApiError('not_found', `No such dispute: ${id}`);
  return dispute;
}

export async function consoleEventOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<NonNullable<Awaited<ReturnType<typeof consoleEvent>>>> {
  const event = looksLikeId('evt', id) ? await consoleEvent(deps.sql, id, signedIn(c).tenantId) : null;
  if (!event) throw new ApiError('not_found', `No such event: ${id}`);
  return event;
}

/** The objects console actions are taken on (operator management, by the admin token, has no action page). */
const actionObjects = ['payment', 'dispute', 'event'];

export async function consoleActionOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<AuditRow> {
  const action = looksLikeId('act', id) ? await findAudit(deps.sql, id) : null;
  const tenantId = signedIn(c).tenantId;
  if (!action || !actionObjects.includes(action.object_type) || action.idempotency_key === null || (tenantId !== null && action.tenant_id !== tenantId)) throw new ApiError('not_found', `No such action: ${id}`);
  return action;
}
