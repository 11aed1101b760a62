import type { SandboxDeps } from './deps';
import type { Tx } from './idempotency';
import { chargeJson, disputeFeeMinor, disputeJson, newBalanceTransactionId, newEventId, refundJson, type ChargeRow, type DisputeRow, type RefundRow } from './objects';
import { paymentMethodBehaviour } from './payment-methods';

/**
 * What every state change writes besides the change itself, in the same transaction: its
 * event (the outbox the delivery loop sends from) and, when money moved, its balance
 * transaction (the report). Committed together or not at all.
 */

/** The sandbox's fee: 1.4 % + 25 minor units per captured charge; refunds cost nothing. */
export const chargeFeeMinor = (amountMinor: number) => Math.round(amountMinor * 0.014) + 25;

/**
 * Stores one event. The faults in force are drawn now and kept with the event, so a restart
 * changes nothing about what happens to it: lost (never sent on its own), held back (reorder),
 * sent twice (duplicate), delayed.
 */
export async function recordEvent(tx: Tx, deps: SandboxDeps, type: string, chargeId: string, object: unknown): Promise<string> {
  const id = newEventId();
  const body = JSON.stringify({ id, type, created: Math.floor(Date.now() / 1000), data: { object } });
  const { faults, webhook } = deps.runtime;
  const lost = Math.random() < faults.loss;
  const held = Math.random() < faults.reorder;
  const duplicate = Math.random() < faults.duplicate;
  await tx`
    INSERT INTO sandbox.events (id, type, charge_id, body, webhook_url, state, next_attempt_at, held_until, duplicate)
    VALUES (
      ${id}, ${type}, ${chargeId}, ${body}, ${webhook?.url ?? null}, ${lost ? 'lost' : 'pending'},
      clock_timestamp() + ${faults.delayMs}::int * interval '1 millisecond',
      CASE WHEN ${held} THEN clock_timestamp() + ${faults.delayMs + faults.reorderHoldMs}::int * interval '1 millisecond' END,
      ${duplicate}
    )`;
  // After this transaction commits; the loop's own polling catches it if the wake comes early.
  setTimeout(() => deps.runtime.wakeDelivery(), 20).unref();
  return id;
}

export const chargeEvent = (tx: Tx, deps: SandboxDeps, row: ChargeRow, type = `charge.${row.status}`) =>
  recordEvent(tx, deps, type, row.id, chargeJson(row));

export const refundEvent = (tx: Tx, deps: SandboxDeps, refund: RefundRow) =>
  recordEvent(tx, deps, `refund.${refund.status}`, refund.charge_id, refundJson(refund));

/** The charge's line in the report once it is captured (at its captured amount). */
export async function recordChargeTransaction(tx: Tx, deps: SandboxDeps, row: ChargeRow): Promise<void> {
  if (row.status !== 'succeeded' || row.amount_captured_minor <= 0) return;
  await tx`
    INSERT INTO sandbox.balance_transactions (id, type, source, charge_id, reference, amount_minor, fee_minor, currency, available_at)
    VALUES (
      ${newBalanceTransactionId()}, 'charge', ${row.id}, ${row.id}, ${row.reference}, ${row.amount_captured_minor},
      ${chargeFeeMinor(row.amount_captured_minor)}, ${row.currency},
      clock_timestamp() + ${deps.config.availableAfterMs}::bigint * interval '1 millisecond'
    )`;
}

/** A successful refund's line in the report (negative). */
export async function recordRefundTransaction(tx: Tx, deps: SandboxDeps, refund: RefundRow, charge: ChargeRow): Promise<void> {
  if (refund.status !== 'succeeded') return;
  await tx`
    INSERT INTO sandbox.balance_transactions (id, type, source, charge_id, reference, amount_minor, fee_minor, currency, available_at)
    VALUES (
      ${newBalanceTransactionId()}, 'refund', ${refund.id}, ${charge.id}, ${refund.reference === '' ? null : refund.reference},
      ${-refund.amount_minor}, 0, ${charge.currency},
      clock_timestamp() + ${deps.config.availableAfterMs}::bigint * interval '1 millisecond'
    )`;
}


/** A dispute's event: its object is the dispute; it belongs to its charge's stream (the reorder fault's). */
export const disputeEvent = (tx: Tx, deps: SandboxDeps, type: string, dispute: DisputeRow, charge: Pick<ChargeRow, 'reference'>) =>
  recordEvent(tx, deps, type, dispute.charge_id, disputeJson(dispute, charge));

/** A chargeback's line in the report: the withdrawal (negative, with the dispute fee) or the reinstatement of a won one. */
export async function recordDisputeTransaction(
  tx: Tx,
  deps: SandboxDeps,
  dispute: DisputeRow,
  charge: Pick<ChargeRow, 'reference'>,
  type: 'dispute' | 'dispute_reversal',
): Promise<void> {
  const withdrawal = type === 'dispute';
  await tx`
    INSERT INTO sandbox.balance_transactions (id, type, source, charge_id, reference, amount_minor, fee_minor, currency, available_at)
    VALUES (
      ${newBalanceTransactionId()}, ${type}, ${dispute.id}, ${dispute.charge_id}, ${charge.reference},
      ${withdrawal ? -dispute.amount_minor : dispute.amount_minor}, ${withdrawal ? disputeFeeMinor : 0}, ${dispute.currency},
      clock_timestamp()
    )`;
}

/** pm_card_createDispute*: once captured, the network's dispute is due SANDBOX_DISPUTE_AFTER_MS later (a stored time, so a restart keeps it). */
async function scheduleDispute(tx: Tx, deps: SandboxDeps, row: ChargeRow): Promise<void> {
  if (row.status !== 'succeeded' || paymentMethodBehaviour(row.payment_method)?.kind !== 'dispute') return;
  await tx`
    UPDATE sandbox.charges SET dispute_at = clock_timestamp() + ${deps.config.disputeAfterMs}::bigint * interval '1 millisecond'
    WHERE id = ${row.id} AND dispute_at IS NULL AND NOT EXISTS (SELECT 1 FROM sandbox.disputes WHERE charge_id = ${row.id})`;
}

/** Everything a charge that reached this row's state records: its event, its money if captured, its dispute if it is to receive one. */
export async function chargeChanged(tx: Tx, deps: SandboxDeps, row: ChargeRow): Promise<void> {
  await chargeEvent(tx, deps, row);
  await recordChargeTransaction(tx, deps, row);
  await scheduleDispute(tx, deps, row);
}
