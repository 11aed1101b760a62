-- Fewer pages per payment: the checks every payment paid row by row, made once per statement
-- or where the value enters.

-- A ledger posting's lines are one INSERT (db/ledger.ts), checked by one statement-level
-- trigger over the inserted rows instead of two row triggers, a deferred balance check that
-- read the transaction's lines back, and two foreign keys:
--   * the statement's lines balance to zero per transaction and currency (every statement
--     that adds lines balances, so every transaction does);
--   * each line's transaction exists, and its account exists in the line's currency, belongs
--     to the transaction's tenant (which no foreign key checked) and is not frozen.
-- Transactions and lines are append-only (ledger_append_only) and accounts are never deleted,
-- so a line checked at its insert stays valid.
DROP TRIGGER ledger_entries_balance ON ledger_entries;
DROP TRIGGER ledger_entries_frozen ON ledger_entries;
DROP FUNCTION ledger_transaction_balances();
DROP FUNCTION ledger_refuse_frozen_account();
ALTER TABLE ledger_entries
  DROP CONSTRAINT ledger_entries_account_id_currency_fkey,
  DROP CONSTRAINT ledger_entries_transaction_id_fkey;

CREATE FUNCTION ledger_check_lines() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  SELECT transaction_id, currency INTO bad FROM new_lines
  GROUP BY transaction_id, currency HAVING sum(amount_minor) <> 0 LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger transaction % does not balance to zero in %', bad.transaction_id, bad.currency
      USING ERRCODE = 'check_violation';
  END IF;
  -- One index probe per transaction and one per line's account (OFFSET 0 keeps each a probe,
  -- never a join over the whole table).
  WITH transactions AS (
    SELECT d.transaction_id, t.tenant_id
    FROM (SELECT DISTINCT transaction_id FROM new_lines) d
    LEFT JOIN LATERAL (SELECT tenant_id FROM ledger_transactions WHERE id = d.transaction_id OFFSET 0) t ON true
  )
  SELECT n.transaction_id, n.account_id, t.tenant_id IS NULL AS no_transaction, a.tenant_id IS DISTINCT FROM t.tenant_id AS no_account, a.frozen
  INTO bad
  FROM new_lines n
  JOIN transactions t USING (transaction_id)
  LEFT JOIN LATERAL (SELECT tenant_id, frozen FROM ledger_accounts WHERE id = n.account_id AND currency = n.currency OFFSET 0) a ON true
  WHERE t.tenant_id IS NULL OR a.tenant_id IS DISTINCT FROM t.tenant_id OR a.frozen
  LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  ELSIF bad.no_transaction THEN
    RAISE EXCEPTION 'ledger transaction % does not exist', bad.transaction_id USING ERRCODE = 'foreign_key_violation';
  ELSIF bad.no_account THEN
    RAISE EXCEPTION 'ledger account % is not an account of transaction %''s tenant in its currency', bad.account_id, bad.transaction_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RAISE EXCEPTION 'ledger account % is frozen', bad.account_id USING ERRCODE = 'P0001', HINT = 'ledger_account_frozen';
END $$;
CREATE TRIGGER ledger_entries_check AFTER INSERT ON ledger_entries
  REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT EXECUTE FUNCTION ledger_check_lines();

CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME;
END $$;
CREATE TRIGGER ledger_accounts_kept BEFORE DELETE ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION refuse_delete();

-- A payment's posting is written in the transaction that has just updated its payment row
-- (activities/payment-steps.ts), and payments are never deleted: the foreign key from
-- ledger_transactions to payments re-read a row that transaction holds.
CREATE TRIGGER payments_kept BEFORE DELETE ON payments FOR EACH ROW EXECUTE FUNCTION refuse_delete();
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_payment_id_fkey;

-- Transactions are appended with created_at = now(): a BRIN index finds a reconciliation
-- window's postings (db/reconciliation.ts) from per-range bounds, and an insert into the
-- newest, not yet summarized range writes nothing to it.
DROP INDEX ledger_transactions_by_time;
CREATE INDEX ledger_transactions_by_time ON ledger_transactions USING brin (created_at);

-- A tenant is never deleted, and every tenant id a payment writes comes from the tenant's own
-- row (the API key's lookup at authentication). So the four tables every payment writes drop
-- their foreign key to tenants: each check was an index probe plus a KEY SHARE lock on the one
-- tenant row that all of that tenant's concurrent payments share. The tables written rarely
-- keep theirs.
CREATE TRIGGER tenants_kept BEFORE DELETE ON tenants FOR EACH ROW EXECUTE FUNCTION refuse_delete();
ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_tenant_id_fkey;
ALTER TABLE payments DROP CONSTRAINT payments_tenant_id_fkey;
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_tenant_id_fkey;
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_tenant_id_fkey;

-- The event list by delivery state needs an index only for the states an event leaves
-- (pending, failed: few at a time); a filter on delivered or skipped, what most events end
-- as, reads the tenant's events in order (outbox_events_by_tenant). An event recorded as
-- skipped (its tenant has no endpoint) or delivered writes no entry here.
DROP INDEX outbox_events_by_tenant_state;
CREATE INDEX outbox_events_by_tenant_state ON outbox_events (tenant_id, delivery_state, seq DESC)
  WHERE delivery_state IN ('pending', 'failed');

-- An event's seq comes from its sequence and is only read with its tenant (the event list's
-- keyset, outbox_events_by_tenant): the separate unique index on seq alone served no query.
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_seq_key;

-- Only the closed-wait sweep (db/abandoned.ts) reads payments by updated_at, and only those
-- in a waiting status: a partial index holds just them, so a payment that reaches a final
-- status leaves it and its update writes no entry there.
DROP INDEX payments_by_updated_at;
CREATE INDEX payments_waiting_by_updated_at ON payments (updated_at)
  WHERE status IN ('processing', 'requires_action', 'requires_capture');

