-- Customers and their saved payment methods (docs/CONTRACT.md §3.9).
-- A payment method holds only what charging it again needs: the card's brand, last4 and
-- expiry (shown), the card network's transaction id of the payment that saved it, and per PSP
-- the token that PSP saved the card as (provider_tokens: {"<provider name>": "<token>"}). The
-- tokens and the network transaction id are never returned by the API.

CREATE TABLE customers (
  id          text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (id),
  email       text,
  name        text,
  metadata    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE payment_methods (
  id                      text PRIMARY KEY,
  tenant_id               text NOT NULL REFERENCES tenants (id),
  customer_id             text NOT NULL REFERENCES customers (id),
  card_brand              text NOT NULL,
  card_last4              text NOT NULL CHECK (card_last4 ~ '^[0-9]{4}$'),
  card_exp_month          smallint NOT NULL CHECK (card_exp_month BETWEEN 1 AND 12),
  card_exp_year           smallint NOT NULL,
  network_transaction_id  text NOT NULL,
  provider_tokens         jsonb NOT NULL CHECK (jsonb_typeof(provider_tokens) = 'object'),
  -- The payment whose success saved it: saving is a step of recording that outcome, and a
  -- repeated step finds the method already there.
  source_payment_id       text NOT NULL UNIQUE REFERENCES payments (id),
  detached_at             timestamptz,
  created_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payment_methods_by_customer ON payment_methods (customer_id, id) WHERE detached_at IS NULL;

-- What a payment asked of its card: to be saved for the customer (setup_future_usage), or to be
-- charged without the customer present (off_session, a saved method).
ALTER TABLE payments
  ADD COLUMN customer_id text REFERENCES customers (id),
  ADD COLUMN setup_future_usage text CHECK (setup_future_usage IN ('off_session')),
  ADD COLUMN off_session boolean NOT NULL DEFAULT false;
