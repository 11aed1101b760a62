-- The PSP's report of money moved (for reconciliation): one line per captured charge (positive) and per
-- successful refund (negative), written in the transaction that moves the money.
CREATE TABLE sandbox.balance_transactions (
  seq           bigserial PRIMARY KEY,
  id            text NOT NULL UNIQUE,
  type          text NOT NULL CHECK (type IN ('charge', 'refund')),
  -- The charge id or the refund id.
  source        text NOT NULL,
  charge_id     text NOT NULL REFERENCES sandbox.charges (id),
  -- The charge's or the refund's reference (our payment id or refund id); NULL when none.
  reference     text,
  amount_minor  bigint NOT NULL,
  fee_minor     bigint NOT NULL,
  currency      char(3) NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- 'pending' until then, 'available' after.
  available_at  timestamptz NOT NULL
);
CREATE INDEX balance_transactions_created_idx ON sandbox.balance_transactions (created_at, seq);
CREATE INDEX balance_transactions_charge_idx ON sandbox.balance_transactions (charge_id);
