-- Revenue recovery's budget per card, not per saved copy of it (docs/recovery.md "The card's
-- budget"): the card networks count attempts per card and merchant, so one tenant's copies of a
-- card (saved twice, by one customer or two) share one budget. A card is known by its key: the
-- fingerprint its PSP gave when it was saved, or, from a PSP that gives none, its brand, last four
-- digits and expiry together (two cards alike in all three share a budget: the safe side).
ALTER TABLE payment_methods
  ADD COLUMN card_fingerprint text CHECK (card_fingerprint <> ''),
  ADD COLUMN card_key text GENERATED ALWAYS AS (
    CASE WHEN card_fingerprint IS NOT NULL THEN 'fingerprint:' || card_fingerprint
         ELSE 'card:' || lower(card_brand) || ':' || card_last4 || ':' || card_exp_month::text || ':' || card_exp_year::text END
  ) STORED;
CREATE INDEX payment_methods_by_card ON payment_methods (tenant_id, card_key);

-- One row per card of a tenant: the lock every reservation of the card takes (SELECT … FOR
-- UPDATE), and the card's last hard decline of an off-session charge (the issuer said never,
-- or only the customer can answer): while it is set no copy of the card is charged off-session,
-- until a payment with the card succeeds on-session.
CREATE TABLE tenant_cards (
  tenant_id                 text NOT NULL REFERENCES tenants (id),
  card_key                  text NOT NULL,
  hard_decline_code         text,
  hard_decline_message      text,
  hard_declined_at          timestamptz,
  hard_decline_payment_id   text REFERENCES payments (id),
  PRIMARY KEY (tenant_id, card_key),
  CHECK ((hard_decline_code IS NULL) = (hard_declined_at IS NULL))
);

-- The budgets kept per saved method so far become their card's: copies merge into one row.
INSERT INTO tenant_cards (tenant_id, card_key)
SELECT DISTINCT m.tenant_id, m.card_key
FROM card_attempt_budgets b JOIN payment_methods m ON m.id = b.payment_method_id;

-- Each reservation counts against its card; payment_method_id stays the copy that reserved it.
ALTER TABLE card_attempts ADD COLUMN tenant_id text, ADD COLUMN card_key text;
UPDATE card_attempts a SET tenant_id = m.tenant_id, card_key = m.card_key
FROM payment_methods m WHERE m.id = a.payment_method_id;
ALTER TABLE card_attempts
  ALTER COLUMN tenant_id SET NOT NULL,
  ALTER COLUMN card_key SET NOT NULL,
  DROP CONSTRAINT card_attempts_payment_method_id_fkey,
  ADD CONSTRAINT card_attempts_payment_method_id_fkey FOREIGN KEY (payment_method_id) REFERENCES payment_methods (id),
  ADD CONSTRAINT card_attempts_card_fkey FOREIGN KEY (tenant_id, card_key) REFERENCES tenant_cards (tenant_id, card_key);
DROP INDEX card_attempts_card_idx;
CREATE INDEX card_attempts_card_idx ON card_attempts (tenant_id, card_key, reserved_at);

DROP TABLE card_attempt_budgets;
