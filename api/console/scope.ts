import type { Context } from 'hono';
import { consolePayment } from '../../db/console';
import { findAudit, type AuditRow } from '../../db/operators';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import type { PaymentRow } from '../../domain/resources';
import type { ApiDeps, AppEnv } from '../context';
import { signedIn } from './session';

/**
 * What a console operator may see: an operator with a tenant sees that tenant's objects only;
 * another tenant's payment or action is 404, as if it did not exist.
 */

export async function consolePaymentOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<PaymentRow> {
  const payment = looksLikeId('pay', id) ? await consolePayment(deps.sql, id, signedIn(c).tenantId) : null;
  if (!payment) throw new ApiError('not_found', `No such payment: ${id}`);
  return payment;
}

export async function consoleActionOr404(deps: ApiDeps, c: Context<AppEnv>, id: string): Promise<AuditRow> {
  const action = looksLikeId('act', id) ? await findAudit(deps.sql, id) : null;
  const tenantId = signedIn(c).tenantId;
  if (!action || action.object_type !== 'payment' || (tenantId !== null && action.tenant_id !== tenantId)) throw new ApiError('not_found', `No such action: ${id}`);
  return action;
}
