import { expect } from 'vitest';
import type { Sql } from '../../db/connect';

/** Everything one payment caused, counted at the source of truth of each effect. */
export interface PaymentEffects {
  /** Charges the provider sandbox committed for this payment (its reference), declined ones included. */
  charges: number;
  ledgerTransactions: number;
  events: Record<string, number>;
}

export async function chargesAtProvider(sandboxUrl: string, reference: string): Promise<{ id: string; status: string; amount_captured_minor: number; amount_refunded_minor: number; succeeded_at?: string | null }[]> {
  const response = await fetch(`${sandboxUrl}/v1/charges?reference=${encodeURIComponent(reference)}`);
  if (!response.ok) throw new Error(`sandbox lookup failed: ${response.status}`);
  return ((await response.json()) as { data: never[] }).data;
}

export async function effectsOf(sql: Sql, sandboxUrl: string, paymentId: string): Promise<PaymentEffects> {
  const [ledger] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger_transactions WHERE payment_id = ${paymentId} AND refund_id IS NULL`;
  const events = await sql<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_events
    WHERE payload -> 'data' -> 'object' ->> 'id' = ${paymentId}
    GROUP BY type`;
  return {
    charges: (await chargesAtProvider(sandboxUrl, paymentId)).length,
    ledgerTransactions: ledger!.n,
    events: Object.fromEntries(events.map((e) => [e.type, e.n])),
  };
}

/**
 * The ledger invariants, checked over the whole database: every transaction balances to zero
 * per currency, and each merchant's balance equals captured minus succeeded refunds minus what
 * chargebacks took (the fee, and the amount unless won, in the first round or the second; a dispute's row and its postings are
 * written in one transaction). `tenantId`: that tenant's ledger alone (a file whose database other
 * files of the same worker used before it, under `npm test`, where one of them may have broken
 * the ledger on purpose).
 */
export async function expectLedgerConsistent(sql: Sql, tenantId?: string): Promise<void> {
  const unbalanced = await sql`
    SELECT e.transaction_id, e.currency, sum(e.amount_minor) AS total FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
    WHERE ${tenantId ?? null}::text IS NULL OR t.tenant_id = ${tenantId ?? null}
    GROUP BY e.transaction_id, e.currency HAVING sum(e.amount_minor) <> 0`;
  expect(unbalanced).toEqual([]);
  const mismatched = await sql`
    WITH owed AS (
      SELECT p.tenant_id, p.currency,
             sum(p.amount_captured_minor)::bigint AS captured,
             coalesce(sum((SELECT sum(r.amount_minor) FROM refunds r WHERE r.payment_id = p.id AND r.status = 'succeeded')), 0)::bigint AS refunded
      FROM payments p GROUP BY p.tenant_id, p.currency
    ), disputed AS (
      SELECT tenant_id, currency, sum(fee_minor + CASE WHEN status = 'won' THEN 0 ELSE amount_minor END)::bigint AS withdrawn
      FROM disputes WHERE stage IN ('chargeback', 'pre_arbitration') GROUP BY tenant_id, currency
    ), booked AS (
      SELECT a.tenant_id, a.currency, -coalesce(sum(e.amount_minor), 0)::bigint AS balance
      FROM ledger_accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
      WHERE a.code = 'merchant_balance' GROUP BY a.tenant_id, a.currency
    )
    SELECT o.tenant_id, o.currency, o.captured, o.refunded, coalesce(d.withdrawn, 0) AS withdrawn, coalesce(b.balance, 0) AS balance
    FROM owed o LEFT JOIN booked b USING (tenant_id, currency) LEFT JOIN disputed d USING (tenant_id, currency)
    WHERE o.captured - o.refunded - coalesce(d.withdrawn, 0) <> coalesce(b.balance, 0)
      AND (${tenantId ?? null}::text IS NULL OR o.tenant_id = ${tenantId ?? null})`;
  expect(mismatched).toEqual([]);
}
