-- Saved cards (docs/sandbox.md "Saved cards and the card network"). A charge made with
-- setup_future_usage saves its card as a token of this sandbox (sandbox.saved_cards), usable
-- once the charge was authorized. network_transaction_id: the simulated card network's id of
-- the charge's authorization, which any sandbox sharing the network key can verify.
CREATE TABLE sandbox.saved_cards (
  id                      text PRIMARY KEY,
  -- The test card saved (its behaviour decides later charges of the token).
  payment_method          text NOT NULL,
  charge_id               text NOT NULL UNIQUE REFERENCES sandbox.charges (id),
  network_transaction_id  text NOT NULL,
  created_at              timestamptz NOT NULL DEFAULT clock_timestamp()
);

ALTER TABLE sandbox.charges
  ADD COLUMN off_session boolean NOT NULL DEFAULT false,
  -- The saved card token this charge made (setup_future_usage), or charged.
  ADD COLUMN saved_card text,
  -- The network transaction id this charge was made with (a merchant-initiated charge by the
  -- network's id of an earlier one), or that its authorization got.
  ADD COLUMN network_transaction_id text;
