import type { Db, Sql } from './connect';
import { cardBudgetFreeAt, type RecoveryPolicy } from '../domain/recovery';

/** The budget's figures a reservation needs (domain/recovery.ts RecoveryPolicy, scaled). */
export type CardBudgetLimits = Pick<RecoveryPolicy, 'perDay' | 'perMonth' | 'dayMs' | 'monthMs'>;

/** One attempt of a payment to reserve in its saved card's budget. */
export interface CardReservationRequest {
  paymentMethodId: string;
  paymentId: string;
  attempt: number;
  limits: CardBudgetLimits;
}

/** A reservation's answer: the attempt may go now (reserved at `at`), or the card's budget frees a slot at `freeAt`. */
export type CardReservation = { reserved: true; at: Date } | { reserved: false; freeAt: Date };

/**
 * Reserves one attempt of a saved card for a payment, if the card's budget has room now: one
 * transaction that locks the card's budget row, reads its attempts in the 30-day window and
 * inserts the reservation (the one owner of the count; never a read here and a write elsewhere).
 * Concurrent reservations of one card queue on the lock, so the budget cannot be overrun. Safe
 * to repeat: the payment's attempt already reserved answers with its time and reserves nothing.
 */
export async function reserveCardAttempt(sql: Sql, request: CardReservationRequest): Promise<CardReservation> {
  return sql.begin((tx) => reserveCardAttemptIn(tx, request));
}

/** reserveCardAttempt inside a transaction the caller holds (the first attempt's, which persists the intent too). */
export async function reserveCardAttemptIn(tx: Db, request: CardReservationRequest): Promise<CardReservation> {
  await tx`INSERT INTO card_attempt_budgets (payment_method_id) VALUES (${request.paymentMethodId}) ON CONFLICT DO NOTHING`;
  await tx`SELECT 1 FROM card_attempt_budgets WHERE payment_method_id = ${request.paymentMethodId} FOR UPDATE`;
  const [already] = await tx<{ reserved_at: Date }[]>`
    SELECT reserved_at FROM card_attempts WHERE payment_id = ${request.paymentId} AND attempt = ${request.attempt}`;
  if (already) return { reserved: true, at: already.reserved_at };
  const [clock] = await tx<{ now: Date }[]>`SELECT clock_timestamp() AS now`;
  const now = clock!.now.getTime();
  const recent = await cardAttemptTimes(tx, request.paymentMethodId, now - request.limits.monthMs);
  const freeAt = cardBudgetFreeAt(recent, now, request.limits);
  if (freeAt > now) return { reserved: false, freeAt: new Date(freeAt) };
  await tx`
    INSERT INTO card_attempts (payment_method_id, payment_id, attempt, reserved_at)
    VALUES (${request.paymentMethodId}, ${request.paymentId}, ${request.attempt}, ${new Date(now)})`;
  return { reserved: true, at: new Date(now) };
}

/** The times (ms) of a card's reserved attempts after `since`, oldest first. */
export async function cardAttemptTimes(db: Db, paymentMethodId: string, since: number): Promise<number[]> {
  const rows = await db<{ reserved_at: Date }[]>`
    SELECT reserved_at FROM card_attempts
    WHERE payment_method_id = ${paymentMethodId} AND reserved_at > ${new Date(since)}
    ORDER BY reserved_at`;
  return rows.map((row) => row.reserved_at.getTime());
}

/**
 * Gives back a payment's reserved attempt that was never made (a stop came between its
 * reservation and its charge: the window's end, a cancel), in the caller's transaction: the
 * card's budget counts the attempts made. Safe to repeat.
 */
export async function releaseCardAttempt(tx: Db, paymentId: string, attempt: number): Promise<void> {
  await tx`DELETE FROM card_attempts WHERE payment_id = ${paymentId} AND attempt = ${attempt}`;
}
