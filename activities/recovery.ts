import type { Sql } from '../db/connect';
import { reserveCardAttempt, reserveCardAttemptIn, type CardBudgetLimits, type CardReservation } from '../db/recovery';
import type { PaymentWorkflowInput } from '../shared/payments';
import { withIntent } from './routing';

/** Revenue recovery's step outside the payment's records: the card's budget (docs/recovery.md). */
export function createRecoverySteps(sql: Sql) {
  return {
    /**
     * Reserves the payment's attempt in its saved card's budget, if the card has room now (the
     * database's clock). Answers whether it was reserved and, if not, when a slot frees (ms).
     * Safe to repeat: the attempt reserved already answers reserved. The first attempt's
     * reservation comes before any charge and carries the payment's `intent`: persisted again
     * in the same transaction if a start in doubt left the run without it (withIntent; the
     * order guard refusing it is OrderTaken, as at the first charge attempt).
     */
    async reserveCardAttempt(input: {
      paymentMethodId: string;
      paymentId: string;
      attempt: number;
      limits: CardBudgetLimits;
      intent?: PaymentWorkflowInput;
    }): Promise<{ reserved: boolean; atMs: number }> {
      const { intent, ...request } = input;
      const reservation: CardReservation = intent ? await withIntent(sql, intent, (tx) => reserveCardAttemptIn(tx, request)) : await reserveCardAttempt(sql, request);
      return reservation.reserved ? { reserved: true, atMs: reservation.at.getTime() } : { reserved: false, atMs: reservation.freeAt.getTime() };
    },
  };
}
export type RecoverySteps = ReturnType<typeof createRecoverySteps>;
