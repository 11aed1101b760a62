-- Payments that wait: for the customer's 3-D Secure challenge (requires_action),
-- for an asynchronous method's outcome (processing), and the status a wait ends in when its
-- window passes (expired). The statuses, and which of them hold an order, are those of the
-- lifecycle table (domain/payment-lifecycle.ts); test/integration/payment-lifecycle-sql.test.ts
-- reads this CHECK and this index back from PostgreSQL and compares them with the table.

ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN
  ('processing', 'requires_action', 'requires_capture', 'succeeded', 'declined', 'failed', 'canceled', 'expired', 'refunded'));

-- A payment waiting for its customer holds the order like any live payment. Built before the
-- old index is dropped, so the guard never lapses.
CREATE UNIQUE INDEX payments_one_live_per_order_007 ON payments (tenant_id, order_id)
  WHERE status IN ('processing', 'requires_action', 'requires_capture', 'succeeded', 'refunded');
DROP INDEX payments_one_live_per_order;
ALTER INDEX payments_one_live_per_order_007 RENAME TO payments_one_live_per_order;

ALTER TABLE payments
  -- Where the PSP's challenge page sends the customer back (the merchant's, validated by the API).
  ADD COLUMN return_url text,
  -- What the customer must do while the payment is requires_action:
  -- {"type":"redirect_to_url","redirect_to_url":{"url":…,"return_url":…}}; null otherwise.
  ADD COLUMN next_action jsonb;

-- Every webhook a PSP sent us, stored once: a redelivery hits the primary key and changes
-- nothing. Kept with what it meant (the payment it concerns, or none: an unknown charge is kept
-- for an operator) and whether it reached the payment's workflow.
CREATE TABLE provider_events (
  provider      text NOT NULL,
  event_id      text NOT NULL,
  type          text NOT NULL,
  charge_id     text,
  charge_status text,
  -- Our payment the charge belongs to; null: no such payment here (kept for an operator).
  payment_id    text REFERENCES payments (id),
  -- 'forward': passed to the payment's workflow; 'unknown_charge'; 'ignored': nothing to apply (e.g. a refund event).
  disposition   text NOT NULL CHECK (disposition IN ('forward', 'unknown_charge', 'ignored')),
  -- When the workflow was told (null while not yet: a redelivery tries again).
  forwarded_at  timestamptz,
  created_at    timestamptz NOT NULL,
  received_at   timestamptz NOT NULL DEFAULT now(),
  payload       jsonb NOT NULL,
  PRIMARY KEY (provider, event_id)
);
CREATE INDEX provider_events_by_payment ON provider_events (payment_id, received_at);
CREATE INDEX provider_events_unknown ON provider_events (received_at) WHERE disposition = 'unknown_charge';
