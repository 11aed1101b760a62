import type { Db, Sql } from './connect';

/** One PSP webhook as stored (migration 007): once per (provider, event id). */
export interface ProviderEventRow {
  provider: string;
  event_id: string;
  type: string;
  charge_id: string | null;
  charge_status: string | null;
  payment_id: string | null;
  disposition: 'forward' | 'unknown_charge' | 'ignored';
  forwarded_at: Date | null;
  created_at: Date;
  received_at: Date;
  refund_id: string | null;
}

export interface ReceivedEvent {
  provider: string;
  eventId: string;
  type: string;
  createdAt: Date;
  chargeId: string | null;
  chargeStatus: string | null;
  /** Our payment id as the PSP stored it (the charge's reference), or the refund's reference (our refund id, or the payment id of a compensation's refund). */
  reference: string | null;
  /** The PSP's refund id, if the event confirms a refund (migration 022). */
  refundId?: string | null;
  payload: unknown;
}

/** The event as stored, and whether this delivery stored it. */
export interface ReceivedOutcome {
  row: ProviderEventRow;
  /** false: this (provider, event id) was stored before: a redelivery. */
  inserted: boolean;
}

/**
 * Stores a verified PSP event once, with what it means, in one transaction: the payment it
 * concerns (by our reference, or the charge id we recorded), or none (kept for an operator).
 * A redelivery finds the stored row and changes nothing (the webhook route hands it to the same
 * workflow run as the first delivery).
 */
export async function receiveProviderEvent(sql: Sql, event: ReceivedEvent): Promise<ReceivedOutcome> {
  return sql.begin(async (tx) => {
    // A refund's confirmation is stored under the payment its reference names, if it names one here (a compensation's refund).
    const payment = event.chargeId
      ? await paymentOfCharge(tx, event.provider, event.reference, event.chargeId)
      : event.refundId && event.reference
        ? ((await tx<{ id: string }[]>`SELECT id FROM payments WHERE id = ${event.reference} AND (provider IS NULL OR provider = ${event.provider})`)[0] ?? null)
        : null;
    const disposition = !event.chargeId ? 'ignored' : payment ? 'forward' : 'unknown_charge';
    const [inserted] = await tx<ProviderEventRow[]>`
      INSERT INTO provider_events (provider, event_id, type, charge_id, charge_status, payment_id, disposition, created_at, refund_id, payload)
      VALUES (${event.provider}, ${event.eventId}, ${event.type}, ${event.chargeId}, ${event.chargeStatus},
              ${payment?.id ?? null}, ${disposition}, ${event.createdAt}, ${event.refundId ?? null}, ${tx.json(event.payload as never)})
      ON CONFLICT (provider, event_id) DO NOTHING
      RETURNING *`;
    const row = inserted ?? (await tx<ProviderEventRow[]>`SELECT * FROM provider_events WHERE provider = ${event.provider} AND event_id = ${event.eventId}`)[0]!;
    return { row, inserted: inserted !== undefined };
  }) as Promise<ReceivedOutcome>;
}

/**
 * The payment a charge at this provider belongs to: our reference, provided its recorded charge
 * (if any) is this one, and the payment is at this provider (payments.provider; null: a payment
 * that recorded no provider, at the default one); or the payment one of whose attempts
 * made this charge here (a charge the payment moved on from); or, when neither is found, the
 * payment that recorded this charge as its own. The first two are index lookups (the primary
 * key, payment_attempts_by_charge); the last reads payments by provider_charge_id, which has no
 * index (it would cost every payment an index entry), so it runs only for a charge the indexed
 * lookups do not know.
 */
export async function paymentOfCharge(db: Db, provider: string, reference: string | null, chargeId: string): Promise<{ id: string } | null> {
  const [known] = await db<{ id: string }[]>`
    SELECT id FROM payments
    WHERE id = ${reference ?? ''} AND (provider_charge_id IS NULL OR provider_charge_id = ${chargeId})
      AND (provider IS NULL OR provider = ${provider})
    UNION ALL
    SELECT payment_id AS id FROM payment_attempts WHERE provider = ${provider} AND provider_charge_id = ${chargeId}
    LIMIT 1`;
  if (known) return known;
  const [recorded] = await db<{ id: string }[]>`
    SELECT id FROM payments WHERE provider_charge_id = ${chargeId} AND (provider IS NULL OR provider = ${provider}) LIMIT 1`;
  return recorded ?? null;
}

/** Whether the PSP's refusal of a refund of this payment's own (its compensation's: the refund's reference is the payment's) is stored. */
export async function storedCompensationRefusal(db: Db, provider: string, paymentId: string): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM provider_events WHERE payment_id = ${paymentId} AND provider = ${provider} AND type = 'refund.failed' LIMIT 1`;
  return row !== undefined;
}

/** Notes that the event reached the payment's workflow (or that its run had closed). */
export async function markForwarded(sql: Sql, provider: string, eventId: string): Promise<void> {
  await sql`UPDATE provider_events SET forwarded_at = now() WHERE provider = ${provider} AND event_id = ${eventId} AND forwarded_at IS NULL`;
}

/**
 * A PSP's stored report of a cancel of this charge (a kind whose cancels are notified: its
 * notification of the cancel, stored as `charge.canceled` or `charge.cancel_failed`): `canceled` if any says
 * so (a cancel that took place is final), else `cancel_failed`, else null. A charge is voided
 * under one key (its payment's void sub-key), so the PSP makes one cancel of it, whichever run
 * asks: this is that cancel's outcome even when it came before the run that reads it asked.
 */
export async function storedCancellation(db: Db, input: { provider: string; paymentId: string; chargeId: string }): Promise<{ status: 'canceled' | 'cancel_failed' } | null> {
  const [row] = await db<{ type: string }[]>`
    SELECT type FROM provider_events
    WHERE payment_id = ${input.paymentId} AND provider = ${input.provider} AND charge_id = ${input.chargeId}
      AND type IN ('charge.canceled', 'charge.cancel_failed')
    ORDER BY type = 'charge.canceled' DESC, received_at LIMIT 1`;
  if (!row) return null;
  return { status: row.type === 'charge.canceled' ? 'canceled' : 'cancel_failed' };
}

/**
 * A PSP's stored confirmation of a refund by its id (its notification of the refund, stored as
 * `refund.succeeded` or `refund.failed`; migration 022): a refund asked again under the key of
 * one already settled is answered `pending` again, and its settlement is this.
 */
export async function storedRefundSettlement(db: Db, input: { provider: string; refundId: string }): Promise<{ status: 'succeeded' | 'failed' } | null> {
  const [row] = await db<{ type: string }[]>`
    SELECT type FROM provider_events
    WHERE provider = ${input.provider} AND refund_id = ${input.refundId} AND type IN ('refund.succeeded', 'refund.failed')
    ORDER BY type = 'refund.succeeded' DESC, received_at LIMIT 1`;
  if (!row) return null;
  return { status: row.type === 'refund.succeeded' ? 'succeeded' : 'failed' };
}
