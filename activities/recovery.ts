import type { Sql } from '../db/connect';
import { reserveCardAttempt, type CardBudgetLimits } from '../db/recovery';

/** Revenue recovery's step outside the payment's records: the card's budget (docs/recovery.md). */
export function createRecoverySteps(sql: Sql) {
  return {
    /**
     * Reserves the payment's attempt in its saved card's budget, if the card has room now (the
     * database's clock). Answers whether it was reserved and, if not, when a slot frees (ms).
     * Safe to repeat: the attempt reserved already answers reserved.
     */
    async reserveCardAttempt(input: { paymentMethodId: string; paymentId: string; attempt: number; limits: CardBudgetLimits }): Promise<{ reserved: boolean; atMs: number }> {
      const reservation = await reserveCardAttempt(sql, input);
      return reservation.reserved ? { reserved: true, atMs: reservation.at.getTime() } : { reserved: false, atMs: reservation.freeAt.getTime() };
    },
  };
}
export type RecoverySteps = ReturnType<typeof createRecoverySteps>;
