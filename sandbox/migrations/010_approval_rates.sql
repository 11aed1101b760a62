-- How the issuers behind this sandbox answer its plain test cards (POST /_sandbox/approval_rates,
-- sandbox/approval-rates.ts): the probability that a charge of pm_card_visa or pm_card_mastercard
-- (or a saved card of one) is approved, per card network and currency, `*` for any. The rules are
-- one sandbox's: `sandbox` is its own URL (as sandbox.network_attempts names an acquirer), so
-- sandboxes sharing a database never read each other's. No row for a sandbox: every plain card
-- is approved, as before.
CREATE TABLE IF NOT EXISTS sandbox.approval_rates (
  sandbox   text NOT NULL,
  network   text NOT NULL CHECK (network IN ('visa', 'mastercard', '*')),
  currency  text NOT NULL CHECK (currency ~ '^([A-Z]{3}|\*)$'),
  rate      double precision NOT NULL CHECK (rate >= 0 AND rate <= 1),
  PRIMARY KEY (sandbox, network, currency)
);
