import type { Db } from '../db/connect';
import { getPayment } from '../db/payments';
import { ApiError } from '../domain/errors';
import { looksLikeId } from '../domain/ids';
import type { PaymentRow } from '../domain/resources';

/** The tenant's payment, or 404 (also for another tenant's id or a malformed one). */
export async function tenantPayment(db: Db, tenantId: string, id: string): Promise<PaymentRow> {
  const payment = looksLikeId('pay', id) ? await getPayment(db, tenantId, id) : null;
  if (!payment) throw new ApiError('not_found', `No such payment: ${id}`);
  return payment;
}
