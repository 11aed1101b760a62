-- Revenue recovery (docs/recovery.md): a declined off-session payment retried within the card
-- networks' rules is `recovering` while it waits for its next attempt. It holds the order and
-- waits like the other waiting statuses (the lifecycle table, domain/payments.ts;
-- test/integration/payment-lifecycle-sql.test.ts compares this CHECK and these indexes with it),
-- and shows where its recovery stands (`recovery`, the API's object: domain/recovery.ts recoveryView).

ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN
  ('processing', 'requires_action', 'requires_capture', 'recovering', 'succeeded', 'declined', 'failed', 'canceled', 'expired', 'refunded'));

-- Built before the old index is dropped, so the order guard never lapses.
CREATE UNIQUE INDEX payments_one_live_per_order_019 ON payments (tenant_id, order_id)
  WHERE status IN ('processing', 'requires_action', 'requires_capture', 'recovering', 'succeeded', 'refunded');
DROP INDEX payments_one_live_per_order;
ALTER INDEX payments_one_live_per_order_019 RENAME TO payments_one_live_per_order;

DROP INDEX payments_waiting_by_updated_at;
CREATE INDEX payments_waiting_by_updated_at ON payments (updated_at)
  WHERE status IN ('processing', 'requires_action', 'requires_capture', 'recovering');

ALTER TABLE payments ADD COLUMN recovery jsonb;
