-- Revenue recovery's budget per card (docs/recovery.md): every attempt of a saved payment method a
-- recovering payment makes is reserved here first, across every PSP and every payment of the card.
-- The budget row is the one lock the reservations of a card take (SELECT … FOR UPDATE), so two
-- payments of one card reserving at once are counted one after the other and cannot overrun it.
CREATE TABLE card_attempt_budgets (
  payment_method_id  text PRIMARY KEY REFERENCES payment_methods (id)
);

CREATE TABLE card_attempts (
  payment_method_id  text NOT NULL REFERENCES card_attempt_budgets (payment_method_id),
  payment_id         text NOT NULL REFERENCES payments (id),
  -- The payment's attempt this reserves: a repeated reservation of it finds this row.
  attempt            integer NOT NULL CHECK (attempt >= 1),
  reserved_at        timestamptz NOT NULL,
  PRIMARY KEY (payment_id, attempt)
);
CREATE INDEX card_attempts_card_idx ON card_attempts (payment_method_id, reserved_at);
