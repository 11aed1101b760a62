-- Fewer index pages per payment.
--
-- A ledger entry is line `line` of its transaction: (transaction_id, line) is its key and the
-- index that finds a transaction's lines, so an entry writes two indexes (this one and
-- by_account) and no sequence.
ALTER TABLE ledger_entries ADD COLUMN line smallint;
ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only;
UPDATE ledger_entries e SET line = n.line
FROM (SELECT id, row_number() OVER (PARTITION BY transaction_id ORDER BY id) AS line FROM ledger_entries) n
WHERE n.id = e.id;
ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only;
ALTER TABLE ledger_entries ALTER COLUMN line SET NOT NULL, ADD CHECK (line > 0);
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_pkey, DROP COLUMN id;
ALTER TABLE ledger_entries ADD PRIMARY KEY (transaction_id, line);
DROP INDEX ledger_entries_by_transaction;

-- An idempotency record's completion changes no indexed column (its state is in no index, and
-- its expiry only moves when the claim's did not cover the retention from completion:
-- db/idempotency-records.ts), so with room on the page PostgreSQL keeps the new row version
-- there (HOT) and writes no index. The retention job finds expired records by expiry alone.
DROP INDEX idempotency_records_expired;
CREATE INDEX idempotency_records_by_expiry ON idempotency_records (expires_at);
ALTER TABLE idempotency_records SET (fillfactor = 80);

-- The relay's claim of an event sets only locked_until, which no index holds: with room on
-- the page it is a HOT update.
ALTER TABLE outbox_events SET (fillfactor = 80);
