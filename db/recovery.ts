import type { Db, Sql } from './connect';
import { cardBudgetFreeAt, type RecoveryPolicy } from '../domain/recovery';

/** The budget's figures a reservation needs (domain/recovery.ts RecoveryPolicy, scaled). */
export type CardBudgetLimits = Pick<RecoveryPolicy, 'perDay' | 'perMonth' | 'dayMs' | 'monthMs'>;

/** One attempt of a payment to reserve in its card's budget (the card its saved method is a copy of). */
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
 * transaction that locks the card's row (tenant_cards: the tenant and the card's key, so every
 * copy of one card saved by the tenant shares it), reads its attempts in the 30-day window and
 * inserts the reservation (the one owner of the count; never a read here and a write elsewhere).
 * Concurrent reservations of one card queue on the lock, so the budget cannot be overrun. Safe
 * to repeat: the payment's attempt already reserved answers with its time and reserves nothing.
 */
export async function reserveCardAttempt(sql: Sql, request: CardReservationRequest): Promise<CardReservation> {
  return sql.begin((tx) => reserveCardAttemptIn(tx, request));
}

/** reserveCardAttempt inside a transaction the caller holds (the first attempt's, which persists the intent too). */
export async function reserveCardAttemptIn(tx: Db, request: CardReservationRequest): Promise<CardReservation> {
  const card = await lockCardOf(tx, request.paymentMethodId);
  const [already] = await tx<{ reserved_at: Date }[]>`
    SELECT reserved_at FROM card_attempts WHERE payment_id = ${request.paymentId} AND attempt = ${request.attempt}`;
  if (already) return { reserved: true, at: already.reserved_at };
  const [clock] = await tx<{ now: Date }[]>`SELECT clock_timestamp() AS now`;
  const now = clock!.now.getTime();
  const recent = await cardAttemptTimes(tx, card, now - request.limits.monthMs);
  const freeAt = cardBudgetFreeAt(recent, now, request.limits);
  if (freeAt > now) return { reserved: false, freeAt: new Date(freeAt) };
  await tx`
    INSERT INTO card_attempts (tenant_id, card_key, payment_method_id, payment_id, attempt, reserved_at)
    VALUES (${card.tenantId}, ${card.cardKey}, ${request.paymentMethodId}, ${request.paymentId}, ${request.attempt}, ${new Date(now)})`;
  return { reserved: true, at: new Date(now) };
}

/** A tenant's card: what its budget and its hard decline are kept by (tenant_cards). */
export interface TenantCard {
  tenantId: string;
  cardKey: string;
}

/** The card a saved method is a copy of (payment_methods.card_key, db/migrations/025_cards_per_tenant.sql). */
export async function cardOfMethod(db: Db, paymentMethodId: string): Promise<TenantCard> {
  const [method] = await db<{ tenant_id: string; card_key: string }[]>`SELECT tenant_id, card_key FROM payment_methods WHERE id = ${paymentMethodId}`;
  if (!method) throw new Error(`no saved payment method ${paymentMethodId}`);
  return { tenantId: method.tenant_id, cardKey: method.card_key };
}

/** The card's row, made if missing and locked for the rest of the transaction. */
async function lockCardOf(tx: Db, paymentMethodId: string): Promise<TenantCard> {
  const card = await cardOfMethod(tx, paymentMethodId);
  await tx`INSERT INTO tenant_cards (tenant_id, card_key) VALUES (${card.tenantId}, ${card.cardKey}) ON CONFLICT DO NOTHING`;
  await tx`SELECT 1 FROM tenant_cards WHERE tenant_id = ${card.tenantId} AND card_key = ${card.cardKey} FOR UPDATE`;
  return card;
}

/** The times (ms) of a card's reserved attempts after `since` (every copy of it), oldest first. */
export async function cardAttemptTimes(db: Db, card: TenantCard, since: number): Promise<number[]> {
  const rows = await db<{ reserved_at: Date }[]>`
    SELECT reserved_at FROM card_attempts
    WHERE tenant_id = ${card.tenantId} AND card_key = ${card.cardKey} AND reserved_at > ${new Date(since)}
    ORDER BY reserved_at`;
  return rows.map((row) => row.reserved_at.getTime());
}

/** A card's last hard decline of an off-session charge: what the issuer answered, when, and for which payment. */
export interface CardHardDecline {
  code: string;
  message: string;
  at: Date;
  paymentId: string | null;
}

/**
 * Notes a hard decline (domain/recovery.ts classifyDecline) of an off-session charge of the saved
 * method: its card (every copy the tenant saved of it) is not charged off-session again until a
 * payment with it succeeds on-session (clearHardDecline). In the transaction that records the decline.
 */
export async function noteHardDecline(tx: Db, paymentMethodId: string, decline: { code: string; message: string; paymentId: string }): Promise<void> {
  const card = await cardOfMethod(tx, paymentMethodId);
  await tx`
    INSERT INTO tenant_cards (tenant_id, card_key, hard_decline_code, hard_decline_message, hard_declined_at, hard_decline_payment_id)
    VALUES (${card.tenantId}, ${card.cardKey}, ${decline.code}, ${decline.message}, clock_timestamp(), ${decline.paymentId})
    ON CONFLICT (tenant_id, card_key) DO UPDATE SET
      hard_decline_code = EXCLUDED.hard_decline_code, hard_decline_message = EXCLUDED.hard_decline_message,
      hard_declined_at = EXCLUDED.hard_declined_at, hard_decline_payment_id = EXCLUDED.hard_decline_payment_id`;
}

/** A payment with the saved method's card succeeded on-session: the card may be charged off-session again. */
export async function clearHardDecline(tx: Db, paymentMethodId: string): Promise<void> {
  const card = await cardOfMethod(tx, paymentMethodId);
  await tx`
    UPDATE tenant_cards SET hard_decline_code = NULL, hard_decline_message = NULL, hard_declined_at = NULL, hard_decline_payment_id = NULL
    WHERE tenant_id = ${card.tenantId} AND card_key = ${card.cardKey} AND hard_decline_code IS NOT NULL`;
}

/**
 * The hard decline that keeps the saved method's card from off-session charges, or null; null
 * too once the payment's attempt 1 is recorded (an earlier try of its first attempt may have
 * charged: that try's charge is asked for, never refused afterwards).
 */
export async function hardDeclineBeforeFirstAttempt(db: Db, paymentMethodId: string, paymentId: string): Promise<CardHardDecline | null> {
  const [row] = await db<{ hard_decline_code: string; hard_decline_message: string | null; hard_declined_at: Date; hard_decline_payment_id: string | null }[]>`
    SELECT c.hard_decline_code, c.hard_decline_message, c.hard_declined_at, c.hard_decline_payment_id
    FROM payment_methods m JOIN tenant_cards c ON c.tenant_id = m.tenant_id AND c.card_key = m.card_key
    WHERE m.id = ${paymentMethodId} AND c.hard_decline_code IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM payment_attempts WHERE payment_id = ${paymentId} AND attempt = 1)`;
  return row ? { code: row.hard_decline_code, message: row.hard_decline_message ?? '', at: row.hard_declined_at, paymentId: row.hard_decline_payment_id } : null;
}

/**
 * Gives back a payment's reserved attempt that was never made (a stop came between its
 * reservation and its charge: the window's end, a cancel), in the caller's transaction: the
 * card's budget counts the attempts made. Safe to repeat.
 */
export async function releaseCardAttempt(tx: Db, paymentId: string, attempt: number): Promise<void> {
  await tx`DELETE FROM card_attempts WHERE payment_id = ${paymentId} AND attempt = ${attempt}`;
}
