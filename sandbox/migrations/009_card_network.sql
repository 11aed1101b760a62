-- The card network's view of every off-session attempt of a saved card, across every sandbox on
-- the network (each sandbox writes here through its network database, SANDBOX_NETWORK_DATABASE_URL,
-- by default its own): what the issuer answered, with the scheme's signal, and which rule a
-- retry broke. One row per acquirer and idempotency key, so a retried request counts once.
CREATE TABLE sandbox.network_attempts (
  acquirer          text NOT NULL,
  idempotency_key   text NOT NULL,
  -- The card account: the nonce of the network transaction id issued when the card was saved.
  account           text NOT NULL,
  attempted_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  declined          boolean NOT NULL,
  decline_code      text,
  network_decline_code text,
  decline_category  smallint,
  network_advice_code text,
  -- The rule this attempt broke (retry_after_hard_decline, retry_before_advice_wait, daily_limit, monthly_limit), or NULL.
  excessive         text,
  PRIMARY KEY (acquirer, idempotency_key)
);
CREATE INDEX network_attempts_account_idx ON sandbox.network_attempts (account, attempted_at);

-- The scheme's signal on a declined charge (as Stripe's charge.outcome).
ALTER TABLE sandbox.charges
  ADD COLUMN network_decline_code text,
  ADD COLUMN decline_category smallint,
  ADD COLUMN network_advice_code text;

-- A retry that broke a rule is charged by the network: an `excessive_retry` line (no amount, a fee).
ALTER TABLE sandbox.balance_transactions DROP CONSTRAINT balance_transactions_type_check;
ALTER TABLE sandbox.balance_transactions ADD CONSTRAINT balance_transactions_type_check
  CHECK (type IN ('charge', 'refund', 'dispute', 'dispute_reversal', 'excessive_retry'));
