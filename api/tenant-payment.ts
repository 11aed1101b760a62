import type { Db } from '../db/connect';
import { getPayment, getPaymentWithAttempts } from '../db/payments';
import type { AttemptRow } from '../db/payments-attempts';
import { ApiError } from '../domain/errors';
import { looksLikeId } from '../domain/ids';
import type { PaymentRow } from '../domain/resources';

/** The tenant's payment, or 404 (also for another tenant's id or a malformed one). */
export async function tenantPayment(db: Db, tenantId: string, id: string): Promise<PaymentRow> {
  const payment = looksLikeId('pay', id) ? await getPayment(db, tenantId, id) : null;
  if (!payment) throw new ApiError('not_found', `No such payment: ${id}`);
  return payment;
}

/** The tenant's payment and its charge attempts (one read), or 404 as tenantPayment. */
export async function tenantPaymentWithAttempts(db: Db, tenantId: string, id: string): Promise<{ payment: PaymentRow; attempts: AttemptRow[] }> {
  const found = looksLikeId('pay', id) ? await getPaymentWithAttempts(db, tenantId, id) : null;
  if (!found) throw new ApiError('not_found', `No such payment: ${id}`);
  return found;
}
