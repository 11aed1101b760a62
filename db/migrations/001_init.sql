-- The orchestrator's schema. Every duplicate a retry could create is refused here by a
-- constraint, so correctness does not depend on application code getting a check right.

CREATE TABLE tenants (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  -- SHA-256 of the whole API key; looked up by this index, never compared in a loop.
  -- (bcrypt would block the event loop on every request; the key is 256 random bits.)
  api_key_hash    bytea NOT NULL UNIQUE,
  api_key_prefix  text NOT NULL,
  webhook_secret  text NOT NULL,
  webhook_url     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One row per scoped key: (tenant, "METHOD /route/template", Idempotency-Key).
CREATE TABLE idempotency_records (
  tenant_id         text NOT NULL REFERENCES tenants (id),
  operation         text NOT NULL,
  idempotency_key   text NOT NULL,
  fingerprint       text NOT NULL,
  state             text NOT NULL CHECK (state IN ('running', 'completed')),
  workflow_id       text NOT NULL,
  resource_id       text NOT NULL,
  -- The first final response, kept as the exact bytes served (text, not jsonb: jsonb
  -- would reorder keys and break the byte-identical replay).
  response_status   integer,
  response_body     text,
  response_location text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz,
  -- While running: created_at + retention. On completion: completed_at + the same retention.
  expires_at        timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, operation, idempotency_key),
  CHECK ((state = 'completed') = (response_status IS NOT NULL AND response_body IS NOT NULL))
);
CREATE INDEX idempotency_records_expired ON idempotency_records (expires_at) WHERE state = 'completed';

CREATE TABLE payments (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL REFERENCES tenants (id),
  order_id               text NOT NULL,
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
  currency               char(3) NOT NULL,
  status                 text NOT NULL CHECK (status IN
                           ('processing', 'requires_capture', 'succeeded', 'declined', 'failed', 'canceled', 'refunded')),
  capture_method         text NOT NULL CHECK (capture_method IN ('automatic', 'manual')),
  payment_method         text NOT NULL,
  description            text,
  metadata               jsonb NOT NULL DEFAULT '{}',
  amount_captured_minor  bigint NOT NULL DEFAULT 0,
  amount_refunded_minor  bigint NOT NULL DEFAULT 0,
  provider_charge_id     text,
  failure_code           text,
  failure_message        text,
  workflow_id            text NOT NULL,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  CHECK (amount_captured_minor BETWEEN 0 AND amount_minor),
  -- The refund guard of last resort: whatever the application does, the refunded total
  -- (pending refunds included) can never pass what was captured.
  CHECK (amount_refunded_minor BETWEEN 0 AND amount_captured_minor)
);
-- The domain guard that outlives any idempotency key: one live or paid payment per order.
-- Declined, failed and canceled payments leave the order free to be paid again.
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (tenant_id, order_id)
  WHERE status IN ('processing', 'requires_capture', 'succeeded', 'refunded');
CREATE INDEX payments_by_tenant ON payments (tenant_id, id DESC);
CREATE INDEX payments_by_order ON payments (tenant_id, order_id, id DESC);

CREATE TABLE refunds (
  id                  text PRIMARY KEY,
  tenant_id           text NOT NULL REFERENCES tenants (id),
  payment_id          text NOT NULL REFERENCES payments (id),
  amount_minor        bigint NOT NULL CHECK (amount_minor > 0),
  currency            char(3) NOT NULL,
  status              text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  reason              text,
  -- The client's Idempotency-Key for this refund: one refund per (payment, key).
  refund_key          text NOT NULL,
  provider_refund_id  text,
  failure_code        text,
  failure_message     text,
  workflow_id         text NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (payment_id, refund_key)
);
CREATE INDEX refunds_by_payment ON refunds (payment_id, id DESC);

-- Double-entry ledger. Entries are signed: debit > 0, credit < 0.
CREATE TABLE ledger_accounts (
  id          bigserial PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (id),
  code        text NOT NULL CHECK (code IN ('provider_receivable', 'merchant_balance')),
  currency    char(3) NOT NULL,
  -- A frozen account refuses postings (e.g. a merchant under review): a permanent
  -- ledger refusal, which the payment workflow answers with compensation.
  frozen      boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, code, currency),
  UNIQUE (id, currency)
);

CREATE TABLE ledger_transactions (
  id           text PRIMARY KEY,
  tenant_id    text NOT NULL REFERENCES tenants (id),
  -- The business event this transaction records, e.g. 'payment:pay_x:capture'.
  -- A replayed activity hits this constraint and posts nothing.
  event_key    text NOT NULL,
  payment_id   text REFERENCES payments (id),
  refund_id    text REFERENCES refunds (id),
  description  text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, event_key)
);
CREATE INDEX ledger_transactions_by_payment ON ledger_transactions (payment_id);

CREATE TABLE ledger_entries (
  id              bigserial PRIMARY KEY,
  transaction_id  text NOT NULL REFERENCES ledger_transactions (id),
  account_id      bigint NOT NULL,
  currency        char(3) NOT NULL,
  amount_minor    bigint NOT NULL CHECK (amount_minor <> 0),
  FOREIGN KEY (account_id, currency) REFERENCES ledger_accounts (id, currency)
);
CREATE INDEX ledger_entries_by_transaction ON ledger_entries (transaction_id);
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id);

-- Checked at commit (deferred), so a transaction's entries can be inserted one by one.
CREATE FUNCTION ledger_transaction_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM ledger_entries
    WHERE transaction_id = NEW.transaction_id
    GROUP BY currency HAVING sum(amount_minor) <> 0
  ) THEN
    RAISE EXCEPTION 'ledger transaction % does not balance to zero per currency', NEW.transaction_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ledger_entries_balance
  AFTER INSERT ON ledger_entries DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION ledger_transaction_balances();

CREATE FUNCTION ledger_refuse_frozen_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT frozen FROM ledger_accounts WHERE id = NEW.account_id) THEN
    RAISE EXCEPTION 'ledger account % is frozen', NEW.account_id
      USING ERRCODE = 'P0001', HINT = 'ledger_account_frozen';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER ledger_entries_frozen BEFORE INSERT ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_frozen_account();

-- The ledger is append-only: corrections are new, reversing transactions.
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the ledger is append-only (% on %)', TG_OP, TG_TABLE_NAME;
END $$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Transactional outbox: written in the transaction that records the business fact.
CREATE TABLE outbox_events (
  seq              bigserial UNIQUE,
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL REFERENCES tenants (id),
  type             text NOT NULL,
  -- The business fact, e.g. 'payment:pay_x:succeeded': one event per fact, however
  -- often the activity that records it runs.
  event_key        text NOT NULL,
  payload          jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  delivery_state   text NOT NULL DEFAULT 'pending'
                     CHECK (delivery_state IN ('pending', 'delivered', 'failed', 'skipped')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  locked_until     timestamptz,
  delivered_at     timestamptz,
  UNIQUE (tenant_id, event_key)
);
CREATE INDEX outbox_events_due ON outbox_events (next_attempt_at) WHERE delivery_state = 'pending';
CREATE INDEX outbox_events_by_tenant ON outbox_events (tenant_id, seq DESC);

CREATE TABLE webhook_deliveries (
  id               bigserial PRIMARY KEY,
  event_id         text NOT NULL REFERENCES outbox_events (id),
  attempt          integer NOT NULL,
  url              text NOT NULL,
  response_status  integer,
  error            text,
  duration_ms      integer NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, attempt)
);

-- Wakes the API process waiting for this operation's outcome (LISTEN idempotency_completed):
-- the notification is sent at commit, before Temporal even learns the activity finished.
CREATE FUNCTION idempotency_notify_completed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('idempotency_completed', NEW.tenant_id || '|' || NEW.operation || '|' || NEW.idempotency_key);
  RETURN NULL;
END $$;
CREATE TRIGGER idempotency_records_completed_insert AFTER INSERT ON idempotency_records
  FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION idempotency_notify_completed();
CREATE TRIGGER idempotency_records_completed_update AFTER UPDATE OF state ON idempotency_records
  FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state <> 'completed') EXECUTE FUNCTION idempotency_notify_completed();

-- Wakes the outbox relay as soon as an event commits (it also polls, so a lost
-- notification only delays delivery).
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox_event', '');
  RETURN NULL;
END $$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
